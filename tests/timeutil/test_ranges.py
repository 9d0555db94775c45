"""``within`` ranges in the aggregation's zone: patterns, days, relative times and ISO intervals, each
checked against pandas' own calendar arithmetic over random instants, zones and amounts."""

from __future__ import annotations

from datetime import timedelta, timezone

import pandas as pd
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tiltframe.errors import QueryError
from tiltframe.timeutil.ranges import within_range

# Daylight saving at 02:00 or 03:00 (Berlin, New York), by half an hour (Lord Howe), none (Kolkata,
# Kathmandu's +05:45 as an offset), and GMT.
ZONES = ["UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata", "+05:45"]
PANDAS_ZONE: dict[str, object] = {"+05:45": timezone(timedelta(hours=5, minutes=45))}
UNITS = {"year": "years", "month": "months", "week": "weeks", "day": "days", "hour": "hours", "minute": "minutes"}

zones = st.sampled_from(ZONES)
instants = st.integers(978_307_200_000, 2_100_000_000_000)  # 2001 ... 2036 (pandas' pytz zones end in 2037)


def ms(ts: pd.Timestamp) -> int:
    return int(ts.value // 1_000_000)


def local(naive: pd.Timestamp, zone: str) -> pd.Timestamp:
    """``naive`` as a time of ``zone``; a time a clock change skips or repeats is left to other tests."""
    try:
        return naive.tz_localize(PANDAS_ZONE.get(zone, zone), ambiguous="raise", nonexistent="raise")
    except (ValueError, TypeError):  # pytz-style errors are ValueErrors: NonExistent/AmbiguousTimeError
        assume(False)
        raise


def now_in(now: int, zone: str) -> pd.Timestamp:
    return pd.Timestamp(now, unit="ms", tz="UTC").tz_convert(PANDAS_ZONE.get(zone, zone)).tz_localize(None)


def moved(naive: pd.Timestamp, n: int, unit: str) -> pd.Timestamp:
    return naive + pd.DateOffset(**{UNITS[unit]: n})


@settings(max_examples=150, deadline=None)
@given(zones, st.integers(1971, 2036), st.integers(1, 12), st.integers(1, 28), st.integers(0, 23),
       st.integers(0, 59), st.sampled_from(["year", "month", "day", "hour", "minute"]))
def test_a_pattern_is_its_period_in_the_zone(zone: str, y: int, mo: int, d: int, h: int, mi: int, unit: str) -> None:
    fields = [f"{y:04d}", f"{mo:02d}", f"{d:02d}", f"{h:02d}", f"{mi:02d}", "00"]
    keep = ["year", "month", "day", "hour", "minute"].index(unit) + 1
    shown = [f if i < keep else "**" for i, f in enumerate(fields)]
    pattern = f"{shown[0]}-{shown[1]}-{shown[2]} {shown[3]}:{shown[4]}:{shown[5]}"
    start = pd.Timestamp(*(int(f) if i < keep else (1 if i in (1, 2) else 0) for i, f in enumerate(fields)))
    begin = local(start, zone)
    end = begin + pd.Timedelta(**{UNITS[unit]: 1}) if unit in ("hour", "minute") else local(moved(start, 1, unit), zone)
    assert within_range(pattern, zone=zone) == (ms(begin), ms(end))


@given(zones, instants, st.integers(1, 400), st.sampled_from(list(UNITS)))
@settings(max_examples=200, deadline=None)
def test_last_n_units_and_now_minus_n_units(zone: str, now: int, n: int, unit: str) -> None:
    n = min(n, {"year": 30, "month": 360}.get(unit, n))  # back to 1971 at most: older offsets are history
    if unit in ("hour", "minute"):
        start = now - n * {"hour": 3_600_000, "minute": 60_000}[unit]
    else:  # the same local time n units before, on the local calendar
        start = ms(local(moved(now_in(now, zone), -n, unit), zone))
    assume(start < now)
    assert within_range(f"last {n} {UNITS[unit]}", zone=zone, now_ms=now) == (start, now)
    assert within_range(f"now - {n} {unit}", "now", zone=zone, now_ms=now) == (start, now)
    assert within_range(f"NOW-{n}{UNITS[unit]}", "now + 0 sec", zone=zone, now_ms=now) == (start, now)


@given(zones, instants)
@settings(max_examples=150, deadline=None)
def test_today_yesterday_and_this_unit(zone: str, now: int) -> None:
    today = now_in(now, zone).normalize()
    day = [ms(local(today + pd.Timedelta(days=k), zone)) for k in (-1, 0, 1)]
    assert within_range("today", zone=zone, now_ms=now) == (day[1], day[2])
    assert within_range("Yesterday", zone=zone, now_ms=now) == (day[0], day[1])
    assert within_range("yesterday", "today", zone=zone, now_ms=now) == (day[0], day[1])
    assert within_range("this day", zone=zone, now_ms=now) == (day[1], day[2])
    monday = today - pd.Timedelta(days=today.weekday())
    first = today.replace(day=1)
    periods = {"week": (monday, monday + pd.Timedelta(days=7)), "month": (first, first + pd.DateOffset(months=1)),
               "year": (today.replace(month=1, day=1), today.replace(year=today.year + 1, month=1, day=1))}
    for unit, (a, b) in periods.items():
        assert within_range(f"this {unit}", zone=zone, now_ms=now) == (ms(local(a, zone)), ms(local(b, zone)))
    hour = now_in(now, zone).floor("h")
    begin = ms(local(hour, zone))
    assert within_range("this hour", zone=zone, now_ms=now) == (begin, begin + 3_600_000)


@given(zones, st.integers(1971, 2036), st.integers(1, 12), st.integers(1, 28), st.integers(0, 3),
       st.integers(0, 14), st.integers(0, 40))
@settings(max_examples=150, deadline=None)
def test_iso_intervals(zone: str, y: int, mo: int, d: int, months: int, days: int, hours: int) -> None:
    assume(months or days or hours)
    start = pd.Timestamp(y, mo, d)
    duration = "P" + (f"{months}M" if months else "") + (f"{days}D" if days else "") + (f"T{hours}H" if hours else "")
    calendar_end = local(start + pd.DateOffset(months=months, days=days), zone)
    end = ms(calendar_end) + hours * 3_600_000
    date = f"{y:04d}-{mo:02d}-{d:02d}"
    begin = ms(local(start, zone))
    assert within_range(f"{date}/{duration}", zone=zone) == (begin, end)
    morning = ms(local(start + pd.Timedelta("6.5h"), zone))
    assert within_range(f"{date}T00:00/{date}T06:30", zone=zone) == (begin, morning)
    back = local(pd.Timestamp(y, mo, d) - pd.DateOffset(days=days + 1), zone)
    assert within_range(f"P{days + 1}D/{date}", zone=zone) == (ms(back), begin)


def test_times_and_days_without_an_offset_are_local() -> None:
    # 2024-03-31: Berlin's clocks go forward at 02:00, so the day has 23 hours.
    assert within_range("2024-03-31", zone="Europe/Berlin") == (1711839600000, 1711839600000 + 23 * 3_600_000)
    assert within_range("2024-03-31 12:00:00", zone="Europe/Berlin") == (1711879200000, 1711879201000)
    # An offset written wins over the zone.
    assert within_range("2024-03-31 12:00:00 +00:00", zone="Europe/Berlin") == (1711886400000, 1711886401000)
    assert within_range("2024-01-** **:**:** +05:30", zone="Europe/Berlin") == within_range(
        "2024-01-** **:**:**", zone="+05:30")
    # Longs are instants: no zone.
    assert within_range(5, 10, zone="Asia/Kolkata") == (5, 10)


@pytest.mark.parametrize(("args", "message"), [
    (("now",), "must name a period"),
    (("last 6 parsecs",), "unknown unit 'parsecs'"),
    (("now - 3 fortnights", "now"), "unknown unit 'fortnights'"),
    (("P1D/P2D",), "not two durations"),
    (("now", "now - 1 hour"), "the start must be before the end"),
    (("2024-13-** **:**:**",), "invalid within pattern"),
    (("the day after",), "must name a period"),
])
def test_refusals_say_what_is_wrong(args: tuple[str, ...], message: str) -> None:
    with pytest.raises(QueryError, match=message):
        within_range(*args, zone="Europe/Berlin", now_ms=1_700_000_000_000)
