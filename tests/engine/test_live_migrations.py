"""Migrations while a following pipeline commits batches, on every store: a measure added is backfilled
while the new definition's pipeline runs, and a changed zone is rebuilt while the old definition's
pipeline runs, which is refused once the new rollup is swapped in.  Every level then equals pandas over
the raw events: the batches committed during the recomputation are neither lost nor counted twice."""

from __future__ import annotations

import threading
from contextlib import nullcontext
from pathlib import Path

import pandas as pd
import pytest

import tiltframe as tf
from tests.engine.rollups import APP, HOUR, MEASURES, T0, ZONE, ZONED, check, deliver, trades, wait
from tests.servers import STORES, app_with_store, fresh_database
from tiltframe.engine.rollup.reports import BatchReport
from tiltframe.errors import TiltframeError

A = APP
ADDED = A.replace("count() as n", "count() as n, max(volume) as biggest")


def events_read(reports: list[BatchReport]) -> int:
    return sum(r.stats.events_read for r in list(reports) if not r.skipped)


@pytest.mark.slow
@pytest.mark.parametrize("backend", STORES)
def test_a_measure_is_backfilled_while_its_pipeline_commits(spark, tmp_path: Path, backend: str) -> None:
    with nullcontext(None) if backend == "sqlite" else fresh_database(backend) as url:
        a, b = (tf.load_app(app_with_store(text, url)[0]) for text in (A, ADDED))
        data, inbox = tmp_path / "data", tmp_path / "in"
        inbox.mkdir()
        first, second, third = trades(1, T0, 400), trades(2, T0 + 6 * HOUR, 300), trades(3, T0 + 12 * HOUR, 200)
        deliver(first, inbox, "1.csv")
        tf.run(a, {"Trades": inbox}, data_dir=data, spark=spark)
        tf.migrate(b, data_dir=data)  # the new columns; the measure reads NULL before it is complete

        reports: list[BatchReport] = []
        handle = tf.start(b, {"Trades": inbox}, data_dir=data, spark=spark, follow=True, on_batch=reports.append,
                          trigger_seconds=0.2)
        try:
            deliver(second, inbox, "2.csv")
            wait(lambda: events_read(reports) == len(second), "the second file")
            # A file committed while the backfill recomputes: it is recomputed again with that batch in.
            later = threading.Timer(0.5, deliver, (third, inbox, "3.csv"))
            later.start()
            done = tf.migrate(b, data_dir=data, inputs={"Trades": inbox}, spark=spark)["TA"]
            later.join()
            wait(lambda: events_read(reports) == len(second) + len(third), "the third file")
        finally:
            handle.stop()
            handle.close()
        assert len(done) == 1 and done[0].startswith("measures biggest backfilled from "), done
        everything = pd.concat([first, second, third], ignore_index=True)
        check(b, data, everything, measures={**MEASURES, "biggest": ("volume", "max")})
        assert not tf.verify(b, {"Trades": inbox}, data_dir=data, spark=spark)["TA"].differences


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_a_zone_is_rebuilt_while_the_old_pipeline_commits(spark, tmp_path: Path, backend: str) -> None:
    with nullcontext(None) if backend == "sqlite" else fresh_database(backend) as url:
        a, zoned = (tf.load_app(app_with_store(text, url)[0]) for text in (A, ZONED))
        data, inbox = tmp_path / "data", tmp_path / "in"
        inbox.mkdir()
        first, second, third = trades(4, T0, 400), trades(5, T0 + 6 * HOUR, 300), trades(6, T0 + 12 * HOUR, 200)
        deliver(first, inbox, "1.csv")
        reports: list[BatchReport] = []
        old = tf.start(a, {"Trades": inbox}, data_dir=data, spark=spark, follow=True, on_batch=reports.append,
                       trigger_seconds=0.2)
        try:
            wait(lambda: events_read(reports) == len(first), "the first file")
            later = threading.Timer(0.5, deliver, (second, inbox, "2.csv"))
            later.start()
            done = tf.migrate(zoned, data_dir=data, inputs={"Trades": inbox}, spark=spark)["TA"]
            later.join()
            assert "rebuilt from" in done[1], done
            # The old pipeline's next batch finds the new definition and stops; nothing of it is written.
            deliver(third, inbox, "3.csv")
            with pytest.raises(TiltframeError, match="migrated to another definition while this pipeline ran"):
                old.wait()
        finally:
            old.stop()
            old.close()
        tf.run(zoned, {"Trades": inbox}, data_dir=data, spark=spark)
        check(zoned, data, pd.concat([first, second, third], ignore_index=True), zone=ZONE)
