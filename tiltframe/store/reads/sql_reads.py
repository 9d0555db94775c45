"""Reads of a SQL store: partial rows of a range (in primary-key order), rows merged in SQL where that gives
exactly what pandas would, recorded events, and what ``inspect`` shows."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
import sqlalchemy as sa

from tiltframe.aggregates.layout import AGG_TIMESTAMP, SHARD_ID, AggregationLayout
from tiltframe.errors import StoreError
from tiltframe.model.durations import Granularity
from tiltframe.model.streams import AttrType
from tiltframe.store.base import (
    REJECTED_COLUMNS,
    REJECTED_TIMES,
    AggregationInfo,
    KeyTerm,
    PurgeInfo,
    RecordKind,
    SkippedValues,
    TableInfo,
)
from tiltframe.store.lifecycle.definitions import Definition
from tiltframe.store.lifecycle.table_rebuilds import primary_key
from tiltframe.store.reads.frames import fetch_all, fetch_compiled, typed_frame
from tiltframe.store.reads.merged_reads import MergedRead, out_of_range
from tiltframe.store.reads.read_plans import RangeRead
from tiltframe.store.retries import retried
from tiltframe.store.schema import (
    AGGREGATIONS,
    BATCHES_TABLE,
    PURGES_TABLE,
    REJECTED_TABLE,
    SKIPPED_VALUES,
)
from tiltframe.store.sql_connections import SqlConnections
from tiltframe.store.writes import commits


class SqlReads(SqlConnections):
    """Stored rows read back: ranges, merged reads, recorded events, totals."""

    def read(
        self,
        layout: AggregationLayout,
        granularity: Granularity,
        start_ms: int | None = None,
        end_ms: int | None = None,
        *,
        with_shards: bool = False,
        keys: Mapping[str, Sequence[Any]] | None = None,
    ) -> pd.DataFrame:
        """Stored partial rows with ``start_ms <= AGG_TIMESTAMP < end_ms`` (and, for each group-by key of
        ``keys``, one of its values), in primary-key order, without ``SHARD_ID`` (unless ``with_shards``,
        for a partitioned layout): shards' rows of one bucket and key follow each other, to be merged by
        the reader."""
        table = self._tables(layout)[layout.spec.granularity(granularity)]
        types = layout.stored_column_types if with_shards else layout.column_types
        read = RangeRead(table, tuple(types), layout.key_names, start_ms, end_ms, keys or {})
        assumed = {AGGREGATIONS, table.name} <= self._present
        try:
            return self._read_range(layout, read, types)
        except StoreError:
            if not assumed:
                raise
            return self._read_range(layout, read, types)  # a table seen before may be gone: look again

    def _read_range(self, layout: AggregationLayout, read: RangeRead, types: dict[str, AttrType]) -> pd.DataFrame:
        with self._errors("read", layout), self._read(layout) as (conn, _):
            if not self._has_table(conn, read.table.name):
                return typed_frame([], types)
            rows = fetch_compiled(conn, self._plans.compiled(read), read.params())
        return typed_frame(rows, types)

    def read_merged(
        self,
        layout: AggregationLayout,
        granularity: Granularity,
        by: Sequence[str],
        states: Sequence[str],
        start_ms: int | None = None,
        end_ms: int | None = None,
        *,
        by_interval: bool = True,
        where: Sequence[KeyTerm] = (),
    ) -> pd.DataFrame | None:
        """Partial rows merged in SQL by ``by`` (and the bucket), or None when they cannot be exactly what
        ``merge_rows`` makes (``store.reads.merged_reads``)."""
        table = self._tables(layout)[layout.spec.granularity(granularity)]
        read = MergedRead.of(table, self.dialect, layout, by, states, start_ms, end_ms, by_interval,
                             where)
        assumed = {AGGREGATIONS, table.name} <= self._present
        try:
            return self._read_merged(layout, read)
        except StoreError:
            if not assumed:
                raise
            return self._read_merged(layout, read)  # a table seen before may be gone: look again

    def _read_merged(self, layout: AggregationLayout, read: MergedRead) -> pd.DataFrame | None:
        if read.table.name not in self._present:  # made anew, maybe: its collations are looked up again
            self._merged.forget(read.table.name)
        try:
            with self._errors("read", layout), self._read(layout) as (conn, _):
                if not self._has_table(conn, read.table.name):
                    return read.empty()
                return self._merged.run(conn, read)
        except StoreError as failed:
            if out_of_range(failed.__cause__):  # a sum the database cannot hold: the caller merges in pandas
                return None
            raise

    def rejected(self, layout: AggregationLayout, limit: int = 100) -> pd.DataFrame:
        """The latest ``limit`` recorded events of ``layout`` (rejected or moved), newest first."""
        r = REJECTED_TABLE.c
        types = {"batch_id": AttrType.LONG, **dict.fromkeys(REJECTED_COLUMNS, AttrType.STRING),
                 **dict.fromkeys(REJECTED_TIMES, AttrType.LONG), "recorded_at": AttrType.LONG}
        query = (sa.select(*(r[c] for c in types)).where(r.aggregation == layout.name)
                 .order_by(r.id.desc()).limit(limit))
        with self._errors("read the rejected events of", layout), self._read(layout) as (conn, _):
            return typed_frame(fetch_all(conn, query), types)

    @retried
    def recorded_events(self, layout: AggregationLayout, kinds: Sequence[str]) -> pd.DataFrame:
        """Every recorded event of ``layout`` of the given kinds: ``kind``, ``raw`` (its attributes as JSON),
        ``event_timestamp`` and ``adjusted_timestamp`` (where a moved one went)."""
        r = REJECTED_TABLE.c
        types = {"kind": AttrType.STRING, "raw": AttrType.STRING, "event_timestamp": AttrType.LONG,
                 "adjusted_timestamp": AttrType.LONG}
        query = sa.select(*(r[c] for c in types)).where(r.aggregation == layout.name, r.kind.in_(list(kinds)))
        with self._errors("read the recorded events of", layout), self._read(layout) as (conn, _):
            return typed_frame(fetch_all(conn, query.order_by(r.id)), types)

    def info(self, layout: AggregationLayout) -> AggregationInfo:
        """Row counts and bucket ranges per table, batch totals and rejected counts by reason."""
        b, r = BATCHES_TABLE.c, REJECTED_TABLE.c
        with self._errors("inspect", layout), self._read(layout) as (conn, registered):
            present = set(sa.inspect(conn).get_table_names())
            tables = []
            for g, t in self._tables(layout).items():
                count, first, last = 0, None, None
                if t.name in present:
                    ts = t.c[AGG_TIMESTAMP]
                    count, first, last = conn.execute(
                        sa.select(sa.func.count(), sa.func.min(ts), sa.func.max(ts))).one()
                tables.append(TableInfo(t.name, str(g), int(count), _int(first), _int(last)))
            finest = self._tables(layout)[layout.spec.finest].name
            shards: list[str] = []
            if finest in present and SHARD_ID in primary_key(conn, finest):
                shards = [str(v) for v in conn.execute(
                    sa.select(sa.column(SHARD_ID)).select_from(sa.table(finest)).distinct().order_by(
                        sa.column(SHARD_ID))).scalars()]
            counts = (b.events_read, b.events_aggregated, b.events_rejected, b.events_moved)
            totals = conn.execute(
                sa.select(sa.func.count(), *(sa.func.coalesce(sa.func.sum(c), 0) for c in counts),
                          sa.func.min(b.min_event_ts), sa.func.max(b.max_event_ts))
                .where(b.aggregation == layout.name)).one()
            p = PURGES_TABLE.c
            order = {g.table_suffix: i for i, g in enumerate(layout.spec.granularities)}
            purges = conn.execute(sa.select(p.granularity, p.purged_before, p.rows_purged, p.purged_at)
                                  .where(p.aggregation == layout.name)).all()
            reasons, kinds = (conn.execute(
                sa.select(c, sa.func.count()).where(r.aggregation == layout.name, *where)
                .group_by(c).order_by(sa.func.count().desc(), c)).all()
                for c, where in ((r.reason, (r.kind.is_distinct_from(RecordKind.MOVED.value),)), (r.kind, ())))
            definition = self._definition(conn, layout.name) if layout.table is None else None
            counted = commits.skipped_totals(conn, layout) if self._has_table(conn, SKIPPED_VALUES) else {}
        batches, read, aggregated, rejected, moved, first_ts, last_ts = (_int(v) for v in totals)
        return AggregationInfo(  # plain ints: the servers' drivers give DECIMAL for a SUM
            name=layout.name, spec_hash=registered.spec_hash, zone=registered.zone, tables=tuple(tables),
            batches=batches or 0, events_read=read or 0, events_aggregated=aggregated or 0,
            events_rejected=rejected or 0, rejected_by_reason=tuple((str(x), int(n)) for x, n in reasons),
            min_event_ts=first_ts, max_event_ts=last_ts, events_moved=moved or 0,
            recorded_by_kind=tuple((str(x), int(n)) for x, n in kinds),
            purges=tuple(PurgeInfo(f"{layout.name}_{g}", int(b), int(n), int(at))
                         for g, b, n, at in sorted(purges, key=lambda p: order.get(p[0], len(order)))),
            shards=tuple(shards),
            complete_from=tuple(sorted(definition.complete_from.items())) if definition else (),
            app=definition.app if definition else None,
            values_skipped=_skipped_values(layout, counted, batches or 0),
        )

    @retried
    def latest_event_ts(self, layout: AggregationLayout) -> int | None:
        """The greatest event time aggregated by any pipeline of ``layout`` (what retention is measured
        against), or None before the first event."""
        return self._event_ts(layout, "latest", BATCHES_TABLE.c.max_event_ts, sa.func.max)

    @retried
    def earliest_event_ts(self, layout: AggregationLayout) -> int | None:
        """The least event time aggregated by any pipeline of ``layout``, or None before the first event."""
        return self._event_ts(layout, "earliest", BATCHES_TABLE.c.min_event_ts, sa.func.min)

    def _event_ts(self, layout: AggregationLayout, which: str, column: Any, extreme: Any) -> int | None:
        b = BATCHES_TABLE.c
        with self._errors(f"read the {which} event time of", layout), self._read(layout) as (conn, _):
            found = conn.execute(sa.select(extreme(column)).where(b.aggregation == layout.name)).scalar()
        return None if found is None else int(found)

    @retried
    def purged_before(self, layout: AggregationLayout) -> dict[Granularity, int]:
        """Per level, the instant before which its buckets were purged (a level never purged is absent)."""
        p = PURGES_TABLE.c
        levels = {g.table_suffix: g for g in layout.spec.granularities}
        with self._errors("read the purges of", layout), self._read(layout) as (conn, _):
            rows = conn.execute(sa.select(p.granularity, p.purged_before).where(p.aggregation == layout.name)).all()
        return {levels[suffix]: int(before) for suffix, before in rows if suffix in levels}

    @retried
    def complete_from(self, layout: AggregationLayout) -> dict[str, int]:
        """Per measure added to a stored rollup (``tiltframe migrate``): the instant before which its buckets
        read NULL, since they hold events aggregated before it existed (none: every measure complete).  The
        embedded store's answer is kept until anything is committed to it."""
        if layout.table is not None:
            return {}
        token = self.change_token()  # taken first: a commit after it makes the next call read again
        kept = self._complete_from.get(layout.name)
        if token is not None and kept is not None and kept[0] == token:
            return kept[1]
        with self._errors("read the definition of", layout), self._read(layout) as (conn, _):
            stored = self._definition(conn, layout.name)
        found = {} if stored is None else stored.complete_from
        if token is not None:
            self._complete_from[layout.name] = (token, found)
        return found

    @retried
    def recorded_definition(self, layout: AggregationLayout) -> Definition | None:
        """The definition of ``layout``'s aggregation the store recorded (None: none recorded, or no store)."""
        if not self._exists():
            return None
        with self._errors("read the definition of", layout), self._engine.connect() as conn:
            return self._definition(conn, layout.name)

    @retried
    def last_purged_at(self, layout: AggregationLayout) -> int:
        """Epoch ms of the last purge of ``layout``, or of its registration when it was never purged."""
        p = PURGES_TABLE.c
        with self._errors("read the purge time of", layout), self._read(layout) as (conn, registered):
            last = conn.execute(sa.select(sa.func.max(p.purged_at)).where(p.aggregation == layout.name)).scalar()
            return int(last if last is not None else registered.created_at)



def _skipped_values(layout: AggregationLayout, counted: dict[str, tuple[int, int, int]],
                    batches: int) -> tuple[SkippedValues, ...]:
    """Each argument measure's totals; the batches that did not count it are the rest of ``batches``."""
    out = []
    for item in layout.argument_measures:
        skipped, events, done = counted.get(item.alias, (0, 0, 0))
        out.append(SkippedValues(item.alias, None if done == 0 and batches else skipped, events, done,
                                 max(batches - done, 0)))
    return tuple(out)


def _int(value: Any) -> int | None:
    """A number from a driver (int, Decimal, NumPy) as a Python int; None stays None."""
    return None if value is None else int(value)
