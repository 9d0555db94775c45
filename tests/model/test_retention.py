"""Seed 001's purge and retention rules: defaults, minimums, ``all``, and the cut-off instants."""

from __future__ import annotations

import dataclasses
import re
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from tiltframe.errors import DefinitionError
from tiltframe.lang import parse_app
from tiltframe.model.durations import Granularity, Unit
from tiltframe.model.retention import DEFAULT_INTERVAL_MS, Period, Retention

STREAM = "define stream TradeStream (symbol string, price double, quantity long, timestamp long);\n"
AGG = (
    "define aggregation TradeAggregation from TradeStream\n"
    "select symbol, sum(quantity) as total\n"
    "group by symbol aggregate by timestamp every sec ... year;\n"
)
SEC, MIN, HOUR, DAY, MONTH, YEAR = (Granularity(u) for u in Unit if u is not Unit.WEEKS)


def policy(annotations: str, agg: str = AGG) -> Retention:
    return Retention.of(parse_app(STREAM + annotations + "\n" + agg).aggregations[0])


def ms(text: str, zone: str = "UTC") -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=ZoneInfo(zone)).timestamp() * 1000)


def test_the_seed_defaults_without_annotations() -> None:
    """Seed 001: without @purge, purging runs every 15 minutes with the default retention periods."""
    r = policy("")
    assert r.enabled and r.interval_ms == DEFAULT_INTERVAL_MS == 900_000
    assert [r.period(g) for g in (SEC, MIN, HOUR, DAY, MONTH, YEAR)] == [
        Period(120, Unit.SECONDS), Period(24, Unit.HOURS), Period(30, Unit.DAYS), Period(1, Unit.YEARS), None, None]


@pytest.mark.parametrize(
    "annotations",
    [
        "@purge(enable='true', interval='10 sec', @retentionPeriod(sec='150 sec', min='all', months='2 years'))",
        "@purge(enable='true', interval='10 sec')\n@retentionPeriod(sec='150 sec', min='all', months='2 years')",
    ],
    ids=["nested", "on its own"],
)
def test_retention_nested_or_on_its_own(annotations: str) -> None:
    """Given periods replace the defaults of their durations only; `all` keeps a duration forever."""
    r = policy(annotations)
    assert r.interval_ms == 10_000
    assert r.period(SEC) == Period(150, Unit.SECONDS)
    assert r.period(MIN) is None
    assert r.period(HOUR) == Period(30, Unit.DAYS)
    assert r.period(MONTH) == Period(2, Unit.YEARS)


def test_purge_off() -> None:
    r = policy("@purge(enable='false', @retentionPeriod(sec='1 hour'))")
    assert not r.enabled and r.period(SEC) == Period(1, Unit.HOURS)


@pytest.mark.parametrize(
    ("annotations", "message", "line"),
    [
        ("@retentionPeriod(sec='119 sec')", "sec='119 sec' is below the minimum retention of seconds, 120 seconds", 2),
        ("@retentionPeriod(min='2 hours', hour='1 day')", "minimum retention of hours, 25 hours", 2),
        ("@retentionPeriod(day='1 month')", "minimum retention of days, 32 days", 2),
        ("@retentionPeriod(month='1 year')", "minimum retention of months, 13 months", 2),
        ("@timezone('UTC')\n@purge(interval='1 min', @retentionPeriod(sec='1 min'))", "120 seconds", 3),
        ("@retentionPeriod(sec='120')", "takes a period such as '120 sec'", 2),
        ("@retentionPeriod(sec='0 sec')", "takes a period such as '120 sec'", 2),
        ("@retentionPeriod('120 sec')", "@retentionPeriod takes named elements only (sec=..., min=...", 2),
        ("@retentionPeriod(weeks='1 year')", "aggregation TradeAggregation is not aggregated per weeks", 2),
        ("@retentionPeriod(fortnights='1 year')", "unknown element 'fortnights' of @retentionPeriod (it takes", 2),
        ("@retentionPeriod(sec='120 sec', seconds='1 hour')", "the retention of seconds is given twice", 2),
        ("@purge(interval='soon')", "@purge interval takes a length", 2),
        ("@purge(interval='1 month')", "@purge interval must be a fixed length", 2),
        ("@purge(interval='0 sec')", "@purge interval must be positive", 2),
    ],
)
def test_retention_errors(annotations: str, message: str, line: int) -> None:
    """Seed 001's minimums and malformed values, reported at the annotation."""
    with pytest.raises(DefinitionError, match=re.escape(message)) as excinfo:
        parse_app(STREAM + annotations + "\n" + AGG)
    assert excinfo.value.line == line


@pytest.mark.parametrize(
    ("retention", "message"),
    [
        ((("", "120 sec"),), "takes <duration>='<period>' pairs"),
        ((("fortnights", "1 year"),), "@retentionPeriod fortnights: unknown duration 'fortnights'"),
    ],
)
def test_retention_errors_of_a_python_built_spec(retention: tuple[tuple[str, str], ...], message: str) -> None:
    """The text's elements are checked by the annotation vocabulary first; a spec built in Python is checked
    here."""
    agg = dataclasses.replace(parse_app(STREAM + AGG).aggregations[0], retention=retention)
    with pytest.raises(DefinitionError, match=re.escape(message)):
        Retention.of(agg)


def test_retention_of_a_duration_not_kept() -> None:
    agg = AGG.replace("every sec ... year", "every day ... year")
    with pytest.raises(DefinitionError, match=r"not aggregated per seconds \(it keeps: days, months, years\)"):
        parse_app(STREAM + "@retentionPeriod(sec='120 sec')\n" + agg)


def test_years_have_no_minimum() -> None:
    assert policy("@retentionPeriod(year='1 year')").period(YEAR) == Period(1, Unit.YEARS)


@pytest.mark.parametrize(
    ("period", "latest", "zone", "before"),
    [
        (Period(120, Unit.SECONDS), "2024-03-01 00:01:00", "UTC", "2024-02-29 23:59:00"),
        (Period(24, Unit.HOURS), "2024-03-10 12:00:00", "America/New_York", "2024-03-09 11:00:00"),
        # Days, months and years keep the local wall-clock time across a daylight-saving change ...
        (Period(1, Unit.DAYS), "2024-03-10 12:00:00", "America/New_York", "2024-03-09 12:00:00"),
        # ... and a month before the 31st is the last day of the shorter month.
        (Period(1, Unit.MONTHS), "2024-03-31 08:00:00", "UTC", "2024-02-29 08:00:00"),
        (Period(13, Unit.MONTHS), "2024-01-15 00:00:00", "Asia/Kolkata", "2022-12-15 00:00:00"),
        (Period(1, Unit.YEARS), "2024-02-29 10:00:00", "UTC", "2023-02-28 10:00:00"),
    ],
)
def test_period_before(period: Period, latest: str, zone: str, before: str) -> None:
    assert period.before(ms(latest, zone), zone) == ms(before, zone)


def test_purge_before_skips_durations_kept_forever() -> None:
    app = parse_app(STREAM + "@retentionPeriod(hour='all')\n" + AGG)
    agg = app.aggregations[0]
    latest = int(datetime(2024, 6, 1, tzinfo=UTC).timestamp() * 1000)
    cut = Retention.of(agg).purge_before(agg, latest, "UTC")
    assert set(cut) == {SEC, MIN, DAY}
    assert cut[SEC] == latest - 120_000
    assert cut[DAY] == ms("2023-06-01 00:00:00")


@pytest.mark.parametrize(("text", "period"), [
    ("2 h", Period(2, Unit.HOURS)), ("2h", Period(2, Unit.HOURS)), ("3 hrs", Period(3, Unit.HOURS)),
    ("120sec", Period(120, Unit.SECONDS)), ("2 seconds", Period(2, Unit.SECONDS)), ("5 mins", Period(5, Unit.MINUTES)),
    ("1 minute", Period(1, Unit.MINUTES)), ("40 days", Period(40, Unit.DAYS)), ("6 weeks", Period(6, Unit.WEEKS)),
    ("1 week", Period(1, Unit.WEEKS)), ("13 month", Period(13, Unit.MONTHS)), ("2 year", Period(2, Unit.YEARS)),
])
def test_every_unit_siddhi_writes_with_or_without_a_space(text: str, period: Period) -> None:
    assert Period.parse(text, "x") == period


def test_siddhis_time_units_in_annotations() -> None:
    """``@retentionPeriod(min='2 h')`` as Siddhi users write it; lengths in milliseconds for @purge."""
    r = policy("@purge(interval='90000 millisec', @retentionPeriod(sec='3 min', min='2 h', days='6 weeks'))")
    assert r.interval_ms == 90_000
    assert (r.period(SEC), r.period(MIN), r.period(DAY)) == (
        Period(3, Unit.MINUTES), Period(2, Unit.HOURS), Period(6, Unit.WEEKS))
    assert policy("@purge(interval='1500 ms')").interval_ms == 1500
    assert policy("@purge(interval='2millisecond')").interval_ms == 2


def test_weeks_keep_every_bucket_unless_told_and_count_local_weeks() -> None:
    agg = AGG.replace("every sec ... year", "every day, week, month")
    assert policy("", agg).period(Granularity(Unit.WEEKS)) is None
    kept = policy("@retentionPeriod(week='4 weeks')", agg)
    assert kept.period(Granularity(Unit.WEEKS)) == Period(4, Unit.WEEKS)
    # Four local weeks before a summer instant in Berlin reach back across the spring change: same wall clock.
    latest = ms("2024-04-20T12:00:00", "Europe/Berlin")
    assert Period(4, Unit.WEEKS).before(latest, "Europe/Berlin") == ms("2024-03-23T12:00:00", "Europe/Berlin")
