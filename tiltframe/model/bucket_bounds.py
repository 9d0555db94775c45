"""Bucket starts and ends of a level outside Spark, for the few instants a read needs (the edges of a range)
and for the boundaries of a level built from a finer one (``store.lifecycle.level_fills``).

The rules are ``tiltframe.engine.events.buckets``' (docs/time.md), computed here on one instant with ``zoneinfo``
instead of on a column with Spark's functions; ``tests/model/test_bucket_bounds.py`` holds the two to
the same answers over random instants, zones and levels.
"""

from __future__ import annotations

from datetime import UTC, date, timedelta

from tiltframe.model.durations import Granularity, Unit
from tiltframe.timeutil.parse import epoch_ms, local_time
from tiltframe.timeutil.zones import fixed_offset_ms, resolve_zone

_DAY_MS = 86_400_000
_MINUTE_MS = 60_000
_SECOND_MS = 1_000
_EPOCH_DAY = date(1970, 1, 1)


def _offset_ms(ts: int, zone: str) -> int:
    """Offset of ``zone`` from GMT at instant ``ts`` (epoch ms), in ms."""
    offset = local_time(ts, resolve_zone(zone)).utcoffset()
    return 0 if offset is None else offset // timedelta(milliseconds=1)


def _local_to_instant(local_ms: int, zone: str) -> int:
    """The instant at which ``zone``'s wall clock shows ``local_ms``: a skipped time with the offset before
    the change (forward, as Spark's ``to_utc_timestamp``), a repeated one at its first occurrence."""
    wall = local_time(local_ms, UTC)  # the wall clock's fields, then read in the zone
    return epoch_ms(wall.replace(tzinfo=resolve_zone(zone)))


def _floor(value: int, length: int) -> int:
    return value - value % length


def _offset_change(after: int, before: int, offset: int, zone: str) -> int:
    """The whole second in ``(before, after]`` at which ``zone``'s offset became ``offset``."""
    lo, hi = before, _floor(after, _SECOND_MS)
    while hi - lo > _SECOND_MS:
        mid = lo + (hi - lo) // (2 * _SECOND_MS) * _SECOND_MS
        lo, hi = (lo, mid) if _offset_ms(mid, zone) == offset else (mid, hi)
    return hi


def _fixed_start(ts: int, length: int, zone: str) -> int:
    fixed = fixed_offset_ms(zone)
    if fixed == 0 or (fixed is None and _MINUTE_MS % length == 0):
        return _floor(ts, length)
    if fixed is not None:
        return _floor(ts + fixed, length) - fixed
    offset = _offset_ms(ts, zone)
    slot = _floor(ts + offset, length) - offset
    return slot if _offset_ms(slot, zone) == offset else _offset_change(ts, slot, offset, zone)


def bucket_start(ts: int, g: Granularity, zone: str) -> int:
    """Epoch ms of the start of the bucket of ``g`` holding instant ``ts``."""
    unit = g.unit
    if not unit.is_calendar:
        return _fixed_start(ts, unit.fixed_ms * g.multiple, zone)  # type: ignore[operator]
    local = ts + _offset_ms(ts, zone)
    days = local // _DAY_MS
    if unit is Unit.DAYS:
        start_day = days - days % g.multiple
    elif unit is Unit.WEEKS:
        start_day = days - (days + 3) % 7  # ISO weeks: 1970-01-01 was a Thursday
    else:
        day = _EPOCH_DAY + timedelta(days=days)
        months = (day.year - 1970) * 12 + day.month - 1
        per = g.multiple * (12 if unit is Unit.YEARS else 1)
        aligned = months - months % per
        start_day = (date(aligned // 12 + 1970, aligned % 12 + 1, 1) - _EPOCH_DAY).days
    return _local_to_instant(start_day * _DAY_MS, zone)


def _longest_ms(g: Granularity) -> int:
    """More than the longest bucket of ``g`` can last."""
    days = {Unit.DAYS: 1, Unit.WEEKS: 7, Unit.MONTHS: 31, Unit.YEARS: 366}
    if g.unit in days:
        return (days[g.unit] * g.multiple + 1) * _DAY_MS
    return g.unit.fixed_ms * g.multiple + _SECOND_MS  # type: ignore[operator]


def bucket_end(start: int, g: Granularity, zone: str) -> int:
    """The start of the bucket after the one starting at ``start``: the first instant whose bucket starts
    later (bucket starts never decrease with the instant, so a binary search finds it)."""
    lo, hi = start, start + _longest_ms(g)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if bucket_start(mid, g, zone) <= start else (lo, mid)
    return hi
