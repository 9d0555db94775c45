"""Bucket starts as Spark columns: epoch ms of an event -> epoch ms of its bucket at a granularity.

Rules (documented in docs/time.md):

* a fixed level (a multiple of seconds, minutes or hours, length ``L``) cuts the *local wall clock* into
  slots of ``L`` counted from local midnight of 1970-01-01, and a change of the zone's offset (daylight
  saving) always starts a new bucket.  So the bucket of ``t`` starts at ``t`` minus what the local clock
  shows past the last multiple of ``L``, or at the last offset change if that came later.  For one hour
  this is "the hour of the local clock at that instant": the repeated hour of a fall-back change is two
  buckets, the skipped hour none;
* days, weeks, months and years follow the local calendar; a bucket starts at the first instant of the
  local day, ISO week (Monday), month or year (local midnight, or the first valid instant when midnight is
  skipped).

The offset-change cut is what makes levels nest: a bucket never spans two offsets, so the bucket of a
finer bucket's start is the bucket of every instant in it (``bucket_start(bucket_start(t, f), c) ==
bucket_start(t, c)`` whenever ``f`` divides ``c``, the rule ``lang.checks.cross_references`` enforces).

Only epoch arithmetic and the session-independent ``from_utc_timestamp`` / ``to_utc_timestamp`` are used,
so results do not depend on ``spark.sql.session.timeZone``.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from tiltframe.model.durations import Granularity, Unit
from tiltframe.timeutil.zones import fixed_offset_ms, spark_zone

_DAY_MS = 86_400_000
_MINUTE_MS = 60_000
_SECOND_MS = 1_000


def _offset_ms(ts: Column, zone: str) -> Column:
    """Offset of ``zone`` from GMT at instant ``ts`` (epoch ms), in ms."""
    fixed = fixed_offset_ms(zone)
    if fixed is not None:
        return F.lit(fixed)
    shifted = F.from_utc_timestamp(F.timestamp_millis(ts), spark_zone(zone))
    return F.unix_millis(shifted) - ts


def _local_to_instant(local_ms: Column, zone: str) -> Column:
    """The instant at which the local wall clock of ``zone`` shows ``local_ms`` (gaps resolve forward)."""
    fixed = fixed_offset_ms(zone)
    if fixed is not None:
        return local_ms - F.lit(fixed)
    return F.unix_millis(F.to_utc_timestamp(F.timestamp_millis(local_ms), spark_zone(zone)))


def _floor(value: Column, length_ms: int) -> Column:
    return value - F.pmod(value, F.lit(length_ms))


def _offset_change(after: Column, before: Column, offset: Column, zone: str, span_ms: int) -> Column:
    """The instant in ``(before, after]`` at which ``zone``'s offset became ``offset``.

    ``before`` (a whole second, with another offset) and ``after`` are less than ``span_ms`` apart, and
    offset changes happen on whole seconds (tz database), so a binary search over seconds finds it in
    ``log2(span / 1 s)`` steps.  Spark runs it only for the rare rows whose bucket spans a change.
    """
    steps = (span_ms // _SECOND_MS).bit_length() + 1
    start = F.struct(before.alias("lo"), _floor(after, _SECOND_MS).alias("hi"))

    def halve(acc: Column, _: Column) -> Column:
        lo, hi = acc.getField("lo"), acc.getField("hi")
        mid = lo + ((hi - lo) / F.lit(2 * _SECOND_MS)).cast("long") * F.lit(_SECOND_MS)
        now = _offset_ms(mid, zone) == offset
        return F.struct(F.when(now, lo).otherwise(mid).alias("lo"), F.when(now, mid).otherwise(hi).alias("hi"))

    return F.aggregate(F.array_repeat(F.lit(0), steps), start, halve).getField("hi")


def _fixed_start(ts: Column, length: int, zone: str) -> Column:
    """Start of the fixed-length (``length`` ms) bucket of ``ts``: a local-clock slot, cut at offset changes."""
    fixed = fixed_offset_ms(zone)
    if fixed == 0:
        return _floor(ts, length)
    if fixed is not None:
        return _floor(ts + F.lit(fixed), length) - F.lit(fixed)
    if _MINUTE_MS % length == 0:
        # Since 1972 every zone's offset is a whole number of quarter hours and every change happens on a
        # whole minute, so slots that divide a minute are the same counted from the epoch.
        return _floor(ts, length)
    offset = _offset_ms(ts, zone)
    slot = _floor(ts + offset, length) - offset
    return F.when(_offset_ms(slot, zone) == offset, slot).otherwise(
        _offset_change(ts, slot, offset, zone, length)
    )


def bucket_start(ts: Column, g: Granularity, zone: str) -> Column:
    """Epoch ms of the start of the bucket of ``g`` holding instant ``ts`` (epoch ms, long)."""
    unit = g.unit
    if not unit.is_calendar:
        return _fixed_start(ts, unit.fixed_ms * g.multiple, zone)  # type: ignore[operator]
    local = ts + _offset_ms(ts, zone)
    if unit is Unit.DAYS and g.multiple == 1:
        local_start = _floor(local, _DAY_MS)
    else:
        day = F.date_from_unix_date(F.floor(local / F.lit(_DAY_MS)).cast("int"))
        if unit is Unit.DAYS:
            # Multi-day buckets count whole local days from the epoch.
            days = F.unix_date(day)
            local_start = (days - F.pmod(days, F.lit(g.multiple))).cast("long") * F.lit(_DAY_MS)
        elif unit is Unit.WEEKS:
            # ISO weeks start on Monday; 1970-01-01 was a Thursday, three days after one.
            days = F.unix_date(day)
            local_start = (days - F.pmod(days + F.lit(3), F.lit(7))).cast("long") * F.lit(_DAY_MS)
        else:
            first = F.trunc(day, "MM" if unit is Unit.MONTHS else "YEAR")
            if g.multiple > 1:
                months = (F.year(first) - 1970) * 12 + F.month(first) - 1
                per = g.multiple * (12 if unit is Unit.YEARS else 1)
                aligned = months - F.pmod(months, F.lit(per))
                first = F.make_date(F.floor(aligned / 12).cast("int") + 1970, F.pmod(aligned, F.lit(12)) + 1, F.lit(1))
            local_start = F.unix_date(first).cast("long") * F.lit(_DAY_MS)
    return _local_to_instant(local_start, zone)
