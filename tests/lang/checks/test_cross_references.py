"""validate_app, validate_query and check_runnable, reached through app text as users write it."""

from __future__ import annotations

import dataclasses
import re

import pytest

from tiltframe.errors import DefinitionError, NotSupportedYet
from tiltframe.lang import parse_app, parse_query
from tiltframe.lang.checks.cross_references import check_runnable, validate_app
from tiltframe.lang.checks.retrieval import validate_query
from tiltframe.model.aggregations import KeyItem

STREAM = "define stream TradeStream (symbol string, price double, quantity long, timestamp long);\n"
AGG = (
    "define aggregation TradeAggregation from TradeStream\n"
    "select symbol, avg(price) as avgPrice, sum(quantity) as total\n"
    "group by symbol aggregate by timestamp every sec ... day;\n"
)


def error_of(text: str) -> DefinitionError:
    with pytest.raises(DefinitionError) as excinfo:
        parse_app(text)
    return excinfo.value


# --- definitions ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        STREAM + "define stream TradeStream (a int);",
        STREAM + AGG.replace("aggregation TradeAggregation", "aggregation TradeStream"),
    ],
    ids=["two streams", "stream and aggregation"],
)
def test_duplicate_names(text: str) -> None:
    assert error_of(text).message == "'TradeStream' is defined 2 times; stream and aggregation names must be unique"


def test_unknown_stream_in_from() -> None:
    error = error_of(STREAM + AGG.replace("from TradeStream", "from TradeStrem"))
    assert error.message.startswith(
        "aggregation TradeAggregation reads from unknown stream 'TradeStrem' — did you mean 'TradeStream'?"
    )
    assert error.line == 2  # the position of the definition, with a caret snippet
    assert error.snippet


def test_group_by_unknown_attribute() -> None:
    error = error_of(STREAM + AGG.replace("group by symbol", "group by sym"))
    assert "unknown attribute of stream TradeStream 'sym' — did you mean 'symbol'?" in error.message


def test_key_not_in_group_by() -> None:
    """Text makes a key only of a group-by attribute; a hand-made spec can get it wrong, and is refused."""
    app = parse_app(STREAM + AGG)
    agg = app.aggregations[0]
    wrong = dataclasses.replace(agg, select=(KeyItem("price"), *agg.select[1:]))
    with pytest.raises(DefinitionError, match="'price' is selected as a key but is not in group by"):
        validate_app(dataclasses.replace(app, aggregations=(wrong,)))


def test_attribute_not_grouped_is_a_latest_value() -> None:
    agg = parse_app(STREAM + AGG.replace("group by symbol ", "")).aggregations[0]
    assert agg.group_by == ()
    assert agg.expressions[0].alias == "symbol"


def test_non_numeric_sum() -> None:
    error = error_of(STREAM + AGG.replace("sum(quantity)", "sum(symbol)"))
    assert error.message == "sum() needs a numeric argument in 'total', got string"


def test_selected_twice() -> None:
    error = error_of(STREAM + AGG.replace("sum(quantity) as total", "sum(quantity) as avgPrice"))
    assert error.message == "'avgPrice' is selected 2 times in aggregation TradeAggregation"


def test_reserved_prefix() -> None:
    assert "reserved" in error_of(STREAM + AGG.replace("as total", "as AGG_total")).message


def test_no_aggregate() -> None:
    error = error_of(STREAM + AGG.replace(", avg(price) as avgPrice, sum(quantity) as total", ""))
    assert error.message.startswith("aggregation TradeAggregation has no aggregate function")


def test_event_time_must_be_long_or_string() -> None:
    assert "must be long (epoch ms) or string" in error_of(STREAM + AGG.replace("by timestamp", "by price")).message


def test_unknown_time_zone() -> None:
    assert "unknown time zone 'Mars/Base'" in error_of(STREAM + "@timezone('Mars/Base')\n" + AGG).message


# --- retrieval queries ------------------------------------------------------------------------------------


def test_per_a_duration_not_kept() -> None:
    error = error_of(STREAM + AGG + "from TradeAggregation within '2024-**-** **:**:**' per 'months' select *")
    assert error.message == (
        "aggregation TradeAggregation is not aggregated per months (it keeps: seconds, minutes, hours, days)"
    )
    assert error.line == 5  # the line of the query


@pytest.mark.parametrize(
    "within",
    ["'2024-02-01 00:00:00', '2024-01-01 00:00:00'", "1000L, 1000L"],
    ids=["start after end", "empty range"],
)
def test_within_start_not_before_end(within: str) -> None:
    error = error_of(STREAM + AGG + f"from TradeAggregation within {within} per 'days' select *")
    assert "the start must be before the end" in error.message


def test_query_against_unknown_aggregation_and_column() -> None:
    assert (
        "unknown aggregation 'TradeAgg'"
        in error_of(STREAM + AGG + "from TradeAgg within 0L, 1000L per 'days' select *").message
    )
    assert (
        "unknown attribute of TradeAggregation 'totl' — did you mean 'total'?"
        in error_of(STREAM + AGG + "from TradeAggregation within 0L, 1000L per 'days' select totl").message
    )


def test_on_uses_group_by_keys_only() -> None:
    text = STREAM + AGG + "define stream Req (symbol string);\n"
    error = error_of(
        text + "from Req as b join TradeAggregation as a on a.total == 3 within 0L, 1000L per 'days' select *"
    )
    assert "unknown group-by attribute of TradeAggregation 'total'" in error.message


def test_within_per_attributes_come_from_the_request_stream() -> None:
    text = STREAM + AGG
    error = error_of(text + "from TradeAggregation within symbol, 1000L per 'days' select *")
    assert error.message.startswith("'symbol' in within/per: a retrieval without a request stream takes constants")
    assert (error.line, error.column) == (5, 30)
    error = error_of(text + "define stream Req (startTime long);\n"
                            "from Req join TradeAggregation within symbol, 1000L per 'days' select total")
    assert error.message.startswith("'symbol' in within/per is an attribute of aggregation TradeAggregation")
    assert (error.line, error.column) == (6, 39)


def test_validate_query_directly() -> None:
    app = parse_app(STREAM + AGG)
    validate_query(app, parse_query("from TradeAggregation within 0L, 1000L per 'hours' select symbol, total"))
    # As in Siddhi, an attribute of the aggregation orders the rows even when it is not selected.
    validate_query(app, parse_query("from TradeAggregation within 0L, 1000L per 'hours' select symbol order by total"))
    with pytest.raises(DefinitionError, match="order by a selected column or an attribute"):
        validate_query(app, parse_query("from TradeAggregation within 0L, 1000L per 'hours' select symbol order by 1"))


# --- what a run refuses -------------------------------------------------------------------------------------


def test_unknown_store_not_supported_yet() -> None:
    store = '@store(type="rdbms", jdbc.url="jdbc:db2://localhost:50000/TestDB", username="root", password="root")\n'
    app = parse_app(STREAM + store + AGG)
    with pytest.raises(NotSupportedYet, match=r"unknown database 'db2'"):
        check_runnable(app)


@pytest.mark.parametrize(
    "annotation",
    [
        "",
        "@purge(enable='false')",
        "@purge(enable='true', interval='10 sec', @retentionPeriod(sec='120 sec'))",
        "@retentionPeriod(sec='120 sec', min='24 hours')",
        "@IgnoreEventsOlderThanBuffer('false')",
        "@BufferSize('3')\n@IgnoreEventsOlderThanBuffer('true')",
        "@allowedLateness('10 min')",
        "@PartitionById(enable='false')",
        "@PartitionById",
        "@store(type='rdbms', jdbc.url='jdbc:sqlite:rollups.db')",
        "@store(type='rdbms', jdbc.url='jdbc:mysql://localhost:3306/TestDB', username='root', password='root')",
        "@timezone('Asia/Kolkata')",
    ],
    ids=["plain", "purge disabled", "purge", "retention", "ignore false", "buffer", "lateness", "partition false",
         "partition", "sqlite store", "mysql store", "time zone"],
)
def test_runnable(annotation: str) -> None:
    check_runnable(parse_app(STREAM + annotation + "\n" + AGG))


# --- late events ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("annotations", "every", "message", "line"),
    [
        ("@BufferSize('0')", "by timestamp every sec ... day", "@BufferSize must be a positive integer, got 0", 2),
        ("@BufferSize('3')", "every sec ... day", "needs an event-time attribute", 2),
        ("@BufferSize('3')", "by timestamp every month, year", "seconds, minutes, hours or days; it is months", 2),
        ("@timezone('UTC')\n@BufferSize('3')", "by timestamp every year", "it is years", 3),
        ("@allowedLateness('1 min')", "every sec ... day", "events aggregated by arrival time are never late", 2),
        ("@allowedLateness('1 min')\n@BufferSize('2')", "by timestamp every sec", "choose one policy", 2),
        ("@BufferSize('2')\n@allowedLateness('1 min')", "by timestamp every sec", "choose one policy", 3),
    ],
)
def test_lateness_rules(annotations: str, every: str, message: str, line: int) -> None:
    """Seed 000's rules for the buffer, reported at the annotation that breaks them."""
    agg = AGG.replace("aggregate by timestamp every sec ... day", f"aggregate {every}")
    with pytest.raises(DefinitionError, match=re.escape(message)) as excinfo:
        parse_app(STREAM + annotations + "\n" + agg)
    assert excinfo.value.line == line


@pytest.mark.parametrize("value", ["'1 month'", "'soon'", "'10 parsecs'", ""])
def test_allowed_lateness_takes_a_fixed_length(value: str) -> None:
    with pytest.raises(DefinitionError, match="@allowedLateness") as excinfo:
        parse_app(STREAM + f"@allowedLateness({value})\n" + AGG)
    assert excinfo.value.line == 2
