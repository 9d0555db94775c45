"""Event times read by Spark (``engine.events.event_time``) against the Python parser of ``within`` bounds
(``timeutil.parse``, plain ``datetime``): every text either names the same instant on both or is refused by
both, whichever of Spark's paths it takes (a long, a common ISO form by cast, any other form)."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F
from pyspark.sql import types as T

from tiltframe.engine.events.event_time import event_time_ms
from tiltframe.errors import QueryError
from tiltframe.timeutil.parse import parse_timestamp

#: Years 0001-9999, as the engine keeps them (docs/time.md); outside them an event is rejected.
MIN_TS, MAX_TS = -62_135_596_800_000, 253_402_300_799_999


def two(lo: int, hi: int) -> st.SearchStrategy[str]:
    return st.integers(lo, hi).map(lambda v: f"{v:02d}")


date = st.builds(lambda y, m, d: f"{y}-{m}-{d}",
                 st.sampled_from(["0000", "0001", "1969", "1970", "2000", "2024", "9999"]) | st.from_regex(
                     r"\A[0-9]{4}\Z"),
                 two(0, 13), two(0, 32)) | st.sampled_from(["2024-1-05", "2024-01-5", "20240105", "24-01-05"])
clock = st.builds(
    lambda h, m, s, frac: f"{h}:{m}{s}{frac}",
    two(0, 25), two(0, 61),
    st.just("") | two(0, 61).map(lambda s: f":{s}"),
    st.just("") | st.builds(lambda sep, digits: f"{sep}{digits}", st.sampled_from([".", ","]),
                            st.from_regex(r"\A[0-9]{0,10}\Z")),
)
zone = st.just("") | st.sampled_from(["Z", "z", "UTC", "GMT", "+", "Europe/Paris"]) | st.builds(
    lambda sign, h, colon, m: f"{sign}{h}{colon}{m}", st.sampled_from(["+", "-"]), two(0, 25),
    st.sampled_from([":", ""]), st.just("") | two(0, 61))
timestamp = st.builds(
    lambda lead, d, sep, c, gap, z, trail: f"{lead}{d}{sep}{c}{gap}{z}{trail}",
    st.sampled_from(["", " ", "  "]), date, st.sampled_from(["T", " ", "t", "", "TT"]), clock,
    st.sampled_from(["", " ", "  "]), zone, st.sampled_from(["", " "]),
) | st.builds(lambda d, z: f"{d}{z}", date, zone)
number = st.builds(lambda lead, sign, digits, tail: f"{lead}{sign}{digits}{tail}", st.sampled_from(["", " "]),
                   st.sampled_from(["", "-", "+", "--"]), st.from_regex(r"\A[0-9]{1,20}\Z"),
                   st.sampled_from(["", " ", ".0", ".", "e3", "-1", ":00"]))
text = timestamp | number | st.text(max_size=12)


def oracle(value: str) -> int | None:
    """The instant Python's parser reads in ``value`` (GMT without an offset), None where it refuses it or it
    lies outside years 0001-9999."""
    try:
        ms = parse_timestamp(value)
    except (QueryError, OverflowError, ValueError):
        return None
    return ms if MIN_TS <= ms <= MAX_TS else None


def spark_times(spark, values: list[str]) -> list[int | None]:
    df = spark.createDataFrame([(i, v) for i, v in enumerate(values)], "i int, s string")
    got = df.select("i", event_time_ms(F.col("s"), T.StringType()).alias("ms")).collect()
    out: list[int | None] = [None] * len(values)
    for row in got:
        out[row.i] = row.ms if row.ms is not None and MIN_TS <= row.ms <= MAX_TS else None
    return out


FIXED = [
    "2013-01-01T10:00:00Z", "2013-01-01 10:00:00", "2024-01-05 10:00:00 +05:30", "2024-01-05 10:00:00 +0530",
    "2024-01-05T10:00+0530", "2024-01-05T23:00:00-02", "2024-01-05", "2024-01-05T10:30:00.250+00:00",
    "2024-01-05T10:30:00.123456789Z", "2024-01-05T10:30:00,5Z", "  2024-01-05T10:00:00Z ", "2024-02-30T00:00:00Z",
    "2024-1-5", "2024", "2024-01-05T10", "1704448800000", " 1704448800000 ", "+1704448800000", "-5", "1.0", "1e3",
    "2024-01-05T10:00:00z", "2024-01-05t10:00:00Z", "2024-01-05T10:00:00+24:00", "2024-01-05T10:00:00+18:00",
    "2024-01-05T10:00:00+19:00", "2024-01-05T10:00:00+05:60", "0001-01-01T00:00:00Z", "9999-12-31T23:59:59.999Z",
    "10000-01-01T00:00:00Z", "0000-12-31T23:59:59Z", "2024-01-05T10:00:00 Z", "2024-01-05T10:00:00UTC",
    "2024-01-05T10:00:00+05:30:00", "1969-12-31T23:59:59.9999Z", "2024-01-05 10:00:00.5 +05:30",
    "2024-01-05T10:00:00.Z", "0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00", "1900-01-01 00:00:00.000001",
]


def test_fixed_forms_name_the_instant_python_reads(spark) -> None:
    assert spark_times(spark, FIXED) == [oracle(v) for v in FIXED]
    # The forms the docs list, each read as the instant it names.
    got = dict(zip(FIXED, spark_times(spark, FIXED), strict=True))
    assert got["2013-01-01T10:00:00Z"] == got["2013-01-01 10:00:00"] == 1_357_034_400_000
    assert got["2024-01-05T10:00+0530"] == got["2024-01-05 10:00:00 +05:30"] == 1_704_429_000_000
    assert got["2024-01-05T10:30:00.123456789Z"] == 1_704_450_600_123
    assert got["1969-12-31T23:59:59.9999Z"] == -1


@pytest.mark.slow
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(values=st.lists(text, min_size=1, max_size=200))
def test_any_text_names_the_instant_python_reads(spark, values: list[str]) -> None:
    assert spark_times(spark, values) == [oracle(v) for v in values]


def test_typed_sources_are_read_as_their_instants(spark) -> None:
    """Dates and zone-less timestamps as GMT, instants as they are, whole numbers as epoch ms."""
    day = dt.date(1969, 12, 31)
    wall = dt.datetime(2024, 1, 5, 10, 30, 0, 250_000)
    df = spark.createDataFrame([(day, wall, 1_704_448_800_000, 1.5e12, 1.25)],
                               "d date, w timestamp_ntz, n long, x double, y double")
    row = df.select(*[event_time_ms(F.col(c), df.schema[c].dataType).alias(c) for c in df.columns]).first()
    assert row.d == -86_400_000
    assert row.w == 1_704_450_600_250
    assert (row.n, row.x, row.y) == (1_704_448_800_000, 1_500_000_000_000, None)
