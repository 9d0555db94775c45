"""The trigger interval of a following run (``--trigger-interval``, ``trigger_seconds=``): Spark's queries
start micro-batches at that interval, a continuous query at least as often as its EMIT intervals, and the
figures stay those of the oracle."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

import tiltframe as tf
from tiltframe.cli.commands import app as cli
from tiltframe.engine.rollup.reports import BatchReport
from tiltframe.errors import UsageError

pytestmark = pytest.mark.slow

APP = """
@eventTime('ts') define stream S (k string, v long, ts long);
define aggregation A from S
select k, sum(v) as total, count() as events
group by k
aggregate by ts every sec ... day;
SELECT k, count() AS n FROM S GROUP BY k EMIT PERIODIC 5s;
"""
T0 = 1_704_067_200_000  # 2024-01-01T00:00Z
#: A continuous query whose policy (after the window closes, the default) has no interval.
WINDOWS = """
@eventTime('ts') define stream S (k string, v long, ts long);
SELECT window_start, k, count() AS n FROM tumble(S, 1s) GROUP BY window_start, k;
"""


def _wait(condition: Callable[[], bool], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail("timed out")
        time.sleep(0.2)


def _trigger(query: object) -> str:
    """The trigger Spark's query runs with, as Spark prints it (``ProcessingTimeTrigger(250)``)."""
    return str(query._jsq.streamingQuery().trigger())  # type: ignore[attr-defined]


def test_a_following_run_triggers_at_the_interval_given(spark, tmp_path: Path) -> None:
    inbox = tmp_path / "in"
    inbox.mkdir()
    rows = pd.DataFrame({"k": ["a", "b", "a"], "v": [1, 2, 4], "ts": [T0, T0 + 500, T0 + 1500]})
    rows.to_csv(inbox / "a.csv", index=False)
    app = tf.load_app(APP)
    reports: list[BatchReport] = []
    handle = tf.start(app, {"S": inbox}, data_dir=tmp_path / "data", spark=spark, follow=True,
                      on_batch=reports.append, trigger_seconds=7.5)
    try:
        _wait(lambda: sum(r.stats.events_read for r in reports) == 3, 120)
        _wait(lambda: handle.continuous[0].totals.rows_emitted == 2, 120)
        triggers = sorted(_trigger(q) for q in handle._queries)
        continuous = [_trigger(c._query) for c in handle.continuous]
    finally:
        handle.stop()
        handle.close()
    assert triggers == ["ProcessingTimeTrigger(7500)"]
    assert continuous == ["ProcessingTimeTrigger(5000)"]  # its PERIODIC 5 sec is shorter
    got = tf.query(app, 'from A within 0L, 4102444800000L per "days" select k, total, events',
                   data_dir=tmp_path / "data")
    assert sorted(zip(got["k"], got["total"], got["events"], strict=True)) == [("a", 5, 2), ("b", 2, 1)]


def test_a_following_run_starts_a_query_whose_emit_has_no_interval(spark, tmp_path: Path) -> None:
    """A window emitted when the watermark closes it (the default policy) has no interval for the wall
    clock to follow; the run starts, emits the closed windows and stops."""
    inbox = tmp_path / "in"
    inbox.mkdir()
    pd.DataFrame({"k": ["a", "b", "a", "a"], "v": [1, 2, 4, 8],
                  "ts": [T0, T0 + 500, T0 + 1500, T0 + 9000]}).to_csv(inbox / "a.csv", index=False)
    app = tf.load_app(WINDOWS)
    handle = tf.start(app, {"S": inbox}, data_dir=tmp_path / "data", spark=spark, follow=True, trigger_seconds=1)
    try:
        _wait(lambda: handle.continuous[0].totals.rows_emitted == 3, 120)
        continuous = [_trigger(c._query) for c in handle.continuous]
    finally:
        handle.stop()
        handle.close()
    assert continuous == ["ProcessingTimeTrigger(1000)"]


def test_a_trigger_interval_needs_follow_and_a_positive_length(spark, tmp_path: Path) -> None:
    app_file = tmp_path / "app.siddhi"
    app_file.write_text(APP)
    (tmp_path / "in").mkdir()
    done = CliRunner().invoke(cli, ["run", str(app_file), "--input", f"S={tmp_path / 'in'}", "--trigger-interval",
                                    "60", "-d", str(tmp_path / "data")])
    assert done.exit_code == 2 and "--trigger-interval needs --follow" in " ".join(done.output.split())
    with pytest.raises(UsageError, match="trigger_seconds must be more than 0, not 0"):
        tf.start(tf.load_app(APP), {"S": tmp_path / "in"}, data_dir=tmp_path / "data", spark=spark, follow=True,
                 trigger_seconds=0)
