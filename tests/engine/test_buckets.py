"""Bucket starts computed by Spark vs. an independent pandas computation in the local calendar."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from pyspark.sql import functions as F

from tiltframe.engine.buckets import bucket_start
from tiltframe.spec.durations import Granularity, Unit

ZONES = ["UTC", "Asia/Kolkata", "Europe/London", "America/New_York", "Australia/Lord_Howe", "+05:30", "-03:00"]


def oracle(ts_ms: pd.Series, unit: Unit, zone: str) -> pd.Series:
    """Bucket start instants by pandas: floor the local wall clock, keep the instant's own offset."""
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
        into_hour = (local.dt.minute * 60 + local.dt.second) * 1000 + local.dt.microsecond // 1000
        return ts_ms - into_hour.astype("int64")
    if unit is Unit.DAYS:
        parts = pd.DataFrame({"year": local.dt.year, "month": local.dt.month, "day": local.dt.day})
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
