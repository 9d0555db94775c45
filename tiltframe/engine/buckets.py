"""Bucket starts as Spark columns: epoch ms of an event -> epoch ms of its bucket at a granularity.

Rules (documented in docs/time.md):

* seconds and minutes are fixed lengths counted from the epoch (every real zone's offset is a multiple
  of 15 minutes, so local and GMT boundaries coincide);
* an hour bucket is the hour of the *local wall clock at that instant*: in the repeated hour of a
  daylight-saving change there are two buckets with the same local label and different starts, and the
  skipped hour has no bucket;
* days, months and years follow the local calendar; a bucket starts at the first instant of the local
  day, month or year (local midnight, or the first valid instant when midnight is skipped).

Only epoch arithmetic and the session-independent ``from_utc_timestamp`` / ``to_utc_timestamp`` are used,
so results do not depend on ``spark.sql.session.timeZone``.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from tiltframe.spec.durations import Granularity, Unit
from tiltframe.timeutil.zones import fixed_offset_ms, spark_zone

_DAY_MS = 86_400_000
_QUARTER_HOUR_MS = 900_000


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


def bucket_start(ts: Column, g: Granularity, zone: str) -> Column:
    """Epoch ms of the start of the bucket of ``g`` holding instant ``ts`` (epoch ms, long)."""
    unit = g.unit
    if unit in (Unit.SECONDS, Unit.MINUTES, Unit.HOURS):
        length = unit.fixed_ms * g.multiple  # type: ignore[operator]
        if _QUARTER_HOUR_MS % length == 0 or fixed_offset_ms(zone) == 0:
            return _floor(ts, length)
        offset = _offset_ms(ts, zone)
        return _floor(ts + offset, length) - offset
    local = ts + _offset_ms(ts, zone)
    if unit is Unit.DAYS and g.multiple == 1:
        local_start = _floor(local, _DAY_MS)
    else:
        day = F.date_from_unix_date(F.floor(local / F.lit(_DAY_MS)).cast("int"))
        if unit is Unit.DAYS:
            # Multi-day buckets count whole local days from the epoch.
            days = F.unix_date(day)
            local_start = (days - F.pmod(days, F.lit(g.multiple))).cast("long") * F.lit(_DAY_MS)
        else:
            first = F.trunc(day, "MM" if unit is Unit.MONTHS else "YEAR")
            if g.multiple > 1:
                months = (F.year(first) - 1970) * 12 + F.month(first) - 1
                per = g.multiple * (12 if unit is Unit.YEARS else 1)
                aligned = months - F.pmod(months, F.lit(per))
                first = F.make_date((aligned / 12).cast("int") + 1970, F.pmod(aligned, F.lit(12)) + 1, F.lit(1))
            local_start = F.unix_date(first).cast("long") * F.lit(_DAY_MS)
    return _local_to_instant(local_start, zone)
