"""Readers never see a half-written batch: one writer commits micro-batches while readers poll, on every store.

Each batch touches thousands of keys in three granularity tables (several upsert statements per table, updates
of earlier keys and inserts of new ones), the rejected-events table and the commit record.  Every count is
positive, so the totals of the committed prefixes of batches strictly increase: a read that caught a batch
mid-write would see a total between two prefixes.  Every read must equal one committed prefix exactly (totals
and rows), a reader never goes backwards, and the readers must have read while batches were being written
(otherwise the test proves nothing).

The writer waits until some reader has seen each commit before writing the next batch, so every prefix is
observed however loaded the machine is; the readers keep reading meanwhile, so their reads overlap the writes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from tests.oracle import APP, open_pipeline, rollup
from tests.servers import SERVER_STORES, STORES, app_with_store, fresh_database
from tests.store.conftest import MIN, SEC, fresh_store, make_layout
from tiltframe.aggregates.layout import AggregationLayout
from tiltframe.model.aggregations import StoreSpec
from tiltframe.model.durations import Granularity, Unit
from tiltframe.store.base import REJECTED_COLUMNS, REJECTED_TIMES, AggregationInfo, BatchStats, BatchWrite
from tiltframe.store.sql import SqlStore
from tiltframe.store.urls import store_target
from tiltframe.store.writes.upserts import ROWS_PER_STATEMENT

HOUR = Granularity(Unit.HOURS)
LEVELS = (SEC, MIN, HOUR)
T0 = 1_699_999_200_000  # an hour boundary
SYMBOLS = [f"S{j:03d}" for j in range(100)]
BATCHES = 10
STEP_S, SPAN_S = 20, 40  # batch i covers seconds [20 i, 20 i + 40): half updates earlier keys, half is new
REASONS = ("price: not a double", "quantity: not a long")
REJECTED_PER_BATCH = {REASONS[0]: 25, REASONS[1]: 15}
READERS = 3
WAIT_S = 60.0  # for one reader to see a commit; only a broken or stalled run gets near it

SUMS = ("AGG_COUNT", "avgPrice_SUM", "avgPrice_COUNT", "total_SUM")
LATEST = ("value", "AGG_EVENT_TIMESTAMP", "AGG_ARRIVAL_BATCH", "AGG_ARRIVAL_SEQ")
KEY = ["AGG_TIMESTAMP", "symbol"]

Row = dict[str, Any]


# --- the batches and what each committed prefix of them leaves in the store ------------------------------


def merge_into(rows: dict[tuple[int, str], Row], bucket: int, new: Row) -> None:
    """Merge a partial row into ``rows`` the way the store does (sums add, min/max, latest event wins)."""
    key = (bucket, new["symbol"])
    old = rows.get(key)
    if old is None:
        rows[key] = {**new, "AGG_TIMESTAMP": bucket}
        return
    for c in SUMS:
        old[c] += new[c]
    old["low_MIN"] = min(old["low_MIN"], new["low_MIN"])
    old["high_MAX"] = max(old["high_MAX"], new["high_MAX"])
    if tuple(new[c] for c in LATEST[1:]) > tuple(old[c] for c in LATEST[1:]):
        old.update({c: new[c] for c in LATEST})


def bucket(ts: int, g: Granularity) -> int:
    size = g.unit.fixed_ms
    assert size is not None
    return ts - (ts - T0) % size


def batch_rows(i: int) -> dict[Granularity, list[Row]]:
    """Batch ``i``'s partial rows per level: the seconds rows, and their rollups as the engine makes them.

    Values are small integers (doubles too), so sums are exact in any order on every database."""
    sec: list[Row] = []
    for s in range(i * STEP_S, i * STEP_S + SPAN_S):
        for j, sym in enumerate(SYMBOLS):
            count, price, qty = 1 + (i + s + j) % 3, float(1 + (7 * i + s + j) % 50), 1 + (i + 3 * s + j) % 9
            ts = T0 + 1000 * s
            sec.append({"AGG_TIMESTAMP": ts, "symbol": sym, "AGG_EVENT_TIMESTAMP": ts + (37 * i + 11 * j) % 1000,
                        "AGG_ARRIVAL_BATCH": i, "AGG_ARRIVAL_SEQ": len(sec), "AGG_COUNT": count,
                        "avgPrice_SUM": price * count, "avgPrice_COUNT": count, "total_SUM": qty * count,
                        "low_MIN": price, "high_MAX": price, "value": price * qty})
    levels = {SEC: sec}
    for g in LEVELS[1:]:
        coarse: dict[tuple[int, str], Row] = {}
        for r in sec:
            merge_into(coarse, bucket(r["AGG_TIMESTAMP"], g), r)
        levels[g] = list(coarse.values())
    return levels


def rejected_rows(i: int) -> pa.Table:
    reasons = [r for r, n in REJECTED_PER_BATCH.items() for _ in range(n)]
    columns: dict[str, pa.Array] = {
        "stream": pa.array(["TradeStream"] * len(reasons)), "kind": pa.array(["invalid"] * len(reasons)),
        "reason": pa.array(reasons), "field": pa.array([r.split(":")[0] for r in reasons]),
        "value": pa.array(["x"] * len(reasons)), "raw": pa.array([f"batch {i} event {n}" for n in range(len(reasons))]),
        "event_timestamp": pa.array([T0 + 1000 * i * STEP_S] * len(reasons), pa.int64()),
        "adjusted_timestamp": pa.nulls(len(reasons), pa.int64()),
    }
    assert set(columns) == {*REJECTED_COLUMNS, *REJECTED_TIMES}
    return pa.table(columns)


def arrow(layout: AggregationLayout, rows: list[Row]) -> pa.Table:
    types = {str: pa.string(), int: pa.int64(), float: pa.float64()}
    return pa.table({c: pa.array([r[c] for r in rows], types[type(rows[0][c])]) for c in layout.column_types})


@dataclass(frozen=True)
class Prefix:
    """What the store holds once the first ``k`` batches are committed."""

    k: int
    tables: dict[Granularity, pd.DataFrame]  # rows in key order, columns in layout order
    events_aggregated: int
    rejected: dict[str, int]
    min_event_ts: int | None
    max_event_ts: int | None

    @property
    def events_read(self) -> int:
        return self.events_aggregated + sum(self.rejected.values())


@dataclass(frozen=True)
class Plan:
    """The batches to write and every committed prefix, indexed by its (strictly increasing) event count."""

    batches: list[BatchWrite]
    prefixes: list[Prefix]
    by_count: dict[int, Prefix]

    @classmethod
    def make(cls, layout: AggregationLayout, n: int = BATCHES) -> Plan:
        columns = list(layout.column_types)
        state: dict[Granularity, dict[tuple[int, str], Row]] = {g: {} for g in LEVELS}
        batches, prefixes, stats = [], [], []

        def snapshot(k: int) -> Prefix:
            tables = {g: pd.DataFrame([state[g][key] for key in sorted(state[g])], columns=columns) for g in LEVELS}
            return Prefix(k, tables, sum(s.events_aggregated for s in stats),
                          {r: c * k for r, c in REJECTED_PER_BATCH.items()},
                          min((s.min_event_ts for s in stats), default=None),
                          max((s.max_event_ts for s in stats), default=None))

        prefixes.append(snapshot(0))
        for i in range(n):
            levels = batch_rows(i)
            sec = levels[SEC]
            aggregated, rejected = sum(r["AGG_COUNT"] for r in sec), sum(REJECTED_PER_BATCH.values())
            stats.append(BatchStats(aggregated + rejected, aggregated, rejected,
                                    min(r["AGG_TIMESTAMP"] for r in sec), max(r["AGG_EVENT_TIMESTAMP"] for r in sec)))
            batches.append(BatchWrite("writer", i, stats[-1], {g: arrow(layout, rows) for g, rows in levels.items()},
                                      rejected_rows(i)))
            for g, rows in levels.items():
                for r in rows:
                    merge_into(state[g], r["AGG_TIMESTAMP"], r)
            prefixes.append(snapshot(i + 1))
        by_count = {p.events_aggregated: p for p in prefixes}
        assert len(by_count) == len(prefixes), "every prefix must have its own event count"
        return cls(batches, prefixes, by_count)

    def match_rows(self, g: Granularity, got: pd.DataFrame) -> int:
        """The prefix that one read of table ``g`` shows; fails unless it is exactly a committed prefix."""
        count = int(got["AGG_COUNT"].sum())
        prefix = self.by_count.get(count)
        assert prefix is not None, (
            f"{g}: AGG_COUNT total {count} is no committed prefix {sorted(self.by_count)}: a partial batch")
        want = prefix.tables[g]
        for c in ("total_SUM", "avgPrice_SUM"):
            assert got[c].sum() == want[c].sum(), (g, prefix.k, c)
        got = got.sort_values(KEY, ignore_index=True)
        pd.testing.assert_frame_equal(got, want, check_dtype=False, obj=f"{g} after {prefix.k} batches")
        return prefix.k

    def match_info(self, info: AggregationInfo) -> int:
        """The prefix that one ``info`` shows: every table, the commit records and the rejected events agree."""
        assert 0 <= info.batches < len(self.prefixes), info
        p = self.prefixes[info.batches]
        assert (info.events_read, info.events_aggregated, info.events_rejected) == (
            p.events_read, p.events_aggregated, sum(p.rejected.values())), (p.k, info)
        assert (info.min_event_ts, info.max_event_ts) == (p.min_event_ts, p.max_event_ts), (p.k, info)
        assert dict(info.rejected_by_reason) == {r: n for r, n in p.rejected.items() if n}, (p.k, info)
        for t, g in zip(info.tables, LEVELS, strict=True):
            want = p.tables[g]["AGG_TIMESTAMP"]
            expected = (len(want), None, None) if want.empty else (len(want), want.min(), want.max())
            assert (t.rows, t.first_bucket, t.last_bucket) == expected, (p.k, t)
        return p.k


# --- readers, the writer's pacing and the overlap bookkeeping ---------------------------------------------


@dataclass
class Progress:
    """What the readers have seen, shared with the writer (which waits on it) and the final checks."""

    cond: threading.Condition = field(default_factory=threading.Condition)
    seen: set[int] = field(default_factory=set)
    first_rounds: int = 0
    failed: bool = False
    writes: list[tuple[float, float]] = field(default_factory=list)

    def saw(self, k: int) -> None:
        with self.cond:
            self.seen.add(k)
            self.cond.notify_all()

    def round_done(self) -> None:
        with self.cond:
            self.first_rounds += 1
            self.cond.notify_all()

    def fail(self) -> None:
        with self.cond:
            self.failed = True
            self.cond.notify_all()

    def wait(self, predicate: Callable[[], bool]) -> None:
        with self.cond:
            assert self.cond.wait_for(lambda: self.failed or predicate(), WAIT_S), "readers stalled"
            assert not self.failed, "a reader failed"


@dataclass
class ReaderLog:
    """One reader's reads: (start, end, prefix) each, in order."""

    reads: list[tuple[float, float, int]] = field(default_factory=list)

    @property
    def prefixes(self) -> list[int]:
        return [k for _, _, k in self.reads]


def poll(observe: Callable[[], Iterator[int]], progress: Progress, stop: threading.Event, pause: float) -> ReaderLog:
    """Read until ``stop`` (then once more, to see the end state); each read's prefix never goes backwards.

    ``pause`` between rounds leaves the writer some CPU (and GIL) when its own work is heavy (Spark)."""
    log = ReaderLog()
    try:
        first, last = True, 0
        while True:
            final = stop.is_set()
            start = time.monotonic()
            for k in observe():
                end = time.monotonic()
                assert k >= last, f"went backwards: saw {k} batches after {last}"
                log.reads.append((start, end, k))
                progress.saw(k)
                last, start = k, end
            if first:
                progress.round_done()
                first = False
            if final:
                return log
            stop.wait(pause)
    except BaseException:
        progress.fail()
        raise


def overlapping(log: ReaderLog, writes: list[tuple[float, float]]) -> int:
    """Reads that ran while a batch was being written."""
    return sum(any(s < we and ws < e for ws, we in writes) for s, e, _ in log.reads)


def run_concurrently(
    write: Callable[[int], None],
    n: int,
    observers: list[Callable[[], Iterator[int]]],
    progress: Progress,
    pause: float = 0.0,
) -> list[ReaderLog]:
    """Start the readers, wait for one round of each, then write the ``n`` batches one by one, each after some
    reader has seen the one before; returns the readers' logs (a reader's failure is raised here)."""
    stop = threading.Event()
    logs: list[ReaderLog | None] = [None] * len(observers)
    errors: list[BaseException] = []

    def reader(i: int) -> None:
        try:
            logs[i] = poll(observers[i], progress, stop, pause)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=reader, args=(i,), daemon=True) for i in range(len(observers))]
    for t in threads:
        t.start()
    try:
        progress.wait(lambda: progress.first_rounds == len(observers))
        for i in range(n):
            start = time.monotonic()
            write(i)
            progress.writes.append((start, time.monotonic()))
            progress.wait(lambda i=i: max(progress.seen) > i)
    finally:
        stop.set()
        for t in threads:
            t.join(2 * WAIT_S)
        if errors:
            raise errors[0]  # the reader's finding, rather than the writer's "a reader failed"
    assert not any(t.is_alive() for t in threads), "a reader did not stop"
    return [log for log in logs if log is not None]


def check_overlap(logs: list[ReaderLog], progress: Progress, n: int, label: str,
                  transactions: list[tuple[float, float]] | None = None) -> None:
    """Every prefix was seen, the end state by every reader, and reads ran while batches were written.

    ``transactions``: the store writes alone, when a write also does other work (Spark); reported only,
    as they are too short to be sure to overlap a read."""
    assert progress.seen == set(range(n + 1)), progress.seen
    assert all(log.prefixes[-1] == n for log in logs)
    overlaps = [overlapping(log, progress.writes) for log in logs]
    summary = ", ".join(f"{len(log.reads)} reads / {len(set(log.prefixes))} prefixes / {o} during a write"
                        for log, o in zip(logs, overlaps, strict=True))
    if transactions is not None:
        summary += f"; {sum(overlapping(log, transactions) for log in logs)} during a store transaction"
    print(f"{label}: {summary}")
    assert sum(overlaps) >= 3, f"the readers hardly overlapped the writes: {summary}"


# --- the store-level test ---------------------------------------------------------------------------------


@pytest.fixture
def layout() -> AggregationLayout:
    """Three levels, so that a batch's transaction spans several tables."""
    return make_layout(granularities=LEVELS)


@pytest.fixture(params=STORES)
def stores(
    request: pytest.FixtureRequest, db_path: Path, layout: AggregationLayout
) -> Iterator[tuple[SqlStore, Callable[[], SqlStore]]]:
    """A writable store with the schema, and a way to open read-only stores on the same database."""
    with fresh_store(request.param, db_path, layout) as pair:
        yield pair


@pytest.mark.slow
def test_readers_see_whole_batches_only(stores: tuple[SqlStore, Callable[[], SqlStore]],
                                        layout: AggregationLayout) -> None:
    """Each reader (its own read-only store) checks every table read and ``info`` against the committed prefixes."""
    writer, open_reader = stores
    plan = Plan.make(layout)
    assert all(len(b.levels[SEC]) >= 4 * ROWS_PER_STATEMENT for b in plan.batches)  # several statements each
    readers = [open_reader() for _ in range(READERS)]

    def observer(reader: SqlStore) -> Callable[[], Iterator[int]]:
        def observe() -> Iterator[int]:
            for g in LEVELS:
                yield plan.match_rows(g, reader.read(layout, g))
            yield plan.match_info(reader.info(layout))

        return observe

    def write(i: int) -> None:
        assert writer.write_batch(layout, plan.batches[i])

    progress = Progress()
    try:
        logs = run_concurrently(write, BATCHES, [observer(r) for r in readers], progress)
    finally:
        for r in readers:
            r.close()
    check_overlap(logs, progress, BATCHES, writer.url)


# --- end to end: the Spark pipeline writes, tiltframe.query reads -----------------------------------------

E2E_BATCHES = 3
E2E_EVENTS = 5_000  # per batch: Spark's fixed costs dominate a batch anyway
E2E_PAUSE_S = 0.2


def e2e_events(rng: np.random.Generator) -> pd.DataFrame:
    """Trades over 200 symbols and a few minutes (disordered within a batch; batches move forward in time)."""
    n = E2E_BATCHES * E2E_EVENTS
    ts = T0 + np.repeat(np.arange(E2E_BATCHES), E2E_EVENTS) * 60_000 + rng.integers(0, 120_000, n)
    return pd.DataFrame({
        "symbol": [f"S{s:03d}" for s in rng.integers(0, 200, n)],
        "price": rng.integers(1, 100, n).astype(float), "quantity": rng.integers(1, 10, n),
        "ts": ts, "arrival": np.arange(n),
    })


@pytest.mark.slow
@pytest.mark.parametrize("backend", STORES)
def test_query_during_pipeline_sees_prefix_sums(spark, tmp_path: Path, backend: str) -> None:
    """The real pipeline commits batches while ``tiltframe.query`` reads: every answer is a committed prefix."""
    import tiltframe as tf

    events = e2e_events(np.random.default_rng(11))
    cuts = [E2E_EVENTS * k for k in range(E2E_BATCHES + 1)]
    columns = ["AGG_TIMESTAMP", "symbol", "trades", "total"]
    want = {k: rollup(events.iloc[:cut], "seconds")[columns] for k, cut in enumerate(cuts) if cut}
    by_trades = {cut: k for k, cut in enumerate(cuts)}
    query = f'from TradeAggregation within 0L, 4102444800000L per "seconds" select {", ".join(columns)}'

    with fresh_database(backend) if backend != "sqlite" else nullcontext() as url:
        app, stores, pipeline = open_pipeline(tmp_path, "e2e", app_with_store(APP, url)[0])
        assert isinstance(pipeline.store, SqlStore) and pipeline.store.url.startswith(backend), pipeline.store.url
        transactions: list[tuple[float, float]] = []
        write_batch = pipeline.store.write_batch

        def timed_write_batch(*args: Any) -> bool:
            start = time.monotonic()
            try:
                return write_batch(*args)
            finally:
                transactions.append((start, time.monotonic()))

        pipeline.store.write_batch = timed_write_batch  # type: ignore[method-assign]

        def observe() -> Iterator[int]:
            got = tf.query(app, query, data_dir=tmp_path)
            trades = int(got["trades"].sum())
            assert trades in by_trades, f"{trades} events is no committed prefix {sorted(by_trades)}"
            k = by_trades[trades]
            if k:
                got = got.sort_values(KEY, ignore_index=True)
                pd.testing.assert_frame_equal(got, want[k], check_dtype=False, obj=f"after {k} batches")
            yield k

        def write(i: int) -> None:
            part = events.iloc[cuts[i]:cuts[i + 1]][["symbol", "price", "quantity", "ts"]]
            pipeline.process(spark.createDataFrame(part, "symbol string, price double, quantity long, ts long"), i)

        progress = Progress()
        try:
            logs = run_concurrently(write, E2E_BATCHES, [observe, observe], progress, pause=E2E_PAUSE_S)
        finally:
            stores.close()
    assert pipeline.totals.events_read == len(events)
    check_overlap(logs, progress, E2E_BATCHES, f"pipeline into {backend}", transactions)


# --- several deployments preparing one store at once ------------------------------------------------------

STARTERS = 4


@pytest.mark.parametrize("backend", SERVER_STORES)
def test_pipelines_starting_at_once_prepare_the_store_once(backend: str) -> None:
    """Shard pipelines start together against one empty server store: each prepares its tables, none fails.

    ``CREATE TABLE IF NOT EXISTS`` is no guard against a concurrent one on PostgreSQL (the type of the table
    is created twice); the store serialises schema changes with a server lock."""
    layout = make_layout(granularities=LEVELS)
    with fresh_database(backend) as url:
        target = store_target(StoreSpec("rdbms", url))
        stores = [SqlStore.server(target) for _ in range(STARTERS)]
        barrier = threading.Barrier(STARTERS)
        errors: list[BaseException] = []

        def start(store: SqlStore) -> None:
            barrier.wait()
            try:
                store.ensure_schema(layout)
            except BaseException as e:  # collected and reported below
                errors.append(e)

        threads = [threading.Thread(target=start, args=(s,)) for s in stores]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        try:
            assert not errors, errors
            info = stores[0].info(layout)
            assert [(t.table, t.rows) for t in info.tables] == [
                (f"{layout.name}_{g.table_suffix}", 0) for g in LEVELS], info
        finally:
            for s in stores:
                s.close()
