"""Validation of plain stream queries (``spec/stream_queries.py``): the target stream's attributes and types,
a defined target filled in order, and every mistake named where it is written."""

from __future__ import annotations

import pytest

from tiltframe.aggregates.layout import AggregationLayout
from tiltframe.errors import DefinitionError
from tiltframe.lang import parse_app

S = "@eventTime('ts') define stream S (symbol string, price double, volume int, ts long);\n"


def test_an_implicit_target_has_the_selected_attributes_and_keeps_the_event_time() -> None:
    app = parse_app(S + "from S[volume > 1] select symbol, volume * 2 as v, price / 2 as half, ts insert into T;")
    t = app.stream("T")
    assert [(a.name, a.type.value) for a in t.attributes] == [
        ("symbol", "string"), ("v", "int"), ("half", "double"), ("ts", "long")]
    assert t.event_time == "ts"
    everything = parse_app(S + "from S insert into T;").stream("T")
    assert [a.name for a in everything.attributes] == ["symbol", "price", "volume", "ts"]


def test_a_defined_target_takes_the_values_in_order() -> None:
    app = parse_app(S + "define stream T (name string, amount double);\nfrom S select symbol, price insert into T;")
    assert app.stream_queries[0].outputs[0][0] == "name"
    assert app.stream_queries[0].outputs[1][0] == "amount"


@pytest.mark.parametrize(
    ("text", "message", "line", "column"),
    [
        ("define stream T (name string, amount int);\nfrom S select symbol, price insert into T;",
         "'price' is double but attribute amount of stream T is int", 3, 23),
        ("from S select symbol insert into T;\nfrom S select symbol insert into T;",
         "stream T is written by 2 stream queries", 2, 34),
        ("from S[price] select symbol insert into T;", "the filter of stream S needs a condition", 2, 8),
        ("from S select symbol, nope insert into T;", "nope", 2, 23),
        ("from S select sum(price) as p insert into T;", "aggregate sum() in a stream query's select", 2, 15),
        ("from X select symbol insert into U;", "unknown stream 'X'", 2, 1),
        ("define stream T (symbol string);\nfrom T select symbol insert into U;\nfrom U select symbol insert into T;",
         "stream U reads its own events through stream queries", 3, 1),
    ],
)
def test_mistakes_are_named_where_they_are(text: str, message: str, line: int, column: int) -> None:
    with pytest.raises(DefinitionError) as caught:
        parse_app(S + text)
    assert message in caught.value.message
    assert (caught.value.line, caught.value.column) == (line, column)


def test_a_query_may_read_a_stream_a_later_query_writes() -> None:
    app = parse_app(S + "from T[v > 1] select symbol insert into U;\nfrom S select symbol, volume as v insert into T;")
    assert [a.name for a in app.stream("U").attributes] == ["symbol"]


def test_a_changed_filter_is_another_rollup() -> None:
    """The stream queries that make an aggregation's events are part of its definition: a changed filter
    is never taken for the old one (its rows mean something else)."""
    agg = "define aggregation A from T select symbol, sum(price) as p group by symbol aggregate by ts every sec;"
    hashes = {AggregationLayout.of(parse_app(S + f"from S[{f}] select symbol, price, ts insert into T;\n" + agg),
                                   "A").spec_hash for f in ("price > 1", "price > 2")}
    assert len(hashes) == 2
    direct = parse_app(S + "define aggregation A from S select symbol, sum(price) as p group by symbol "
                       "aggregate by ts every sec;")
    assert AggregationLayout.of(direct, "A").source_queries == ()
