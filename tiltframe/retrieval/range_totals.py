"""The exact totals of any time range: a retrieval without ``per``, or ``per`` another zone's buckets
(``per "days in Asia/Kolkata"``), each such bucket a range of its own (docs/time.md).

The range ``[start, end)`` is tiled by whole buckets, the coarsest first: each level takes the buckets
that lie entirely inside what is left and that retention kept, and leaves the two edges to the next finer
level.  The finest level must then meet both ends on its bucket boundaries; where it cannot (an end
inside one of its buckets, or its buckets there purged), no exact total exists, and the error says which
part of the range is missing and why.  Every state merges exactly, so the rows of all the tiles merged
per group are the totals of the range, as if one bucket spanned it.  Weeks straddle months and years,
so they are left out of the tiling (unless they are the only level).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from tiltframe.aggregates.layout import AGG_TIMESTAMP, AggregationLayout
from tiltframe.errors import QueryError
from tiltframe.model.bucket_bounds import bucket_end, bucket_start
from tiltframe.model.durations import Granularity, Unit
from tiltframe.store.base import Store
from tiltframe.timeutil.parse import iso_ts

#: The most buckets of another zone one retrieval builds (each is a range read from several levels).
MAX_BUCKETS = 5_000

# The calendar's first and last instants, with a year to spare for the buckets around them.
_FIRST_MS = -62_104_060_800_000  # 0002-01-01
_LAST_MS = 253_370_678_400_000  # 9998-12-31


@dataclass(frozen=True, slots=True)
class Tile:
    """The buckets of ``granularity`` starting in ``[start_ms, end_ms)``: one read."""

    granularity: Granularity
    start_ms: int
    end_ms: int


def tiles(layout: AggregationLayout, start_ms: int, end_ms: int, purged: Mapping[Granularity, int]) -> list[Tile]:
    """The reads whose buckets exactly tile ``[start_ms, end_ms)``, in time order; a QueryError when the
    kept levels cannot (``purged``: per level, the instant before which its buckets are gone)."""
    for edge in (start_ms, end_ms):
        if not _FIRST_MS <= edge <= _LAST_MS:
            msg = (f"within: {edge} is outside the calendar (years 0001 to 9999); the totals of a range (no per) "
                   f"need both ends on it")
            raise QueryError(msg)
    levels = layout.spec.granularities
    chain = [g for g in levels if g.unit is not Unit.WEEKS] or list(levels)  # weeks alone tile by weeks
    return _cover(layout, chain, len(chain) - 1, start_ms, end_ms, purged)


def _cover(layout: AggregationLayout, chain: list[Granularity], i: int, start: int, end: int,
           purged: Mapping[Granularity, int]) -> list[Tile]:
    if start >= end:
        return []
    g, zone = chain[i], layout.zone
    first = _boundary_at_or_after(start, g, zone)
    kept = purged.get(g)
    if kept is not None:
        first = max(first, _boundary_at_or_after(kept, g, zone))
    last = bucket_start(end, g, zone)  # the last boundary at or before the end
    if i == 0:
        _check_finest(layout, g, start, end, first, last, kept)
        return [Tile(g, start, end)]
    if first >= last:  # no whole kept bucket of this level inside
        return _cover(layout, chain, i - 1, start, end, purged)
    return [*_cover(layout, chain, i - 1, start, first, purged), Tile(g, first, last),
            *_cover(layout, chain, i - 1, last, end, purged)]


def _boundary_at_or_after(ms: int, g: Granularity, zone: str) -> int:
    start = bucket_start(ms, g, zone)
    return ms if start == ms else bucket_end(start, g, zone)


def _check_finest(layout: AggregationLayout, g: Granularity, start: int, end: int, first: int, last: int,
                  kept: int | None) -> None:
    """The finest level covers ``[start, end)`` only from its own boundaries on, and only where kept."""
    zone = layout.zone
    for edge, word in ((start, "starts"), (end, "ends")):
        bucket = bucket_start(edge, g, zone)
        if bucket != edge:
            msg = (f"within: the range {word} at {iso_ts(edge, zone)}, inside a bucket of {g} (the finest level "
                   f"{layout.name} keeps), from {iso_ts(bucket, zone)} to {iso_ts(bucket_end(bucket, g, zone), zone)}: "
                   f"no exact total can {word[:-1]} there; move it to one of those instants, or ask per \"{g}\"")
            raise QueryError(msg)
    if kept is not None and first > start:
        until = iso_ts(min(first, end), zone)
        msg = (f"within: the range needs the {g} buckets from {iso_ts(start, zone)} to {until}, but "
               f"{layout.name} keeps {g} only from {iso_ts(kept, zone)} on (retention), and no coarser level "
               f"covers that part whole; start the range at {until} or on a coarser boundary")
        raise QueryError(msg)
    assert last == end


def other_zone_buckets(layout: AggregationLayout, store: Store, start_ms: int, end_ms: int, g: Granularity,
                       zone: str) -> list[tuple[int, int]]:
    """The buckets of ``g`` in ``zone`` that start in ``[start_ms, end_ms)`` and may hold stored events,
    as ``(start, end)``; past :data:`MAX_BUCKETS`, a QueryError."""
    earliest, latest = store.earliest_event_ts(layout), store.latest_event_ts(layout)
    if earliest is None or latest is None:
        return []
    b = _boundary_at_or_after(max(start_ms, bucket_start(earliest, g, zone)), g, zone)
    out: list[tuple[int, int]] = []
    while b < end_ms and b <= latest:
        if len(out) == MAX_BUCKETS:
            msg = (f"per {g} in {zone}: the range holds more than {MAX_BUCKETS:,} such buckets with data; ask "
                   f"for a shorter range or a coarser duration")
            raise QueryError(msg)
        end = bucket_end(b, g, zone)
        out.append((b, end))
        b = end
    return out


def rows_of_ranges(layout: AggregationLayout, store: Store, ranges: Sequence[tuple[int, int]],
                   keys: Mapping[str, Sequence[Any]] | None = None) -> pd.DataFrame:
    """The stored partial rows of every range's tiles, each labelled with its range's start as
    ``AGG_TIMESTAMP`` (so that merging by bucket gives the totals of each range); one read per level."""
    purged = store.purged_before(layout)
    by_level: dict[Granularity, list[tuple[int, int, int]]] = {}
    for lo, hi in ranges:
        for t in tiles(layout, lo, hi, purged):
            by_level.setdefault(t.granularity, []).append((t.start_ms, t.end_ms, lo))
    frames = []
    for g, parts in by_level.items():
        starts, ends, labels = (np.array(column, dtype="int64") for column in zip(*sorted(parts), strict=True))
        rows = store.read(layout, g, int(starts[0]), int(ends.max()), keys=keys)
        at = rows[AGG_TIMESTAMP].to_numpy(dtype="int64")
        tile = np.searchsorted(starts, at, side="right") - 1
        inside = (tile >= 0) & (at < ends[np.maximum(tile, 0)])
        rows = rows[inside].copy()
        rows[AGG_TIMESTAMP] = labels[tile[inside]]
        frames.append(rows)
    if not frames:
        return store.read(layout, layout.spec.granularities[0], 0, 0, keys=keys)
    return pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
