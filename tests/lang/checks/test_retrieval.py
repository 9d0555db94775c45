"""Which side each attribute of a retrieval names, and the rules of its query section, reached through app
text as users write it: every refusal at the line and column of what it is about."""

from __future__ import annotations

import pytest

from tiltframe.errors import DefinitionError
from tiltframe.lang import parse_app, parse_query, parse_retrieval
from tiltframe.lang.checks.retrieval import validate_query
from tiltframe.model.expressions import Attr, Binary, Call, Literal
from tiltframe.model.queries import OrderItem

DEFINITIONS = (
    "define stream StockStream (symbol string, price double, volume long, ts long);\n"
    "define aggregation StockAggregation from StockStream\n"
    "select symbol, avg(price) as avgPrice, sum(volume) as total, count() as count\n"
    "group by symbol aggregate by ts every sec ... day;\n"
    "define stream Req (symbol string, startTime long, endTime long, perValue string, limitTo double);\n"
)
APP = parse_app(DEFINITIONS)


def error_of(query: str) -> DefinitionError:
    with pytest.raises(DefinitionError) as caught:
        parse_app(DEFINITIONS + query)
    return caught.value


def test_unqualified_names_go_to_the_side_that_has_them() -> None:
    (q,) = parse_app(
        DEFINITIONS + "from Req as r join StockAggregation as a on a.symbol == r.symbol\n"
        "within startTime, endTime per perValue\n"
        "select AGG_TIMESTAMP, avgPrice, limitTo, count order by AGG_TIMESTAMP insert into Out;"
    ).queries
    assert q.within == (Attr("startTime", "r"), Attr("endTime", "r"))
    assert q.per == Attr("perValue", "r")
    assert [i.expr for i in q.select or ()] == [
        Attr("AGG_TIMESTAMP", "a"), Attr("avgPrice", "a"), Attr("limitTo", "r"), Attr("count", "a"),
    ]
    assert q.order_by == (OrderItem(Attr("AGG_TIMESTAMP")),)  # a selected column: Siddhi looks there first
    assert validate_query(APP, q) == q  # resolving a resolved query changes nothing


def test_names_of_the_stream_and_the_aggregation_qualify_too() -> None:
    q = parse_retrieval(
        "from Req join StockAggregation on Req.symbol == StockAggregation.symbol within 0L, 1L per 'days' "
        "select StockAggregation.symbol, sum(StockAggregation.total) as t group by StockAggregation.symbol", APP
    )
    assert q.on == Binary("==", Attr("symbol", "Req"), Attr("symbol", "StockAggregation"))
    assert q.group_by == (Attr("symbol", "StockAggregation"),)
    assert q.select is not None and q.select[1].expr == Call("sum", (Attr("total", "StockAggregation"),))


@pytest.mark.parametrize(
    ("query", "column", "message"),
    [
        (
            "from Req join StockAggregation on symbol == 'IBM' within 0L, 1L per 'days' select total;",
            35, "'symbol' is ambiguous: both request stream Req and aggregation StockAggregation have it; "
                "write Req.symbol or StockAggregation.symbol",
        ),
        (
            "from Req as r join StockAggregation as a within 0L, 1L per 'days' select symbol, total;",
            74, "write r.symbol or a.symbol",
        ),
        (
            "from Req join StockAggregation within 0L, 1L per 'days' select totl;",
            64, "unknown attribute of StockAggregation or Req 'totl' — did you mean 'total'?",
        ),
        (
            "from Req as r join StockAggregation as a within 0L, 1L per 'days' select b.total;",
            74, "unknown alias 'b' in 'b.total' (the query's inputs are: r, Req, a, StockAggregation)",
        ),
        (
            "from Req join StockAggregation within AGG_TIMESTAMP, 1L per 'days' select total;",
            39, "'AGG_TIMESTAMP' in within/per is an attribute of aggregation StockAggregation",
        ),
        (
            "from Req as x join StockAggregation as x within 0L, 1L per 'days' select total;",
            1, "both sides of the join are called 'x'",
        ),
        (
            "from Req join StockAggregation within 0L, 1L per 'days' select avgPrice, total as avgPrice;",
            74, "'avgPrice' is selected twice",
        ),
    ],
)
def test_sides_refused_where_they_are_written(query: str, column: int, message: str) -> None:
    error = error_of(query)
    assert message in error.message
    assert (error.line, error.column) == (6, column)


@pytest.mark.parametrize(
    ("section", "column", "message"),
    [
        ("select symbol, total group by AGG_TIMESTAMP", 55, "'StockAggregation.symbol' is neither in group by nor "
                                                            "inside an aggregate; add it to group by or aggregate it"),
        ("select symbol, sum(total) as t group by symbol having avgPrice > 1", 102, "'StockAggregation.avgPrice' is "
                                                                                   "neither in group by"),
        ("select sum(max(total)) as t", 59, "aggregate max(total) cannot be used inside another aggregate"),
        ("select sum(symbol) as t", 59, "sum() needs a number, but 'StockAggregation.symbol' is string"),
        ("select sum() as t", 55, "sum() takes one argument, got 0"),
        ("select last(total) as t", 55, "function last() is not available in a retrieval select (its aggregates are"),
        ("select symbol, sum(total) as t group by symbol order by sum(total)", 104, "select the aggregate with a name"),
        ("select symbol group by symbol + 'x'", 71, "group by takes attributes of the aggregation or the request"),
        ("select symbol, sum(t) as t group by symbol", 67, "unknown attribute of StockAggregation 't'"),
        ("select symbol order by 2", 71, "order by 2: order by a selected column or an attribute"),
    ],
)
def test_query_section_rules(section: str, column: int, message: str) -> None:
    error = error_of(f"from StockAggregation within 0L, 1L per 'days' {section};")
    assert message in error.message
    assert (error.line, error.column) == (6, column)


def test_having_and_order_by_read_selected_columns_first() -> None:
    q = parse_retrieval(
        "from StockAggregation within 0L, 1L per 'days' select symbol, sum(total) as total group by symbol "
        "having total > 5 and sum(count) > 1 order by total desc, avgPrice", APP
    )
    assert q.having == Binary(
        "and",
        Binary(">", Attr("total"), Literal(5, "int")),
        Binary(">", Call("sum", (Attr("count", "StockAggregation"),)), Literal(1, "int")),
    )
    # avgPrice is not selected: in a grouped query it orders by its value in each group's last row
    assert q.order_by == (OrderItem(Attr("total"), ascending=False), OrderItem(Attr("avgPrice", "StockAggregation")))


def test_request_attributes_are_one_value_per_request() -> None:
    q = parse_retrieval(
        "from Req as r join StockAggregation as a within 0L, 1L per 'days' "
        "select r.symbol, limitTo, sum(total) as t group by a.symbol", APP
    )
    assert q.group_by == (Attr("symbol", "a"),)


def test_python_query_objects_are_resolved_by_validation() -> None:
    text = "from Req join StockAggregation within startTime, endTime per perValue select AGG_TIMESTAMP, total"
    written = parse_query(text, aggregations=["StockAggregation"])
    assert written.per == Attr("perValue")
    resolved = validate_query(APP, written)
    assert resolved.per == Attr("perValue", "Req")
    assert resolved == parse_retrieval(text, APP)
