"""``tiltframe run QUERY.trickle --input in=FOLDER``: the seed's first example on Spark over JSON-lines files,
each output equal to pandas over the events (ingest time: the file's modification time); outputs without
``--output`` on stdout; the options a trickle query has no use for, and a wrong input, refused by name."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from tests.engine.trickle.test_seed_tilt_frame import windows
from tests.lang.trickle.test_trickle_parser import SEED_TUMBLING
from tiltframe.cli.commands import app

pytestmark = pytest.mark.slow
runner = CliRunner()
MS = 1_000_000


def test_the_seed_tumbling_example_runs_on_spark_as_written(spark, tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    inbox, out = tmp_path / "in", tmp_path / "out"
    inbox.mkdir()
    times = 1_700_000_000_000 + np.cumsum(rng.integers(1_000, 9_000, size=40))  # one a file, in ms
    frames = []
    for k, t in enumerate(times):
        values = rng.normal(50, 20, size=int(rng.integers(1, 6))).round(3)
        path = inbox / f"events-{k:03d}.jsonl"
        path.write_text("".join(json.dumps({"value": float(v)}) + "\n" for v in values), encoding="utf-8")
        os.utime(path, ns=(int(t) * MS, int(t) * MS))
        frames.append(pd.DataFrame({"t": int(t) * MS, "v": values}))
    (tmp_path / "q.trickle").write_text(SEED_TUMBLING, encoding="utf-8")
    result = runner.invoke(app, ["run", str(tmp_path / "q.trickle"), "--input", f"in={inbox}", "--output",
                                 f"out={out}", "--data-dir", str(tmp_path / "data"), "--max-files-per-trigger", "15"])
    assert result.exit_code == 0, result.output
    got = [json.loads(line) for p in sorted(out.glob("out-batch-*.jsonl")) for line in p.read_text().splitlines()]
    df = pd.concat(frames, ignore_index=True)
    expected = []
    for start, end in windows(df["t"].tolist(), 15_000 * MS):
        w = df["v"].iloc[start:end]
        expected.append({"count": len(w), "min": w.min(), "max": w.max(), "mean": w.mean(),
                         "var": w.var(ddof=1) if len(w) > 1 else 0.0})
    assert len(got) == len(expected) > 5
    for g, e in zip(got, expected, strict=True):
        assert g["count"] == e["count"] and isinstance(g["count"], int)
        for k in ("min", "max", "mean", "var"):
            assert g[k] == pytest.approx(e[k], rel=1e-9, abs=1e-9), (k, g, e)
    assert f"{len(df)} events read in 3 micro-batches; outputs: {len(got)} on out; no errors" in result.stderr
    assert result.stdout == ""

    # Without --output, the outputs of a new query over the same folder come on stdout.
    (tmp_path / "q2.trickle").write_text(SEED_TUMBLING.replace("15", "30"), encoding="utf-8")
    printed = runner.invoke(app, ["run", str(tmp_path / "q2.trickle"), "--input", f"in={inbox}",
                                  "--data-dir", str(tmp_path / "data")])
    assert printed.exit_code == 0, printed.output
    lines = [json.loads(line) for line in printed.stdout.splitlines()]
    assert lines and {line["stream"] for line in lines} == {"out"}
    assert sum(line["event"]["count"] for line in lines) < len(df)  # the last window is still open


@pytest.mark.parametrize(("args", "said"), [
    (["--input", "events=x"], "a trickle query reads the stream 'in': give --input in=FOLDER"),
    (["--input", "in=x", "--rebuild"], "--rebuild: not for a trickle query"),
    (["--input", "in=x", "--input-format", "in=csv"], "--input-format: not for a trickle query"),
])
def test_what_a_trickle_run_cannot_use_is_refused(tmp_path: Path, args: list[str], said: str) -> None:
    (tmp_path / "q.trickle").write_text(SEED_TUMBLING, encoding="utf-8")
    result = runner.invoke(app, ["run", str(tmp_path / "q.trickle"), *args])
    assert result.exit_code == 2 and said in result.stderr, result.output
