"""A level added to a stored rollup, built from a finer level it keeps (``tiltframe migrate``).

Every state merges, so the rows of a finer level whose buckets nest in the new level's merge, per bucket
of the new level, keys and shard, into exactly the rows the pipeline would have written.  The source is
the coarsest kept finer level whose buckets nest: each boundary of the new level over the stored range is
also one of its boundaries (a week does not nest in a month, and an hour of a zone 30 minutes off GMT
does not nest in a GMT hour level of another width).

What the source no longer holds cannot be built: buckets of the new level that start before the source's
purge point are not written, and the new level records that point as purged, so that reads and later
batches treat them as purged, never as complete.  A level with no nesting source (finer than every kept
one) holds only the buckets that start after the latest event stored, recorded the same way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pyarrow as pa
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tiltframe.aggregates.layout import AGG_TIMESTAMP, SHARD_ID, AggregationLayout
from tiltframe.model.bucket_bounds import bucket_end, bucket_start
from tiltframe.model.durations import Granularity
from tiltframe.store.reads.frames import fetch_all, typed_frame
from tiltframe.store.reads.pandas_merges import merge_rows
from tiltframe.store.schema import PURGES_TABLE
from tiltframe.store.writes.commits import now_ms
from tiltframe.store.writes.upserts import prepare_rows, upsert_rows

__all__ = ["fill_level"]

#: Buckets of the new level built per read of the source (bounds the rows held at once).
CHUNK_BUCKETS = 64


def fill_level(conn: Connection, layout: AggregationLayout, g: Granularity, tables: Mapping[Granularity, sa.Table],
               kept: Sequence[Granularity], purged: Mapping[str, int], complete_from: int | None) -> str:
    """Fill ``tables[g]`` (new, empty) from the coarsest of ``kept`` (levels that hold their rows) finer
    than ``g`` whose buckets nest in it; returns what was done, in words.  ``purged``: the purge point of
    each table; ``complete_from``: just after the latest event stored (None: nothing stored)."""
    zone = layout.zone
    order = list(layout.spec.granularities)
    finer = [k for k in kept if order.index(k) < order.index(g)]
    for source in reversed(finer):
        table = tables[source]
        low, high = conn.execute(sa.select(sa.func.min(table.c[AGG_TIMESTAMP]),
                                           sa.func.max(table.c[AGG_TIMESTAMP]))).one()
        since = purged.get(table.name)
        if low is None:
            cut = None if since is None else _first_start(since, g, zone)
            return _purge_before(conn, layout, g, cut, f"level {g.table_suffix}: nothing stored to build it from")
        starts = _boundaries(int(low), int(high), g, zone, since)
        if any(bucket_start(s, source, zone) != s for s in starts):
            continue
        rows = _merge_into(conn, layout, tables[g], table, starts)
        done = f"level {g.table_suffix} built from level {source.table_suffix}: {rows:,} rows"
        return _purge_before(conn, layout, g, None if since is None else starts[0], done)
    cut = None if complete_from is None else _first_start(complete_from, g, zone)
    return _purge_before(conn, layout, g, cut, f"level {g.table_suffix} has no finer kept level to be built from")


def _first_start(at: int, g: Granularity, zone: str) -> int:
    """The first start of a bucket of ``g`` at or after ``at``."""
    start = bucket_start(at, g, zone)
    return start if start == at else bucket_end(start, g, zone)


def _boundaries(low: int, high: int, g: Granularity, zone: str, since: int | None) -> list[int]:
    """The starts of ``g``'s buckets from the one holding ``low`` (or, when it starts before ``since``, the
    source's purge point, the first one after it) through the one holding ``high``, then the end of the last."""
    start = bucket_start(low, g, zone)
    if since is not None and start < since:  # that bucket lost some of its source rows
        start = _first_start(since, g, zone)
    starts = [start]
    while starts[-1] <= high:
        starts.append(bucket_end(starts[-1], g, zone))
    return starts


def _merge_into(conn: Connection, layout: AggregationLayout, target: sa.Table, source: sa.Table,
                starts: list[int]) -> int:
    """Merge ``source``'s rows into ``target`` per bucket of ``starts`` (and shard); returns rows written."""
    types = layout.stored_column_types
    bounds = np.asarray(starts, dtype="int64")
    written = 0
    for i in range(0, len(starts) - 1, CHUNK_BUCKETS):
        lo, hi = starts[i], starts[min(i + CHUNK_BUCKETS, len(starts) - 1)]
        at = source.c[AGG_TIMESTAMP]
        frame = typed_frame(fetch_all(conn, sa.select(*(source.c[c] for c in types)).where(at >= lo, at < hi)),
                            types)
        if frame.empty:
            continue
        frame[AGG_TIMESTAMP] = bounds[np.searchsorted(bounds, frame[AGG_TIMESTAMP].to_numpy(), side="right") - 1]
        shards = frame.groupby(SHARD_ID, sort=True) if layout.partitioned else [(None, frame)]
        for shard, rows in shards:
            merged = merge_rows(rows.drop(columns=[SHARD_ID]) if shard is not None else rows, layout)
            data = pa.Table.from_pandas(merged[list(layout.column_types)], preserve_index=False)
            written += upsert_rows(conn, layout, target, prepare_rows(layout, data, shard))
    return written


def _purge_before(conn: Connection, layout: AggregationLayout, g: Granularity, cut: int | None, done: str) -> str:
    """Record that ``g``'s buckets starting before ``cut`` are not held (they would be partial)."""
    if cut is None:
        return done
    p = PURGES_TABLE.c
    conn.execute(sa.delete(PURGES_TABLE).where(p.aggregation == layout.name, p.granularity == g.table_suffix))
    conn.execute(sa.insert(PURGES_TABLE).values(aggregation=layout.name, granularity=g.table_suffix,
                                                purged_before=cut, latest_event_ts=cut - 1, rows_purged=0,
                                                purged_at=now_ms()))
    return f"{done}; it holds the buckets that start from {cut} on (epoch ms), the earlier ones are not kept"
