"""``tiltframe replay``: the seed's first trickle example run as written over a generated metrics stream,
each output equal to pandas over the events; bad input lines come out on err and the replay goes on."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
from typer.testing import CliRunner

from tests.lang.test_trickle_parser import SEED_TUMBLING
from tiltframe.cli.app import app

runner = CliRunner()
SECOND = 1_000_000_000


def test_the_seed_tumbling_example_equals_pandas(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    ingest = np.cumsum(rng.integers(0, 4 * SECOND, size=400))
    values = rng.normal(50, 20, size=400).round(3)
    (tmp_path / "q.trickle").write_text(SEED_TUMBLING, encoding="utf-8")
    lines = [json.dumps({"ingest_ns": int(t), "event": {"value": float(v), "host": "a"}})
             for t, v in zip(ingest, values, strict=True)]
    (tmp_path / "in.jsonl").write_text("\n".join([*lines[:200], "{oops", *lines[200:]]) + "\n", encoding="utf-8")
    result = runner.invoke(app, ["replay", str(tmp_path / "q.trickle"), f"in={tmp_path / 'in.jsonl'}"])
    assert result.exit_code == 0, result.output
    outputs = [json.loads(line) for line in result.stdout.splitlines()]
    errors = [o for o in outputs if "error" in o]
    assert errors == [{"stream": "err", "event": "{oops", "error": f"{tmp_path / 'in.jsonl'}, line 201: not JSON "
                                                                     "(Expecting property name enclosed in double "
                                                                     "quotes at column 2)"}]
    # The oracle: a window starts at an event and holds the events before the first one 15 s or more after
    # its start, which emits it and starts the next; the last window is still open.
    df = pd.DataFrame({"t": ingest, "v": values})
    expected, start = [], 0
    while True:
        end = int(np.searchsorted(df["t"].to_numpy(), df["t"][start] + 15 * SECOND, side="left"))
        if end >= len(df):
            break
        w = df["v"].iloc[start:end]
        expected.append({"count": len(w), "min": w.min(), "max": w.max(), "mean": w.mean(),
                         "stdev": w.std(ddof=1) if len(w) > 1 else 0.0, "var": w.var(ddof=1) if len(w) > 1 else 0.0})
        start = end
    got = [o["event"] for o in outputs if "error" not in o]
    assert [o["stream"] for o in outputs if "error" not in o] == ["out"] * len(expected)
    assert len(got) == len(expected) > 10
    for g, e in zip(got, expected, strict=True):
        assert g["count"] == e["count"] and isinstance(g["count"], int)
        for k in ("min", "max", "mean", "stdev", "var"):
            assert isinstance(g[k], float) and math.isclose(g[k], e[k], rel_tol=1e-9, abs_tol=1e-9), (k, g, e)
    assert f"401 inputs on in, {len(expected)} outputs, 1 inputs not taken (on err)" in result.stderr


def test_replay_names_a_wrong_input_and_an_app_it_cannot_replay(tmp_path: Path) -> None:
    (tmp_path / "q.trickle").write_text(SEED_TUMBLING, encoding="utf-8")
    wrong = runner.invoke(app, ["replay", str(tmp_path / "q.trickle"), f"events={tmp_path / 'x.jsonl'}"])
    assert wrong.exit_code == 2 and "a trickle query reads the stream 'in', not 'events'" in wrong.stderr
    missing = runner.invoke(app, ["replay", str(tmp_path / "q.trickle"), f"in={tmp_path / 'x.jsonl'}"])
    assert missing.exit_code == 2 and "cannot be read" in missing.stderr
    (tmp_path / "a.siddhi").write_text("define stream S (a long);", encoding="utf-8")
    other = runner.invoke(app, ["replay", str(tmp_path / "a.siddhi"), f"in={tmp_path / 'x.jsonl'}"])
    assert other.exit_code == 2 and "replay runs trickle queries" in other.stderr
