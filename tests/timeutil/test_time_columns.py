"""Readable time columns hold every instant a bucket can start at (years 0001-9999), missing ones stay
missing, and the text says the instant exactly, with the zone's offset at that instant."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pandas as pd
from hypothesis import given
from hypothesis import strategies as st

from tiltframe.timeutil.time_columns import aware_times, iso_text

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
FIRST_MS, LAST_MS = -62_135_596_800_000, 253_402_300_799_999  # 0001-01-01, 9999-12-31 (UTC)


@given(st.lists(st.one_of(st.none(), st.integers(FIRST_MS + 86_400_000, LAST_MS - 86_400_000)), max_size=20),
       st.sampled_from(["UTC", "America/New_York", "Asia/Kolkata"]))
def test_instants_of_any_year_read_back_exactly(values: list[int | None], zone: str) -> None:
    times = aware_times(pd.Series(values, dtype=object), zone)
    text = iso_text(times).tolist()
    for ms, said in zip(values, text, strict=True):
        if ms is None:
            assert said is None
            continue
        want = (EPOCH + timedelta(milliseconds=ms)).astimezone(ZoneInfo(zone))
        got = datetime.fromisoformat(said)
        assert got - EPOCH == timedelta(milliseconds=ms)  # the instant (== would refuse times in a fold)
        assert got.utcoffset() == want.utcoffset()  # the zone's offset at that instant
        assert re.fullmatch(r"[^.]*\.\d{3}[+-][\d:]+", said)  # milliseconds, then the offset


def test_the_first_and_last_instants_in_utc() -> None:
    text = iso_text(aware_times(pd.Series([FIRST_MS, LAST_MS, None]), "UTC")).tolist()
    assert text == ["0001-01-01T00:00:00.000+00:00", "9999-12-31T23:59:59.999+00:00", None]
