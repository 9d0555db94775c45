"""Text times read in pandas (``functions.trickle_times``, a trickle window's script) as Spark reads an event
time (``engine.events.typed.type_events``): the same instants, the same texts refused, with the same reasons,
over texts made to sit on every edge of the forms (offsets, fractions, impossible dates, spaces, signs,
numbers past a long, years 0000 and 10000)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tiltframe.engine.events.typed import EVENT_TS, REASON, type_events
from tiltframe.functions.trickle_times import days_from_civil, text_times_ms
from tiltframe.lang import parse_app
from tiltframe.timeutil.parse import FORMATS

EDGES = [
    "2024-01-05T10:00:00Z", "2024-01-05 10:00:00", " 2024-01-05 10:00:00 ", "2024-01-05 10:00:00 +05:30",
    "2024-01-05T10:00+0530", "2024-01-05T23:00:00-02", "2024-01-05", "2024-01-05T10:00:00.123456789Z",
    "2024-01-05T10:00:00,5Z", "2024-01-05t10:00:00z", "2024-01-05T10:00:00 Z", "1704448800000", " 42 ", "+42",
    "-42", "007", "", " ", "abc", "2024-02-29", "2023-02-29", "2024-02-30", "1900-02-29", "2000-02-29",
    "2024-13-01", "2024-00-10", "2024-01-00", "2024-01-05T24:00:00Z", "2024-01-05T23:60:00Z",
    "2024-01-05T23:59:60Z", "2024-01-05T10:00:00+18:00", "2024-01-05T10:00:00-18:00", "2024-01-05T10:00:00+18:01",
    "2024-01-05T10:00:00+19", "2024-01-05T10:00:00+05:60", "0001-01-01T00:00:00Z", "0000-12-31T23:59:59Z",
    "0001-01-01T00:00:00+00:01", "9999-12-31T23:59:59.999Z", "9999-12-31T23:59:59-00:01", "-62135596800000",
    "-62135596800001", "253402300799999", "253402300800000", "9223372036854775807", "9223372036854775808",
    "-9223372036854775808", "-9223372036854775809", "00000000000000000000000042", "1.5", "1e3", "2024-1-5",
    "24-01-05", "2024-01-05T10", "2024-01-05T10:00:00.", "2024-01-05\t10:00:00", "\t2024-01-05", "٢٠٢٤-01-05",
    "29\x0c", "\t42\x7f", "\x0c+5", "\x0c-5", "-5\t", "-\x0c5", "+\t5", "\x01\x1f", "5\x0c6",
]


def parts() -> st.SearchStrategy[str]:
    """Texts near the forms: each part of a date-time drawn from valid and invalid values."""
    digits = st.integers(0, 99).map(lambda n: f"{n:02d}")
    year = st.one_of(st.integers(0, 9999).map(lambda n: f"{n:04d}"), st.sampled_from(["10000", "999"]))
    fraction = st.one_of(st.just(""), st.integers(0, 10**9 - 1).map(lambda n: f".{n:09d}"[: 1 + n % 10]))
    offset = st.sampled_from(["", "Z", "z", "+00:00", "+05:30", "-0530", "+18", "-18:00", "+18:30", "+23:59",
                              " +01:00", "+1", "+05:5"])
    sep = st.sampled_from(["T", " ", "t", "  ", "_"])
    stamp = st.tuples(year, digits, digits, sep, digits, digits, digits, fraction, offset).map(
        lambda p: f"{p[0]}-{p[1]}-{p[2]}{p[3]}{p[4]}:{p[5]}:{p[6]}{p[7]}{p[8]}")
    date = st.tuples(year, digits, digits).map(lambda p: f"{p[0]}-{p[1]}-{p[2]}")
    controls = st.text(st.sampled_from(["\t", "\x0c", "\x1f", "\x7f", " "]), max_size=2)
    wrapped = st.tuples(controls, st.integers(-(10**15), 10**15), controls).map(lambda p: "".join(map(str, p)))
    number = st.one_of(st.integers(-(2**64), 2**64).map(str), wrapped)
    return st.one_of(stamp, date, number, st.text(max_size=12))


def spark_reading(spark, texts: list[str]) -> tuple[list[int | None], list[str | None]]:
    """Each text as an event's ``@eventTime`` string on Spark: its epoch ms (None when refused) and the reason."""
    stream = parse_app("@eventTime('ts') define stream s (i long, ts string);").stream("s")
    raw = spark.createDataFrame([(i, t) for i, t in enumerate(texts)], "i long, ts string")
    typed = type_events(raw, stream, required=set(), time_attribute="ts", arrival_ms=0)
    rows = sorted(typed.select("i", EVENT_TS, REASON).collect())
    return ([None if r[REASON] is not None else r[EVENT_TS] for r in rows], [r[REASON] for r in rows])


def pandas_reading(texts: list[str]) -> tuple[list[int | None], list[str | None]]:
    ms, reasons = text_times_ms(pd.Series(texts, dtype=object), "field 'ts'")
    return [None if r is not None else int(m) for m, r in zip(ms, reasons, strict=True)], list(reasons)


@pytest.mark.slow
def test_the_edges_read_as_spark_reads_them(spark) -> None:
    assert pandas_reading(EDGES) == spark_reading(spark, EDGES)


@pytest.mark.slow
@settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(parts(), min_size=100, max_size=300))
def test_texts_near_the_forms_read_as_spark_reads_them(spark, texts: list[str]) -> None:
    texts = [t.replace("\x00", "") for t in texts]  # Spark's rows take no NUL in a string built from Python
    assert pandas_reading(texts) == spark_reading(spark, texts)


def test_reasons_name_the_value_and_the_place() -> None:
    ms, reasons = text_times_ms(pd.Series(["2024-02-30", "0000-06-01", "2024-01-05T10:00:00Z"]), ["a", "b", "c"])
    assert list(reasons) == [f"a: value '2024-02-30' is not a timestamp (expected {FORMATS})",
                             "b: value '0000-06-01' is outside years 0001-9999", None]
    assert ms[2] == 1_704_448_800_000


@given(st.dates(min_value=datetime(1, 1, 1).date(), max_value=datetime(9999, 12, 31).date()))
def test_days_from_civil_counts_days_as_the_calendar_does(day) -> None:
    want = (datetime(day.year, day.month, day.day, tzinfo=UTC) - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(days=1)
    got = days_from_civil(np.array([day.year]), np.array([day.month]), np.array([day.day]))
    assert int(got[0]) == want
