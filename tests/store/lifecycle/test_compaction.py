"""Compaction on SQLite, PostgreSQL and MariaDB: the writers' partial rows of closed buckets become one row
per bucket and key, atomically (readers see the same answers throughout) and idempotently."""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path

import pandas as pd
import pytest

from tests.servers import STORES
from tests.store.conftest import SEC, T0, fresh_store, make_layout, row
from tests.store.contract.test_shards import shard_batch, stored_rows
from tiltframe.aggregates.layout import SHARD_ID, AggregationLayout
from tiltframe.model.durations import Granularity, Unit
from tiltframe.store.lifecycle.compaction import closed_before
from tiltframe.store.reads.pandas_merges import finalize, merge_rows
from tiltframe.store.sql import SqlStore
from tiltframe.store.writes.upserts import COMPACTED


@pytest.fixture(params=STORES)
def backend(request: pytest.FixtureRequest) -> str:
    return request.param


def answer(store: SqlStore, layout: AggregationLayout) -> pd.DataFrame:
    return finalize(merge_rows(store.read(layout, SEC), layout), layout)


def test_compaction_merges_closed_buckets_once_while_readers_read(backend: str, db_path: Path) -> None:
    layout = dataclasses.replace(make_layout(), partitioned=True)
    with fresh_store(backend, db_path, layout) as (store, reopen):
        for w in range(3):  # three workers, two buckets, two keys
            rows = [row(T0 + b * 1000, sym, T0 + b * 1000 + 10 * w + i, 1, w, 1.0 + w + i, 10 * w + i + 1)
                    for b in range(2) for i, sym in enumerate(("IBM", "WSO2"))]
            store.write_batch(layout, shard_batch(layout, str(w), 0, rows))
        before = answer(store, layout)
        seen: list[pd.DataFrame] = []
        stop = threading.Event()

        def read() -> None:
            with reopen() as reader:
                while not stop.is_set():
                    seen.append(answer(reader, layout))

        readers = [threading.Thread(target=read) for _ in range(2)]
        for t in readers:
            t.start()
        try:
            removed = store.compact(layout, T0 + 1000)  # the first bucket only
        finally:
            stop.set()
            for t in readers:
                t.join()
        assert removed == 2 * 4  # 3 rows per key became 1, for 2 keys, in both tables
        assert stored_rows(store, "TradeAggregation_SECONDS", "AGG_TIMESTAMP", SHARD_ID).count((T0, COMPACTED)) == 2
        assert len(stored_rows(store, "TradeAggregation_SECONDS", SHARD_ID)) == 2 + 6
        pd.testing.assert_frame_equal(answer(store, layout), before)
        assert seen and all(s.equals(before) for s in seen)  # never a partly compacted answer
        assert store.compact(layout, T0 + 1000) == 0  # idempotent
        # A late row of a worker for the compacted bucket sits beside the merged row, and still merges.
        store.write_batch(layout, shard_batch(layout, "1", 1, [row(T0, "IBM", T0 + 999, 2, 0, 100.0, 5)]))
        assert store.compact(layout, T0 + 2000) == 2 * (1 + 4)
        got = answer(store, layout)
        assert list(got["total"]) == [int(before["total"][0]) + 5, *before["total"][1:]]
        assert got["high"][0] == 100.0 and got["value"][0] == 500.0  # the latest event of the bucket


def test_closed_before() -> None:
    latest = T0 + 59_999
    assert closed_before(Granularity(Unit.MINUTES), latest) == T0  # a minute starting at T0 ended by latest + 1
    assert closed_before(Granularity(Unit.SECONDS, 10), latest) == latest - 9_999
    # Calendar buckets as long as they can be: 31 days and a daylight-saving hour gained in a month, etc.
    assert closed_before(Granularity(Unit.MONTHS), latest) == latest - (31 * 24 + 1) * 3_600_000 + 1
    assert closed_before(Granularity(Unit.DAYS), latest) == latest - 25 * 3_600_000 + 1
    assert closed_before(Granularity(Unit.WEEKS), latest) == latest - (7 * 24 + 1) * 3_600_000 + 1
