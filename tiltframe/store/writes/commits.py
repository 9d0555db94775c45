"""Commit records: one row of ``TILTFRAME_BATCHES`` per micro-batch of a pipeline, written in the batch's
transaction.  They make a replayed batch a no-op, carry the pipeline's state to its next batch, and tell
which batches of which pipeline (checkpoint) the store holds, which the engine compares with the
checkpoint at start (``tiltframe.engine.rollup.identity``)."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tiltframe.aggregates.layout import AggregationLayout
from tiltframe.store.base import BatchWrite, RecordKind
from tiltframe.store.schema import BATCHES_TABLE, PURGES_TABLE, REJECTED_TABLE, SKIPPED_VALUES, SKIPPED_VALUES_TABLE

_B = BATCHES_TABLE.c
_S = SKIPPED_VALUES_TABLE.c
#: One measure's counts added by a batch (bind parameters, named apart from the columns).
_ADD_SKIPPED = (sa.update(SKIPPED_VALUES_TABLE)
                .where(_S.aggregation == sa.bindparam("p_aggregation"), _S.measure == sa.bindparam("p_measure"))
                .values(values_skipped=_S.values_skipped + sa.bindparam("p_skipped", type_=sa.BigInteger),
                        events=_S.events + sa.bindparam("p_events", type_=sa.BigInteger), batches=_S.batches + 1,
                        updated_at=sa.bindparam("p_at", type_=sa.BigInteger)))


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def is_committed(conn: Connection, layout: AggregationLayout, pipeline_id: str, batch_id: int) -> bool:
    query = sa.select(sa.literal(1)).where(
        _B.aggregation == layout.name, _B.pipeline_id == pipeline_id, _B.batch_id == batch_id)
    return conn.execute(query).first() is not None


def record_commit(conn: Connection, layout: AggregationLayout, batch: BatchWrite, rows: int) -> None:
    s = batch.stats
    conn.execute(sa.insert(BATCHES_TABLE).values(
        aggregation=layout.name, pipeline_id=batch.pipeline_id, batch_id=batch.batch_id,
        events_read=s.events_read, events_aggregated=s.events_aggregated, events_moved=s.events_moved,
        events_rejected=s.events_rejected, min_event_ts=s.min_event_ts, max_event_ts=s.max_event_ts,
        rows_written=rows, committed_at=now_ms(), latest_event_ts=batch.state.latest_event_ts,
        recovery_bucket=batch.state.recovery_bucket))
    if s.values_skipped:
        add_skipped(conn, layout, s.values_skipped, s.events_aggregated + s.events_moved)


def add_skipped(conn: Connection, layout: AggregationLayout, skipped: Mapping[str, int], events: int) -> None:
    """Add a batch's values skipped per measure (over ``events`` aggregated events) to the measures' totals,
    in the batch's transaction: one update of every measure's row, and an insert of those without one
    (a measure's first counted batch)."""
    at = now_ms()
    params = [{"p_aggregation": layout.name, "p_measure": m, "p_skipped": n, "p_events": events, "p_at": at}
              for m, n in skipped.items()]
    updated = conn.execute(_ADD_SKIPPED, params)
    if conn.dialect.supports_sane_multi_rowcount and updated.rowcount == len(params):
        return
    have = set(conn.execute(sa.select(_S.measure).where(_S.aggregation == layout.name)).scalars())
    new = [{"aggregation": layout.name, "measure": m, "values_skipped": n, "events": events, "batches": 1,
            "updated_at": at} for m, n in skipped.items() if m not in have]
    if new:
        conn.execute(sa.insert(SKIPPED_VALUES_TABLE), new)


def skipped_totals(conn: Connection, layout: AggregationLayout) -> dict[str, tuple[int, int, int]]:
    """Per measure of ``layout``'s aggregation that any batch counted: its values skipped, the events and the
    batches counted; the caller checks that the table exists (a store made before it lacks it, and its
    readers create nothing)."""
    rows = conn.execute(sa.select(_S.measure, _S.values_skipped, _S.events, _S.batches)
                        .where(_S.aggregation == layout.name)).all()
    return {str(m): (int(n), int(e), int(b)) for m, n, e, b in rows}


def forget_skipped(conn: Connection, layout: AggregationLayout, measures: Iterable[str]) -> None:
    """Delete the totals of ``measures`` (removed, or computing something else now: their counts were of
    another measure)."""
    names = list(measures)
    if names and sa.inspect(conn).has_table(SKIPPED_VALUES):
        conn.execute(sa.delete(SKIPPED_VALUES_TABLE).where(_S.aggregation == layout.name, _S.measure.in_(names)))


def last_record(conn: Connection, layout: AggregationLayout, pipeline_id: str) -> sa.Row[Any] | None:
    """The commit record of the pipeline's greatest batch (its id and the state after it), or None."""
    return conn.execute(
        sa.select(_B.batch_id, _B.latest_event_ts, _B.recovery_bucket)
        .where(_B.aggregation == layout.name, _B.pipeline_id == pipeline_id)
        .order_by(_B.batch_id.desc()).limit(1)).first()


def mark(conn: Connection, layout: AggregationLayout) -> tuple[int, int | None]:
    """What ``layout``'s commit records are now (how many, the latest commit time): a writer that read the
    inputs before it wrote checks that no batch committed in between."""
    b = BATCHES_TABLE.c
    count, latest = conn.execute(sa.select(sa.func.count(), sa.func.max(b.committed_at))
                                 .where(b.aggregation == layout.name)).one()
    return int(count), None if latest is None else int(latest)


def events_aggregated(conn: Connection, layout: AggregationLayout) -> int:
    """The events the aggregation's committed batches put into its buckets (their own or another)."""
    b = BATCHES_TABLE.c
    total = conn.execute(sa.select(sa.func.sum(b.events_aggregated + b.events_moved))
                         .where(b.aggregation == layout.name)).scalar()
    return int(total or 0)


def forget_late_and_purged(conn: Connection, layout: AggregationLayout) -> None:
    """Delete the records of the aggregation's events that went late, too old or into another bucket (a
    rollup rebuilt from its inputs holds each in its own bucket) and its purge marks."""
    r = REJECTED_TABLE.c
    late = [RecordKind.TOO_LATE.value, RecordKind.OLDER_THAN_BUFFER.value, RecordKind.MOVED.value]
    conn.execute(sa.delete(REJECTED_TABLE).where(r.aggregation == layout.name, r.kind.in_(late)))
    conn.execute(sa.delete(PURGES_TABLE).where(PURGES_TABLE.c.aggregation == layout.name))


def forget(conn: Connection, layout: AggregationLayout) -> None:
    """Delete the aggregation's commit records, recorded events, purge marks and values skipped (a rebuild)."""
    for table in (BATCHES_TABLE, REJECTED_TABLE, PURGES_TABLE):
        conn.execute(sa.delete(table).where(table.c.aggregation == layout.name))
    if sa.inspect(conn).has_table(SKIPPED_VALUES):
        conn.execute(sa.delete(SKIPPED_VALUES_TABLE).where(_S.aggregation == layout.name))
