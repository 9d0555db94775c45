"""Retrieval queries as Siddhi users write them: the query section's clauses, no select clause, and the
queries Siddhi runs that tiltframe refuses (stream queries, filters and windows), each refused at the
construct with what it is, never with a parser's "expected 'select'"."""

from __future__ import annotations

import pytest

from tiltframe.errors import DefinitionError, NotSupportedYet
from tiltframe.lang import parse_app, parse_query
from tiltframe.model.expressions import Attr, Binary, Call, Literal
from tiltframe.model.queries import OrderItem, OutputItem

DEFINITIONS = (
    "define stream StockStream (symbol string, price double, volume long, ts long);\n"
    "define aggregation StockAggregation from StockStream select symbol, sum(volume) as total, count() as count\n"
    "group by symbol aggregate by ts every sec ... day;\n"
    "define stream Req (symbol string, startTime long, endTime long, perValue string);\n"
)


def test_query_section_clauses() -> None:
    query = parse_query(
        "from StockAggregation within 0L, 10L per 'hours' "
        "select symbol, sum(total) as t, count() as n group by symbol having t > 100 and n >= 2 "
        "order by t desc, symbol limit 10 offset 20"
    )
    assert query.select == (
        OutputItem(Attr("symbol")), OutputItem(Call("sum", (Attr("total"),)), "t"), OutputItem(Call("count"), "n"),
    )
    assert query.group_by == (Attr("symbol"),)
    assert query.having == Binary(
        "and", Binary(">", Attr("t"), Literal(100, "int")), Binary(">=", Attr("n"), Literal(2, "int"))
    )
    assert query.order_by == (OrderItem(Attr("t"), ascending=False), OrderItem(Attr("symbol")))
    assert (query.limit, query.offset) == (10, 20)


@pytest.mark.parametrize("section", ["", "select *", ";", "select * ;"])
def test_without_select_means_every_attribute(section: str) -> None:
    query = parse_query(f'from StockAggregation within "2017-06-** **:**:**" per "seconds" {section}')
    assert query.select is None


def test_join_without_aliases_keeps_names_as_written() -> None:
    (query,) = parse_app(
        DEFINITIONS + "from Req join StockAggregation on Req.symbol == StockAggregation.symbol "
        "within startTime, endTime per perValue select StockAggregation.symbol, total insert into Out;"
    ).queries
    assert (query.request_stream, query.request_alias, query.aggregation, query.aggregation_alias) == (
        "Req", None, "StockAggregation", None,
    )
    # validation said which side each name is on: the request's or the aggregation's
    assert query.within == (Attr("startTime", "Req"), Attr("endTime", "Req"))
    assert query.per == Attr("perValue", "Req")
    on_aggregation = (Attr("symbol", "StockAggregation"), Attr("total", "StockAggregation"))
    assert query.select == tuple(OutputItem(a) for a in on_aggregation)


@pytest.mark.parametrize(
    ("query", "line", "column", "message"),
    [
        (
            "from StockStream[price > 10] select symbol;",
            5, 1, "a stream query over StockStream needs 'insert into <stream>'",
        ),
        (
            "from StockStream as s select symbol insert into T;",
            5, 6, "an alias of stream StockStream in a stream query is not supported yet",
        ),
        (
            "from StockStream#window.length(5) select symbol, sum(volume) as v insert into T;",
            5, 17, "a window #window.length(...) on stream StockStream is not supported yet",
        ),
        (
            "from StockStream[price > 1] select symbol, volume group by symbol insert into T;",
            5, 51, "'group by' in a stream query over StockStream is not supported yet",
        ),
        (
            "from Req join StockStream on Req.symbol == StockStream.symbol select Req.symbol insert into T;",
            5, 1, "a join of streams (Req join StockStream) is not supported yet",
        ),
        (
            "from Req[symbol == 'IBM'] as r join StockAggregation within 0L, 1L per 'days' select total insert into T;",
            5, 9, "a filter [...] on request stream Req is not supported yet",
        ),
        (
            "from Req join StockAggregation#window.time(1 sec) within 0L, 1L per 'days' select total insert into T;",
            5, 31, "a window #window.time(...) on aggregation StockAggregation is not supported",
        ),
        (
            "from StockAggregation select symbol, total;",
            5, 1, "a retrieval from aggregation StockAggregation needs 'within <time range> [per <duration>]'",
        ),
        (
            "from Req join StockAggregation on Req.symbol == StockAggregation.symbol select total insert into T;",
            5, 1, "a join with aggregation StockAggregation needs 'within <time range> [per <duration>]'",
        ),
        (
            "from StockAggregation within 0L, 1L per 'days' having total > 1;",
            5, 48, "'having' needs a select clause",
        ),
        (
            "from StockAggregation within 0L, 1L per 'days' select * group by symbol;",
            5, 57, "'group by' needs a select list that names the columns it computes",
        ),
    ],
)
def test_what_is_not_a_retrieval_is_refused_where_it_is(query: str, line: int, column: int, message: str) -> None:
    with pytest.raises(DefinitionError) as caught:
        parse_app(DEFINITIONS + query)
    error = caught.value
    assert message in error.message
    assert (error.line, error.column) == (line, column)
    assert "expected 'select'" not in str(error)
    assert error.snippet


def test_a_stream_query_filters_and_selects_into_a_new_stream() -> None:
    app = parse_app(DEFINITIONS + "from StockStream[price > 10] select symbol, price * 2 as p insert into T;")
    (query,) = app.stream_queries
    assert (query.source, query.target, str(query.where)) == ("StockStream", "T", "(price > 10)")
    assert [(a.name, a.type.value) for a in app.stream("T").attributes] == [("symbol", "string"), ("p", "double")]


def test_a_stream_query_is_refused_alone() -> None:
    with pytest.raises(DefinitionError, match="runs as part of an app") as caught:
        parse_query("from StockStream[price > 10] select symbol insert into T;")
    assert not isinstance(caught.value, NotSupportedYet)


def test_filter_on_an_aggregation_points_at_on() -> None:
    with pytest.raises(DefinitionError, match=r"filter a retrieval with 'on <condition>'") as caught:
        parse_app(DEFINITIONS + "from StockAggregation[symbol == 'IBM'] within 0L, 1L per 'days' select total;")
    assert not isinstance(caught.value, NotSupportedYet)
    assert (caught.value.line, caught.value.column) == (5, 22)


@pytest.mark.parametrize(
    ("text", "column", "message"),
    [
        ("from StockAggregation within 0L, 1L per 'days' select symbol output last every 5 sec insert into T;",
         62, "output rate limiting ('output ... every ...') is not supported yet"),
        ("from StockAggregation within 0L, 1L per 'days' select symbol update T on T.symbol == symbol;",
         62, "'update' is not supported: a retrieval only reads"),
        ("from Req left outer join StockAggregation within 0L, 1L per 'days' select total insert into T;",
         10, "'left' joins are not supported yet"),
        ("from Req unidirectional join StockAggregation within 0L, 1L per 'days' select total insert into T;",
         10, "'unidirectional' joins are not supported yet"),
        ("partition with (symbol of StockStream) begin from StockStream select symbol insert into T; end;",
         1, "partitions ('partition with (...) begin ... end') are not supported yet"),
        ("define window W (a int) length(5);", 8, "'define window' is not supported yet"),
        ("define trigger T at every 5 sec;", 8, "'define trigger' is not supported yet"),
    ],
)
def test_other_siddhi_constructs_are_named(text: str, column: int, message: str) -> None:
    with pytest.raises(NotSupportedYet) as caught:
        parse_app(DEFINITIONS + text)
    assert message in caught.value.message
    assert (caught.value.line, caught.value.column) == (5, column)
