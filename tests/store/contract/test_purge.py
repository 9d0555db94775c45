"""Purging on every store: what it deletes, that purged buckets never come back, and that purges and
batch writes exclude each other."""

from __future__ import annotations

import threading

import pytest

from tests.store.conftest import MIN, SEC, SQLITE_ONLY, T0, batch, row
from tiltframe.aggregates.layout import AggregationLayout
from tiltframe.errors import StoreError
from tiltframe.store.sql import SqlStore


def totals(store: SqlStore, layout: AggregationLayout, g) -> dict[int, int]:
    frame = store.read(layout, g)
    return dict(zip(frame["AGG_TIMESTAMP"].tolist(), frame["total_SUM"].tolist(), strict=True))


def trades(stamps: list[int], batch_id: int, qty: int = 1) -> list[dict]:
    return [row(ts, "IBM", ts + 5, batch_id, i, 10.0, qty) for i, ts in enumerate(stamps)]


def test_purge_deletes_only_older_buckets(store: SqlStore, layout: AggregationLayout) -> None:
    secs = [T0 + i * 1000 for i in range(10)]
    store.write_batch(layout, batch(layout, 0, trades(secs, 0), min_rows=trades([T0 - 60_000, T0], 0)))
    assert store.latest_event_ts(layout) == secs[-1] + 5

    deleted = store.purge(layout, {SEC: T0 + 4000}, latest_event_ts=secs[-1] + 5)

    assert deleted == {SEC: 4}
    assert sorted(totals(store, layout, SEC)) == secs[4:]
    assert sorted(totals(store, layout, MIN)) == [T0 - 60_000, T0]  # not named: untouched
    info = store.info(layout)
    assert [(p.table, p.purged_before, p.rows_purged) for p in info.purges] == [
        ("TradeAggregation_SECONDS", T0 + 4000, 4)]
    assert store.last_purged_at(layout) == info.purges[0].purged_at


def test_a_purged_bucket_never_comes_back(store: SqlStore, layout: AggregationLayout) -> None:
    """A late event for a purged bucket would recreate it holding only itself: it is not written there,
    while the buckets after the cut-off keep merging as before."""
    store.write_batch(layout, batch(layout, 0, trades([T0, T0 + 5000], 0)))
    store.purge(layout, {SEC: T0 + 1000}, latest_event_ts=T0 + 5005)

    store.write_batch(layout, batch(layout, 1, trades([T0, T0 + 1000, T0 + 5000], 1, qty=2)))

    assert totals(store, layout, SEC) == {T0 + 1000: 2, T0 + 5000: 3}


def test_purge_instants_never_move_back(store: SqlStore, layout: AggregationLayout) -> None:
    store.write_batch(layout, batch(layout, 0, trades([T0, T0 + 1000, T0 + 2000], 0)))
    assert store.purge(layout, {SEC: T0 + 2000}, latest_event_ts=T0 + 2005) == {SEC: 2}
    assert store.purge(layout, {SEC: T0 + 1000}, latest_event_ts=T0 + 2005) == {SEC: 0}
    store.write_batch(layout, batch(layout, 1, trades([T0 + 1000], 1)))
    assert totals(store, layout, SEC) == {T0 + 2000: 1}
    (info,) = store.info(layout).purges
    assert (info.purged_before, info.rows_purged) == (T0 + 2000, 2)


def test_latest_event_time_spans_pipelines(store: SqlStore, layout: AggregationLayout) -> None:
    """Retention is measured from the latest event of the aggregation, whichever pipeline wrote it."""
    store.write_batch(layout, batch(layout, 0, trades([T0 + 9000], 0), pipeline="a"))
    store.write_batch(layout, batch(layout, 0, trades([T0], 0), pipeline="b"))
    assert store.latest_event_ts(layout) == T0 + 9005


@SQLITE_ONLY
def test_a_reader_cannot_purge(store: SqlStore, layout: AggregationLayout, db_path) -> None:
    store.write_batch(layout, batch(layout, 0, trades([T0], 0)))
    with SqlStore.sqlite(db_path, read_only=True) as reader, pytest.raises(StoreError, match="read-only"):
        reader.purge(layout, {SEC: T0 + 1000}, latest_event_ts=T0)


def test_purges_and_batches_exclude_each_other(store: SqlStore, layout: AggregationLayout) -> None:
    """Batches that each add to an old bucket and a new one, while purges of the old bucket run: whatever
    the interleaving, the old bucket ends up gone (never recreated with part of the events) and every
    new bucket holds all of its events."""
    old = T0
    new = [T0 + 10_000 + i * 1000 for i in range(40)]
    errors: list[BaseException] = []

    def purge_repeatedly() -> None:
        try:
            for _ in range(20):
                store.purge(layout, {SEC: T0 + 5000}, latest_event_ts=T0)
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    purger = threading.Thread(target=purge_repeatedly)
    purger.start()
    for i, ts in enumerate(new):
        store.write_batch(layout, batch(layout, i, trades([old, ts], i)))
    purger.join()
    assert not errors, errors

    assert totals(store, layout, SEC) == dict.fromkeys(new, 1)
