"""The bucket starts retrieval computes for the edges of a range are the ones the engine gives events: the
same instants through ``engine.events.buckets.bucket_start`` (Spark) and ``model.bucket_bounds`` (Python),
over zones with daylight saving, half-hour changes, fixed offsets and GMT, near their clock changes."""

from __future__ import annotations

import numpy as np
import pytest
from pyspark.sql import functions as F

from tiltframe.engine.events.buckets import bucket_start as spark_bucket_start
from tiltframe.model.bucket_bounds import bucket_end, bucket_start
from tiltframe.model.durations import Granularity, Unit

ZONES = ["UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "America/Santiago", "+05:45"]
LEVELS = [Granularity(Unit.SECONDS), Granularity(Unit.SECONDS, 10), Granularity(Unit.MINUTES),
          Granularity(Unit.MINUTES, 15), Granularity(Unit.HOURS), Granularity(Unit.HOURS, 2),
          Granularity(Unit.HOURS, 6), Granularity(Unit.DAYS), Granularity(Unit.DAYS, 3), Granularity(Unit.WEEKS),
          Granularity(Unit.MONTHS), Granularity(Unit.MONTHS, 3), Granularity(Unit.YEARS), Granularity(Unit.YEARS, 2)]


def instants() -> np.ndarray:
    """Uniform instants 1971-2036, and instants within a day of the spring and autumn clock changes."""
    rng = np.random.default_rng(5)
    uniform = rng.integers(31_536_000_000, 2_100_000_000_000, 300)
    years = rng.integers(1975, 2036, 120)
    months = rng.choice([3, 4, 9, 10, 11], 120)
    firsts = [np.datetime64(f"{y}-{m:02d}-01", "ms") for y, m in zip(years, months, strict=True)]
    changes = np.array(firsts).astype("int64")
    near = changes + rng.integers(0, 40 * 86_400_000, 120)
    exact = (near // 1_800_000) * 1_800_000 + rng.choice([-1, 0, 1], 120)  # on and beside half hours
    return np.concatenate([uniform, near, exact]).astype("int64")


@pytest.mark.slow
def test_python_bucket_starts_equal_the_engines(spark) -> None:
    ts = instants()
    df = spark.createDataFrame([(int(t),) for t in ts], "ts long")
    columns = [(z, g) for z in ZONES for g in LEVELS]
    rows = df.select("ts", *[spark_bucket_start(F.col("ts"), g, z).alias(f"c{i}")
                             for i, (z, g) in enumerate(columns)]).collect()
    mismatches = []
    for row in rows:
        for i, (zone, g) in enumerate(columns):
            mine = bucket_start(row["ts"], g, zone)
            if mine != row[f"c{i}"]:
                mismatches.append((zone, str(g), row["ts"], row[f"c{i}"], mine))
    assert not mismatches, mismatches[:10]


def test_a_bucket_ends_where_the_next_starts() -> None:
    ts = instants()[::7]
    for zone in ZONES:
        for g in LEVELS:
            for t in ts:
                start = bucket_start(int(t), g, zone)
                end = bucket_end(start, g, zone)
                assert start <= t < end
                assert bucket_start(end, g, zone) == end and bucket_start(end - 1, g, zone) == start
