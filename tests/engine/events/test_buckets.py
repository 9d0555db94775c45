"""Bucket starts computed by Spark vs. an independent pandas computation in the local calendar, and the
nesting of every valid chain of levels (what rolling a level up from the finer one relies on)."""

from __future__ import annotations

import functools
import itertools
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from zoneinfo import ZoneInfo

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from pyspark.sql import Column
from pyspark.sql import functions as F

from tiltframe.engine.events.buckets import bucket_start
from tiltframe.lang import builder as b
from tiltframe.model.durations import Granularity, Unit

ZONES = ["UTC", "Asia/Kolkata", "Europe/London", "America/New_York", "Australia/Lord_Howe", "+05:30", "-03:00"]


def oracle(ts_ms: pd.Series, unit: Unit, zone: str) -> pd.Series:
    """Bucket start instants by pandas: floor the local wall clock (hours: ``fixed_oracle``, cut at changes)."""
    utc = pd.to_datetime(ts_ms, unit="ms", utc=True)
    tz = zone if not zone.startswith(("+", "-")) else f"UTC{zone}"
    if tz.startswith("UTC") and len(tz) > 3:
        sign = 1 if tz[3] == "+" else -1
        h, m = int(tz[4:6]), int(tz[7:9])
        local = utc.dt.tz_convert(None) + sign * pd.Timedelta(hours=h, minutes=m)
        offset = sign * (h * 3600 + m * 60) * 1000
        naive = True
    else:
        local = utc.dt.tz_convert(tz)
        naive = False
    if unit is Unit.SECONDS:
        return ts_ms - ts_ms % 1000
    if unit is Unit.MINUTES:
        return ts_ms - ts_ms % 60_000
    if unit is Unit.HOURS:
        return pd.Series(fixed_oracle(ts_ms.to_numpy(), 3_600_000, zone), index=ts_ms.index)
    if unit is Unit.DAYS:
        parts = pd.DataFrame({"year": local.dt.year, "month": local.dt.month, "day": local.dt.day})
    elif unit is Unit.WEEKS:  # the local date of the week's Monday
        monday = pd.to_datetime(local.dt.strftime("%Y-%m-%d")) - pd.to_timedelta(local.dt.weekday, unit="D")
        parts = pd.DataFrame({"year": monday.dt.year, "month": monday.dt.month, "day": monday.dt.day})
    elif unit is Unit.MONTHS:
        parts = pd.DataFrame({"year": local.dt.year, "month": local.dt.month, "day": 1})
    else:
        parts = pd.DataFrame({"year": local.dt.year, "month": 1, "day": 1})
    starts = pd.to_datetime(parts)
    if naive:
        return (starts.astype("int64") // 1_000_000 - offset).astype("int64")
    localized = starts.dt.tz_localize(tz, nonexistent="shift_forward", ambiguous=True)
    return (localized.dt.tz_convert("UTC").astype("int64") // 1_000_000).astype("int64")


def _timestamps() -> np.ndarray:
    rng = np.random.default_rng(7)
    anchors = [
        "2023-03-12 06:30:00",  # New York spring forward (07:00 UTC)
        "2023-11-05 05:30:00",  # New York fall back (06:00 UTC)
        "2023-03-26 00:30:00",  # London spring forward (01:00 UTC)
        "2023-10-29 00:30:00",  # London fall back (01:00 UTC)
        "2023-04-01 14:30:00",  # Lord Howe: half-hour DST change
        "2023-12-31 23:30:00",  # year end
        "2024-02-28 23:30:00",  # leap day
        "2024-02-29 18:00:00",
        "1969-12-31 23:00:00",  # before the epoch
    ]
    base = np.array([pd.Timestamp(a, tz="UTC").value // 1_000_000 for a in anchors], dtype=np.int64)
    around = base[:, None] + rng.integers(-3 * 3_600_000, 3 * 3_600_000, (len(base), 400))
    uniform = rng.integers(pd.Timestamp("2020-01-01", tz="UTC").value // 1_000_000,
                           pd.Timestamp("2026-01-01", tz="UTC").value // 1_000_000, 2000)
    return np.concatenate([around.ravel(), uniform, base])


@pytest.mark.parametrize("zone", ZONES)
def test_bucket_starts_match_local_calendar(spark, zone: str) -> None:
    ts = pd.Series(_timestamps(), name="ts")
    df = spark.createDataFrame(pd.DataFrame({"ts": ts}))
    units = list(Unit)
    got = df.select("ts", *[bucket_start(F.col("ts"), Granularity(u), zone).alias(u.name) for u in units]).toPandas()
    got = got.sort_values("ts").reset_index(drop=True)
    for u in units:
        expected = oracle(got["ts"], u, zone)
        mismatch = got[u.name] != expected
        assert not mismatch.any(), (zone, u, got.loc[mismatch, ["ts", u.name]].head(), expected[mismatch].head())


def test_repeated_hour_gives_two_buckets_and_day_has_25_hours(spark) -> None:
    # 2023-11-05 in New York: 01:00-02:00 local happens twice.
    day_start = pd.Timestamp("2023-11-05 00:00", tz="America/New_York").value // 1_000_000
    ts = pd.Series(np.arange(day_start, day_start + 25 * 3_600_000, 600_000), name="ts")
    df = spark.createDataFrame(pd.DataFrame({"ts": ts}))
    hours = {r[0] for r in df.select(bucket_start(F.col("ts"), Granularity(Unit.HOURS), "America/New_York")).collect()}
    days = {r[0] for r in df.select(bucket_start(F.col("ts"), Granularity(Unit.DAYS), "America/New_York")).collect()}
    assert len(hours) == 25
    assert days == {day_start}


# --- fixed lengths: local-clock slots cut at offset changes -------------------------------------------------


def _tz(zone: str) -> tzinfo:
    """The zone for Python, read independently of tiltframe.timeutil."""
    if zone == "UTC":
        return UTC
    if zone[0] in "+-":
        sign = 1 if zone[0] == "+" else -1
        return timezone(sign * timedelta(hours=int(zone[1:3]), minutes=int(zone[4:6])))
    return ZoneInfo(zone)


def offsets_ms(ts_ms: np.ndarray, zone: str) -> np.ndarray:
    """Offset from GMT of ``zone`` at each instant, in ms (pandas)."""
    utc = pd.to_datetime(ts_ms, unit="ms", utc=True)
    local = utc.tz_convert(_tz(zone)).tz_localize(None)
    return ((local - utc.tz_localize(None)) // pd.Timedelta(milliseconds=1)).to_numpy(dtype=np.int64)


_SCANNED = tuple(int(datetime(year, 1, 1, tzinfo=UTC).timestamp() * 1000) for year in (2009, 2027))


@functools.cache
def offset_changes(zone: str) -> tuple[int, ...]:
    """Every instant (epoch ms) at which ``zone``'s offset changed in 2009-2026: an hourly scan, then a
    bisection to the second with zoneinfo."""
    tz = _tz(zone)
    hours = np.arange(*_SCANNED, 3_600_000, dtype=np.int64)
    offsets = offsets_ms(hours, zone)
    changes = []

    def offset(seconds: int) -> timedelta | None:
        return datetime.fromtimestamp(seconds, tz).utcoffset()

    for i in np.flatnonzero(offsets[1:] != offsets[:-1]):
        lo, hi = int(hours[i]) // 1000, int(hours[i + 1]) // 1000
        after = offset(hi)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if offset(mid) == after else (mid, hi)
        changes.append(hi * 1000)
    return tuple(changes)


def fixed_oracle(ts_ms: np.ndarray, length_ms: int, zone: str) -> np.ndarray:
    """Start of the fixed-length bucket: the slot of the local clock (counted from local 1970-01-01 00:00),
    or the last offset change when that came later (a bucket never spans two offsets)."""
    ts_ms = np.asarray(ts_ms, dtype=np.int64)
    slot = ts_ms - np.mod(ts_ms + offsets_ms(ts_ms, zone), length_ms)
    changes = np.array(offset_changes(zone), dtype=np.int64)
    if not len(changes):
        return slot
    last = np.searchsorted(changes, ts_ms, side="right") - 1
    last_change = np.where(last >= 0, changes[np.maximum(last, 0)], np.iinfo(np.int64).min)
    return np.maximum(slot, last_change)


FIXED = [Granularity(Unit.SECONDS, 10), Granularity(Unit.MINUTES, 5), Granularity(Unit.MINUTES, 45),
         Granularity(Unit.HOURS), Granularity(Unit.HOURS, 2), Granularity(Unit.HOURS, 7)]


@pytest.mark.parametrize("zone", ["UTC", "America/New_York", "Asia/Kolkata", "Australia/Lord_Howe", "+05:45"])
def test_fixed_lengths_match_pandas(spark, zone: str) -> None:
    ts = _timestamps()
    ts = np.concatenate([ts[(ts >= _SCANNED[0]) & (ts < _SCANNED[1])], _around_changes(zone)])
    df = spark.createDataFrame(pd.DataFrame({"ts": ts}))
    got = df.select("ts", *[bucket_start(F.col("ts"), g, zone).alias(g.table_suffix) for g in FIXED]).toPandas()
    for g in FIXED:
        expected = fixed_oracle(got["ts"].to_numpy(), g.unit.fixed_ms * g.multiple, zone)  # type: ignore[operator]
        bad = got[g.table_suffix].to_numpy() != expected
        assert not bad.any(), (zone, str(g), got.loc[bad, ["ts", g.table_suffix]].head(), expected[bad][:5])


def _around_changes(zone: str) -> np.ndarray:
    """Instants every 7 min 13.5 s over a day either side of each offset change of 2010 and 2023 (St. John's
    still changed at 00:01 in 2010), and right at it."""
    years = {2010, 2023}
    changes = np.array([c for c in offset_changes(zone) if datetime.fromtimestamp(c / 1000, UTC).year in years],
                       dtype=np.int64)
    steps = np.arange(-200, 200, dtype=np.int64) * 433_500
    exact = np.array([-1_000, -1, 0, 1, 1_000], dtype=np.int64)
    return (changes[:, None] + np.concatenate([steps, exact])[None, :]).ravel()


def test_multi_hour_buckets_at_new_york_changes(spark) -> None:
    """Two-hour slots of the local clock; a change of offset starts a new bucket (UTC hours shown)."""
    def starts(day: str) -> list[str]:
        first = pd.Timestamp(f"{day} 04:00", tz="UTC").value // 1_000_000
        df = spark.createDataFrame(pd.DataFrame({"ts": np.arange(first, first + 6 * 3_600_000, 600_000)}))
        got = df.select(bucket_start(F.col("ts"), Granularity(Unit.HOURS, 2), "America/New_York").alias("s"))
        return sorted({pd.Timestamp(r.s, unit="ms").strftime("%H:%M") for r in got.collect()})

    # Spring forward at 07:00 UTC (02:00 EST -> 03:00 EDT): local 00-02 EST, then 03-04 EDT, then 04-06 EDT.
    assert starts("2023-03-12") == ["03:00", "05:00", "07:00", "08:00"]
    # Fall back at 06:00 UTC (02:00 EDT -> 01:00 EST): local 00-02 EDT, the repeated 01-02 EST, then 02-04 EST.
    assert starts("2023-11-05") == ["04:00", "06:00", "07:00", "09:00"]


def gmt_oracle(ts_ms: np.ndarray, g: Granularity) -> np.ndarray:
    """Bucket starts in GMT by pandas and the calendar: multiples counted from 1970-01-01 (days, months, years
    since then)."""
    utc = pd.DatetimeIndex(pd.to_datetime(ts_ms, unit="ms", utc=True))
    if not g.unit.is_calendar:
        length = pd.Timedelta(milliseconds=g.unit.fixed_ms * g.multiple)  # type: ignore[operator]
        return utc.floor(length).asi8 // 1_000_000
    if g.unit is Unit.DAYS:
        days = utc.floor("D").asi8 // 86_400_000_000_000
        return (days - days % g.multiple) * 86_400_000
    months = (utc.year - 1970) * 12 + utc.month - 1
    per = g.multiple * (12 if g.unit is Unit.YEARS else 1)
    first = months - months % per
    return np.array([int(datetime(1970 + m // 12, m % 12 + 1, 1, tzinfo=UTC).timestamp() * 1000) for m in first])


@pytest.mark.parametrize(
    "every",
    ["10 sec, 1 min, 10 min, 1 hour, day, month", "15 sec, 5 min, 6 hour, day, 3 month, year", "7 sec, 7 min, 7 hour",
     "day, 7 day, 28 day", "2 month, 6 month, year, 10 year"],
)
def test_chains_in_gmt_match_pandas(spark, every: str) -> None:
    """Each level rolled up from the one before it, as the engine does, equals pandas' start from the event."""
    chain = b.aggregation("A", source="S", select=[b.sum("v").as_("s")], every=every).granularities
    ts = _timestamps()
    levels = spark.createDataFrame(pd.DataFrame({"ts": ts}))
    previous = "ts"
    for g in chain:
        levels = levels.withColumn(g.table_suffix, bucket_start(F.col(previous), g, "UTC"))
        previous = g.table_suffix
    got = levels.toPandas()
    for g in chain:
        expected = gmt_oracle(got["ts"].to_numpy(), g)
        bad = got[g.table_suffix].to_numpy() != expected
        assert not bad.any(), (every, str(g), got.loc[bad, ["ts", g.table_suffix]].head(), expected[bad][:5])


# --- nesting: bucket_start(bucket_start(t, finer), coarser) == bucket_start(t, coarser) ---------------------

NESTING_ZONES = ["UTC", "America/New_York", "Europe/Berlin", "Asia/Kolkata", "Australia/Lord_Howe", "+05:45",
                 "America/St_Johns", "America/Santiago"]
_DAY_S = 86_400
_DAY_DIVISORS = [d for d in range(1, _DAY_S + 1) if _DAY_S % d == 0]
_OTHER_LENGTHS = [7, 45, 7 * 60, 90 * 60, 7 * 3600, 10 * 3600]  # seconds; fine unless a day level follows
_FACTORS = [2, 3, 4, 5, 6, 7, 10, 12, 15, 24, 30, 60]


def _fixed(seconds: int) -> Granularity:
    """A fixed length in its largest whole unit (so the parser's unit-then-multiple order is by length)."""
    for unit in (Unit.HOURS, Unit.MINUTES, Unit.SECONDS):
        size = unit.fixed_ms // 1000  # type: ignore[operator]
        if seconds % size == 0:
            return Granularity(unit, seconds // size)
    raise AssertionError(seconds)


@st.composite
def chains(draw: st.DrawFn) -> tuple[Granularity, ...]:
    """A valid chain: fixed levels each dividing the next (and a day, when calendar levels follow), then days
    (only 'day' before months and years), months (dividing 12 before years), years."""
    days = draw(st.sampled_from([(), (1,), (2,), (7,), (1, 2), (1, 7), (2, 6), (3, 6)]))
    months = draw(st.sampled_from([(), (1,), (2,), (3,), (5,), (1, 3), (2, 6), (3, 6)])) if days in ((), (1,)) else ()
    years = draw(st.sampled_from([(), (1,), (2,), (1, 5)])) if days in ((), (1,)) else ()
    if months and 12 % months[-1]:
        years = ()
    calendar = [Granularity(Unit.DAYS, n) for n in days] + [Granularity(Unit.MONTHS, n) for n in months]
    calendar += [Granularity(Unit.YEARS, n) for n in years]
    fits = _DAY_DIVISORS if calendar else _DAY_DIVISORS + _OTHER_LENGTHS
    lengths = [draw(st.sampled_from(fits))] if not calendar or draw(st.booleans()) else []
    for _ in range(draw(st.integers(0, 4)) if lengths else 0):
        longer = [lengths[-1] * f for f in _FACTORS if lengths[-1] * f in fits or
                  (not calendar and lengths[-1] * f <= _DAY_S)]
        if not longer:
            break
        lengths.append(draw(st.sampled_from(longer)))
    chain = tuple(_fixed(n) for n in lengths) + tuple(calendar)
    assume(len(chain) > 1)
    return chain


def _check_valid(chain: tuple[Granularity, ...], zone: str) -> None:
    """Validation accepts every chain the strategy draws (the same rules, written the other way round)."""
    stream = b.stream("S", v="double", ts="long")
    agg = b.aggregation("A", source="S", select=[b.sum("v").as_("s")], every=list(chain), by="ts", timezone=zone)
    b.app(stream, agg)


@functools.cache
def _start(column: str, g: Granularity, zone: str) -> Column:
    """``bucket_start`` of a column, built once per session (building the Column is most of an example)."""
    return bucket_start(F.col(column), g, zone)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    chain=chains(),
    zone=st.sampled_from(NESTING_ZONES),
    anywhere=st.lists(st.integers(_SCANNED[0], _SCANNED[1] - 1), min_size=1, max_size=50),
    near=st.lists(st.integers(-2 * 86_400_000, 2 * 86_400_000), min_size=1, max_size=50),
)
def test_finer_buckets_nest_in_coarser_ones(spark, chain, zone, anywhere, near) -> None:
    """One Spark job per chain: instants anywhere in 2009-2026, around every offset change of 2023 (dense),
    and around a dozen changes of 2009-2026 (drawn), with each level computed directly from the instant and
    from the finer level's bucket start."""
    _check_valid(chain, zone)
    changes = np.array(offset_changes(zone) or (1_700_000_000_000,), dtype=np.int64)
    around = (changes[:: max(1, len(changes) // 12)][:, None] + np.array(near, dtype=np.int64)[None, :]).ravel()
    ts = np.concatenate([np.array(anywhere, dtype=np.int64), around, _around_changes(zone)])
    levels = spark.createDataFrame(pd.DataFrame({"ts": ts})).select(
        "ts", *[_start("ts", g, zone).alias(g.table_suffix) for g in chain]
    )
    wrong = [
        F.when(_start(f.table_suffix, c, zone) != F.col(c.table_suffix), F.lit(f"{f} -> {c}"))
        for f, c in itertools.pairwise(chain)
    ]
    rows = levels.select("*", F.coalesce(*wrong).alias("wrong")).where(F.col("wrong").isNotNull()).limit(5).collect()
    assert not rows, (zone, [str(g) for g in chain], rows)
