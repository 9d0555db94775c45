"""A backlog is read in bounded micro-batches: about ``max_bytes_per_trigger`` bytes of files each (64 MiB
by default, from ``$TILTFRAME_MAX_BYTES_PER_TRIGGER``), or ``max_files_per_trigger`` files; the totals are
those of the files whatever the cut."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import tiltframe as tf
from tiltframe.engine.inputs.sources import MAX_BYTES_ENV

APP = """
define stream S (k string, n long, ts long);
define aggregation A from S select k, sum(n) as total, count() as events group by k aggregate by ts every sec ... day;
"""


def _inbox(tmp_path: Path) -> tuple[Path, pd.DataFrame]:
    rng = np.random.default_rng(7)
    inbox = tmp_path / "in"
    inbox.mkdir()
    frames = []
    for i in range(4):
        df = pd.DataFrame({"k": rng.choice(["a", "b"], 50), "n": rng.integers(0, 1000, 50),
                           "ts": 1_700_000_000_000 + rng.integers(0, 86_400_000, 50)})
        df.to_csv(inbox / f"f{i}.csv", index=False)
        frames.append(df)
    return inbox, pd.concat(frames)


@pytest.mark.parametrize(("env", "kwargs", "batches"), [
    (None, {}, 1),  # small files: one batch under the 64 MiB default
    ("1", {}, 4),  # every file over the bound: a batch each
    ("1", {"max_files_per_trigger": 2}, 2),  # files per trigger win over bytes
    ("0", {"max_bytes_per_trigger": 1}, 4),  # the argument wins over the environment
])
def test_batches_are_bounded_and_totals_whole(
    spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, env: str | None, kwargs: dict, batches: int
) -> None:
    if env is not None:
        monkeypatch.setenv(MAX_BYTES_ENV, env)
    inbox, events = _inbox(tmp_path)
    app = tf.load_app(APP)
    result = tf.run(app, {"S": inbox}, data_dir=tmp_path / "data", spark=spark, **kwargs)
    assert result.aggregations["A"].batches == batches
    per_day = tf.query(app, 'from A within 0L, 4102444800000L per "days" select k, total, events',
                       data_dir=tmp_path / "data")
    got = per_day.groupby("k")[["total", "events"]].sum().reset_index()
    want = events.groupby("k").agg(total=("n", "sum"), events=("n", "size")).reset_index()
    pd.testing.assert_frame_equal(got, want, check_dtype=False)
