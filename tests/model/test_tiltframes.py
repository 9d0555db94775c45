"""Tilt frames: chains of durations with multiples (``every 10 sec, 1 min, 10 min, 1 hour, day, month``).

Valid chains load with one table per level and answer ``per "10 min"``; a chain where a level does not
divide the next is refused with the same message from the text and from the Python builder.
"""

from __future__ import annotations

import dataclasses

import pytest

import tiltframe
from tiltframe.aggregates.layout import AggregationLayout
from tiltframe.errors import DefinitionError
from tiltframe.lang import builder as b
from tiltframe.lang.checks.cross_references import validate_app
from tiltframe.model.app import AppSpec
from tiltframe.model.durations import Granularity, Unit

STREAM = "define stream TradeStream (symbol string, price double, quantity long, timestamp long);\n"


def text(every: str, zone: str | None = None) -> str:
    annotation = f"@timezone('{zone}')\n" if zone else ""
    return STREAM + annotation + (
        "define aggregation TradeAggregation from TradeStream\n"
        "select symbol, sum(quantity) as total group by symbol\n"
        f"aggregate by timestamp every {every};\n"
    )


def built(every: str | list[str]) -> AppSpec:
    stream = b.stream("TradeStream", symbol="string", price="double", quantity="long", timestamp="long")
    agg = b.aggregation("TradeAggregation", source="TradeStream", select=["symbol", b.sum("quantity").as_("total")],
                        group_by="symbol", by="timestamp", every=every)
    return b.app(stream, agg)


def tables(every: str) -> list[str]:
    app = tiltframe.load_app(text(every))
    layout = AggregationLayout.of(app, "TradeAggregation")
    return [layout.table_name(g) for g in app.aggregations[0].granularities]


# --- valid chains ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("every", "suffixes"),
    [
        ("10 sec, 1 min, 10 min, 1 hour, day, month", "10_SECONDS MINUTES 10_MINUTES HOURS DAYS MONTHS"),
        ("15 sec, 5 min, 6 hours, day, 3 months, year", "15_SECONDS 5_MINUTES 6_HOURS DAYS 3_MONTHS YEARS"),
        ("30 min, 2 hour, 12 hour, day", "30_MINUTES 2_HOURS 12_HOURS DAYS"),
        ("7 sec, 7 min, 7 hour", "7_SECONDS 7_MINUTES 7_HOURS"),  # no calendar level: need not divide a day
        ("day, 7 day, 28 day", "DAYS 7_DAYS 28_DAYS"),
        ("day, 2 month, 6 month, year, 10 years", "DAYS 2_MONTHS 6_MONTHS YEARS 10_YEARS"),
        ("sec ... year", "SECONDS MINUTES HOURS DAYS MONTHS YEARS"),
    ],
)
def test_valid_chains_and_their_tables(every: str, suffixes: str) -> None:
    assert tables(every) == [f"TradeAggregation_{s}" for s in suffixes.split()]
    assert built(every) == tiltframe.load_app(text(every))


@pytest.mark.parametrize("zone", ["America/New_York", "Asia/Kolkata", "Australia/Lord_Howe", "+05:45"])
def test_the_rules_do_not_depend_on_the_zone(zone: str) -> None:
    """Fixed levels are cut at offset changes (docs/time.md), so a valid chain nests in every zone."""
    app = tiltframe.load_app(text("20 min, 2 hour, 6 hour, day, 3 month, year", zone))
    assert app.aggregations[0].timezone == zone


@pytest.mark.parametrize("per", ["10 min", "10 minutes", "10 MIN", "10_MINUTES", "10 sec", "hours", "1 hour"])
def test_per_a_multiple(per: str) -> None:
    every = "10 sec, 1 min, 10 min, 1 hour, day, month"
    app = tiltframe.load_app(text(every) + f"from TradeAggregation within 0L, 1000L per '{per}' select *;")
    assert app.queries[0].per.value == per  # type: ignore[union-attr]
    agg = app.aggregations[0]
    assert agg.granularity(Granularity.parse(per)) in agg.granularities


def test_per_a_multiple_not_kept() -> None:
    every = "10 sec, 1 min, 10 min, 1 hour, day, month"
    with pytest.raises(DefinitionError) as excinfo:
        tiltframe.load_app(text(every) + "from TradeAggregation within 0L, 1000L per '5 min' select *;")
    assert excinfo.value.message == (
        "aggregation TradeAggregation is not aggregated per 5 minutes "
        "(it keeps: 10 seconds, minutes, 10 minutes, hours, days, months)"
    )
    assert excinfo.value.line == 5  # the query


# --- chains where a level does not divide the next ----------------------------------------------------------

PREFIX = "durations of aggregation TradeAggregation: "
INVALID = [
    ("7 sec, 1 min", "'7 sec' does not divide 'min', so '7 sec' buckets would straddle 'min' buckets; each duration "
                     "must divide the next one (for example '6 sec' or '10 sec')"),
    ("10 sec, 45 min, hour", "'45 min' does not divide 'hour', so '45 min' buckets would straddle 'hour' buckets; "
                             "each duration must divide the next one (for example '30 min')"),
    ("7 hour, day", "'7 hour' does not divide a day (24 hours), so '7 hour' buckets would straddle midnight and could "
                    "not roll up into 'day'; a duration listed before days, months or years must divide 24 hours "
                    "(for example '6 hour' or '8 hour')"),
    ("50 min, month", "'50 min' does not divide a day (24 hours), so '50 min' buckets would straddle midnight and "
                      "could not roll up into 'month'; a duration listed before days, months or years must divide "
                      "24 hours (for example '48 min' or '60 min')"),
    ("48 hour", "'48 hour' is longer than a day; a sec, min or hour duration can be at most 24 hours, and longer "
                "levels are days, which follow the calendar of the aggregation's time zone: write '2 day'"),
    ("hour, 36 hours", "'36 hour' is longer than a day; a sec, min or hour duration can be at most 24 hours, and "
                       "longer levels are days, which follow the calendar of the aggregation's time zone: use whole "
                       "days, such as 'day' or '2 day'"),
    ("2 day, 3 day", "'2 day' does not divide '3 day', so '2 day' buckets would straddle '3 day' buckets; each "
                     "duration must divide the next one (for example 'day')"),
    ("hour, 2 day, month", "'2 day' cannot be listed before 'month': '2 day' buckets count whole days from "
                           "1970-01-01 and do not line up with months, so only 'day' can roll up into months and "
                           "years (drop '2 day' or give it an aggregation of its own)"),
    ("7 day, year", "'7 day' cannot be listed before 'year': '7 day' buckets count whole days from 1970-01-01 and do "
                    "not line up with years, so only 'day' can roll up into months and years (drop '7 day' or give "
                    "it an aggregation of its own)"),
    ("2 month, 3 month", "'2 month' does not divide '3 month', so '2 month' buckets would straddle '3 month' "
                         "buckets; each duration must divide the next one (for example 'month')"),
    ("day, 5 month, year", "'5 month' does not divide a year (12 months), so '5 month' buckets would straddle 'year' "
                           "buckets; a month duration listed before years must divide 12 (for example '4 month' or "
                           "'6 month')"),
    ("2 year, 5 year", "'2 year' does not divide '5 year', so '2 year' buckets would straddle '5 year' buckets; each "
                       "duration must divide the next one (for example 'year')"),
    # The parser lists durations by unit, then multiple: a large multiple of a finer unit comes first.
    ("hour, 120 min", "'120 min' is longer than 'hour' but comes before it, as durations are ordered by unit: write "
                      "it as '2 hour'"),
    ("90 min, hour", "'90 min' is longer than 'hour' and neither divides the other; each duration must divide the "
                     "next one"),
    ("24 month, year", "'24 month' is longer than 'year' but comes before it, as durations are ordered by unit: "
                       "write it as '2 year'"),
    ("60 min, hour", "'60 min' and 'hour' are the same length; list one of them"),
    ("12 months, year", "'12 month' and 'year' are the same length; list one of them"),
]


@pytest.mark.parametrize(("every", "message"), INVALID, ids=[every for every, _ in INVALID])
def test_invalid_chain_in_text(every: str, message: str) -> None:
    with pytest.raises(DefinitionError) as excinfo:
        tiltframe.load_app(text(every))
    assert excinfo.value.message == PREFIX + message
    assert excinfo.value.line == 2  # the definition, shown with a caret snippet


@pytest.mark.parametrize(("every", "message"), INVALID, ids=[every for every, _ in INVALID])
def test_invalid_chain_from_the_builder(every: str, message: str) -> None:
    with pytest.raises(DefinitionError) as excinfo:
        built(every)
    assert excinfo.value.message == PREFIX + message
    with pytest.raises(DefinitionError) as listed:
        built([w.strip() for w in every.split(",")])
    assert listed.value.message == PREFIX + message


def test_a_hand_made_spec_is_checked_too() -> None:
    """validate_app is the one gate: a spec made without the parser or the builder gets the same rules."""
    app = tiltframe.load_app(text("10 sec, 1 min"))
    wrong = dataclasses.replace(app.aggregations[0], granularities=(Granularity(Unit.SECONDS, 7),
                                                                   Granularity(Unit.MINUTES)))
    with pytest.raises(DefinitionError, match="'7 sec' does not divide 'min'"):
        validate_app(dataclasses.replace(app, aggregations=(wrong,)))
