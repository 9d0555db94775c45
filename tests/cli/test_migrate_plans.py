"""What ``tiltframe migrate`` says before it backfills: the run's refusal, ``validate -d`` and ``migrate
--dry-run`` name ``--input STREAM=PATH`` as the way to give a measure added its history; ``migrate --dry-run
--input`` shows the backfill (or the rebuild) it would do, its levels and its input, and changes nothing;
``migrate --input`` then does it, the measure equal to pandas over the raw events from the start."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import tiltframe as tf
from tiltframe.errors import StoreError

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
A = """define stream Trades (symbol string, price double, volume long, ts long);
define aggregation TA from Trades select symbol, sum(price) as total group by symbol aggregate by ts every sec ... hour;
"""
B = A.replace("sum(price) as total", "sum(price) as total, max(volume) as big")  # a measure added
C = B.replace("group by symbol", "group by symbol, volume").replace("select symbol,", "select symbol, volume,")
HOUR = 3_600_000
T0 = 472_222 * HOUR
HINT = ("measures big read NULL in the buckets stored before they are complete; tiltframe migrate APP -d DIR "
        "--input Trades=PATH backfills them from the inputs instead (every level recomputed from the files the "
        "pipeline read)")


def _tiltframe(args: list[str]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "1000"}
    return subprocess.run([sys.executable, "-m", "tiltframe", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=600, check=False, env=env)


def _state(data: Path) -> dict[str, str]:
    """Every file of the data directory and its content's digest (SQLite's write-ahead log and its index,
    which come and go with the connections, aside: the database file holds every committed change)."""
    return {str(p.relative_to(data)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(data.rglob("*")) if p.is_file() and "logs" not in p.parts
            and not p.name.endswith(("-wal", "-shm"))}


def test_the_plans_say_how_inputs_backfill_and_a_dry_run_changes_nothing(spark, tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    events = pd.DataFrame({"symbol": rng.choice(["IBM", "WSO2"], 200), "price": np.round(rng.uniform(1, 9, 200), 2),
                           "volume": rng.integers(1, 1000, 200), "ts": T0 + rng.integers(0, 2 * HOUR, 200)})
    inbox, data = tmp_path / "in", tmp_path / "data"
    inbox.mkdir()
    events.to_csv(inbox / "1.csv", index=False)
    files = {name: tmp_path / f"{name}.siddhi" for name in "ABC"}
    for name, text in zip("ABC", (A, B, C), strict=True):
        files[name].write_text(text, encoding="utf-8")
    tf.run(tf.load_app(A), {"Trades": inbox}, data_dir=data, spark=spark)

    # The run's refusal names the backfill.
    with pytest.raises(StoreError) as refused:
        tf.run(tf.load_app(B), {"Trades": inbox}, data_dir=data, spark=spark)
    assert "tiltframe migrate APP -d DIR (" + HINT + ")" in str(refused.value)

    before = _state(data)
    plain = _tiltframe(["migrate", str(files["B"]), "-d", str(data), "--dry-run"])
    assert plain.returncode == 0, plain.stderr
    assert plain.stdout.splitlines() == [
        "TA: would change",
        "  - measure big added: columns big_MAX at every level, NULL for the buckets stored before",
        f"  - {HINT}",
    ]
    validated = _tiltframe(["validate", str(files["B"]), "-d", str(data)])
    assert f"  - {HINT}" in validated.stdout.splitlines(), validated.stdout
    with_input = _tiltframe(["migrate", str(files["B"]), "-d", str(data), "--dry-run", "-i", f"Trades={inbox}"])
    assert with_input.returncode == 0, with_input.stderr
    assert with_input.stdout.splitlines()[-1] == (
        f"  - measures big backfilled from input Trades={inbox}: every level (seconds, minutes, hours) recomputed "
        "from the files its pipeline read, once they are found to hold what the store holds (else the measures "
        "read NULL before they are complete)")
    rebuilt = _tiltframe(["migrate", str(files["C"]), "-d", str(data), "--dry-run", "-i", f"Trades={inbox}"])
    assert rebuilt.stdout.splitlines()[-1] == (
        f"  - every level (seconds, minutes, hours) rebuilt from input Trades={inbox} (the files its pipeline "
        "committed) beside the stored rollup, then swapped in for it")
    refused_plan = _tiltframe(["migrate", str(files["C"]), "-d", str(data), "--dry-run"])
    assert refused_plan.stdout.splitlines()[-1] == (
        "  - refused without --input Trades=PATH: every level must be rebuilt from the inputs")
    stranger = _tiltframe(["migrate", str(files["B"]), "-d", str(data), "--dry-run", "-i", f"Trade={inbox}"])
    assert stranger.returncode == 2 and "--input names stream(s) Trade not defined in the app" in stranger.stderr
    assert _state(data) == before  # no dry run changed a byte
    assert [m for m, _ in tf.inspect(tf.load_app(A), data_dir=data)[0].complete_from] == []

    # The backfill the dry run described, done: the measure added equals pandas from the first bucket on.
    done = _tiltframe(["migrate", str(files["B"]), "-d", str(data), "-i", f"Trades={inbox}"])
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == (
        f"  - measures big backfilled from {len(events)} events of 1 input files: complete from the start")
    answer = tf.query(tf.load_app(B), "from TA within 0L, 9000000000000L per 'hours' select AGG_TIMESTAMP, symbol, big",
                      data_dir=data)
    want = events.assign(b=events["ts"] // HOUR * HOUR).groupby(["b", "symbol"])["volume"].max()
    assert {(int(t), s): int(v) for t, s, v in answer.itertuples(index=False)} == {k: int(v) for k, v in want.items()}
