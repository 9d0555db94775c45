"""Python builder -> spec: each app built in code equals the same app parsed from SiddhiQL text."""

from __future__ import annotations

import doctest
import re
from typing import Any

import pytest

from tiltframe.aggregates import registry, states
from tiltframe.errors import DefinitionError
from tiltframe.lang import builder as b
from tiltframe.lang import parse_app, parse_expression
from tiltframe.lang.checks.cross_references import check_runnable
from tiltframe.model.aggregations import AggregateItem, AggregationSpec, ExpressionItem, KeyItem, PurgeSpec, StoreSpec
from tiltframe.model.durations import Granularity, Unit
from tiltframe.model.expressions import Attr, Binary, Call, Literal
from tiltframe.model.streams import StreamDef

TRADE_TEXT = "define stream TradeStream (symbol string, price double, quantity long, timestamp long);\n"
SEED000_TEXT = """
define aggregation TradeAggregation
from TradeStream
select symbol, avg(price) as avgPrice, sum(quantity) as total
group by symbol
aggregate by timestamp every sec ... year;
"""
SEED000_ANNOTATIONS = (
    "\n@BufferSize('3')\n@IgnoreEventsOlderThanBuffer('true')\n"
    '@store(type=\'rdbms\', jdbc.url="jdbc:mysql://localhost:3306/TestDB", username="root", password="root" , '
    'jdbc.driver.name="com.mysql.jdbc.Driver")'
)


def trade_stream() -> StreamDef:
    return b.stream("TradeStream", symbol="string", price="double", quantity="long", timestamp="long")


def seed000(**overrides: object) -> AggregationSpec:
    """The seed-000 TradeAggregation built in Python; keywords replace its arguments."""
    arguments: dict[str, Any] = {
        "source": "TradeStream",
        "select": ["symbol", b.avg("price").as_("avgPrice"), b.sum("quantity").as_("total")],
        "group_by": ["symbol"],
        "by": "timestamp",
        "every": "sec ... year",
    }
    return b.aggregation("TradeAggregation", **{**arguments, **overrides})


def message(excinfo: pytest.ExceptionInfo[DefinitionError]) -> str:
    return excinfo.value.message


# --- the same spec as the text ----------------------------------------------------------------------------


def test_seed000_without_annotations() -> None:
    built = b.app(trade_stream(), seed000())
    assert built == parse_app(TRADE_TEXT + SEED000_TEXT)
    agg = built.aggregations[0]
    assert agg.select == (
        KeyItem("symbol"),
        AggregateItem("avg", Attr("price"), "avgPrice"),
        AggregateItem("sum", Attr("quantity"), "total"),
    )
    assert agg.granularities == tuple(Granularity(u) for u in Unit if u is not Unit.WEEKS)
    check_runnable(built)


def test_seed000_with_annotations() -> None:
    built = b.app(
        trade_stream(),
        seed000(
            buffer_size=3,
            ignore_events_older_than_buffer=True,
            store=b.store(
                "jdbc:mysql://localhost:3306/TestDB",
                username="root",
                password="root",
                options={"jdbc.driver.name": "com.mysql.jdbc.Driver"},
            ),
        ),
    )
    parsed = parse_app(TRADE_TEXT + SEED000_ANNOTATIONS + SEED000_TEXT)
    assert built == parsed
    assert built.aggregations[0].buffer_size == 3
    check_runnable(built)  # seed 000 as written runs: buffer, drop and its MySQL store


def test_seed001_positional_store_element() -> None:
    text = (
        TRADE_TEXT
        + '@store(type="rdbms", jdbc.url="jdbc:mysql://localhost:3306/TestDB", username="root", '
        + 'password="root", "com.mysql.jdbc.Driver")'
        + SEED000_TEXT
    )
    store = b.store(
        "jdbc:mysql://localhost:3306/TestDB", username="root", password="root", options=[("", "com.mysql.jdbc.Driver")]
    )
    assert b.app(trade_stream(), seed000(store=store)) == parse_app(text)


@pytest.mark.parametrize(
    "every",
    [
        "min, day, year",
        "year,min,day",
        ["min", "day", "year"],
        ["years", "minutes", "days"],
        [Unit.MINUTES, "day", Granularity(Unit.YEARS)],
    ],
    ids=["text", "unsorted-text", "list", "plural-list", "mixed"],
)
def test_comma_duration_list(every: object) -> None:
    text = TRADE_TEXT + SEED000_TEXT.replace("every sec ... year", "every min, day, year")
    built = b.app(trade_stream(), seed000(every=every))
    assert built == parse_app(text)
    assert built.aggregations[0].granularities == (
        Granularity(Unit.MINUTES),
        Granularity(Unit.DAYS),
        Granularity(Unit.YEARS),
    )


def test_comma_durations_file_with_latest_value_expression() -> None:
    text = """
    define stream TradeStream (symbol string, price double, quantity long);
    define aggregation TradeTotals
    from TradeStream
    select symbol, price * quantity as lastValue, max(price) as maxPrice, count() as trades
    group by symbol
    aggregate every day, min, hour
    """
    built = b.app(
        b.stream("TradeStream", symbol="string", price="double", quantity="long"),
        b.aggregation(
            "TradeTotals",
            source="TradeStream",
            select=[
                "symbol",
                b.expr("price * quantity").as_("lastValue"),
                b.max("price").as_("maxPrice"),
                b.count().as_("trades"),
            ],
            group_by="symbol",
            every="day, min, hour",
        ),
    )
    assert built == parse_app(text)
    assert built.aggregations[0].select[1] == ExpressionItem(Binary("*", Attr("price"), Attr("quantity")), "lastValue")


def test_without_group_by() -> None:
    text = (
        TRADE_TEXT
        + """
    define aggregation Totals from TradeStream
    select sum(price * quantity) as turnover, count() as trades, symbol, mean(price) as avgPrice
    aggregate by timestamp every hour ... month
    """
    )
    built = b.app(
        trade_stream(),
        b.aggregation(
            "Totals",
            source="TradeStream",
            select=[
                b.sum("price * quantity").as_("turnover"),
                b.count().as_("trades"),
                "symbol",
                b.mean("price").as_("avgPrice"),
            ],
            by="timestamp",
            every="hour ... month",
        ),
    )
    assert built == parse_app(text)
    agg = built.aggregations[0]
    assert agg.group_by == ()
    # Not grouped by, so symbol is the value of the latest event, named after itself; mean is avg.
    assert agg.select[2] == ExpressionItem(Attr("symbol"), "symbol")
    assert agg.select[3].function == "avg"  # type: ignore[union-attr]


def test_arrival_time() -> None:
    text = TRADE_TEXT + SEED000_TEXT.replace("aggregate by timestamp every sec ... year", "aggregate every sec ... min")
    built = b.app(trade_stream(), seed000(by=None, every="sec...min"))
    assert built == parse_app(text)
    assert built.aggregations[0].time_attribute is None
    assert built.aggregations[0].granularities == (Granularity(Unit.SECONDS), Granularity(Unit.MINUTES))


def test_time_zones() -> None:
    text = "@app:name('Trades')\n@app:timezone('+05:30')\n" + TRADE_TEXT + "@timezone('Asia/Kolkata')" + SEED000_TEXT
    built = b.app(trade_stream(), seed000(timezone="Asia/Kolkata"), name="Trades", timezone="+05:30")
    assert built == parse_app(text)
    assert (built.name, built.timezone, built.aggregations[0].timezone) == ("Trades", "+05:30", "Asia/Kolkata")


def test_retrieval_queries() -> None:
    queries = [
        """from TradeSummaryRetrievalStream as b join TradeAggregation as a
        on a.symbol == b.symbol
        within "2014-02-15 00:00:00 +05:30", "2014-03-16 00:00:00 +05:30"
        per "days"
        select AGG_TIMESTAMP, a.symbol, a.total, a.avgPrice
        order by AGG_TIMESTAMP
        insert into TradeSummaryStream""",
        # The aggregation on the left of the join is found because the builder knows its name.
        """from TradeAggregation as a join TradeSummaryRetrievalStream as b on a.symbol == b.symbol
        within b.startTime, b.endTime per b.perDuration select a.symbol, a.total""",
        "from TradeAggregation within '2024-01-** **:**:**' per 'months' select symbol, total limit 5",
    ]
    request = (
        "define stream TradeSummaryRetrievalStream (symbol string, startTime long, endTime long, perDuration string);\n"
    )
    text = TRADE_TEXT + SEED000_TEXT + request + ";\n".join(queries)
    built = b.app(
        trade_stream(),
        seed000(),
        b.stream(
            "TradeSummaryRetrievalStream", symbol="string", startTime="long", endTime="long", perDuration="string"
        ),
        *(b.query(q) for q in queries),
    )
    parsed = parse_app(text)
    assert built == parsed
    assert built.queries[1].aggregation == "TradeAggregation"
    assert built.queries[1].request_stream == "TradeSummaryRetrievalStream"


def test_all_annotations_reach_the_spec() -> None:
    text = (
        TRADE_TEXT
        + "@purge(enable='false', interval='10 sec', @retentionPeriod(sec='120 sec', min='24 hours'))\n"
        + "@retentionPeriod(day='40 days')\n@PartitionById(enable='false')\n@IgnoreEventsOlderThanBuffer('false')\n"
        + "@store(type='rdbms', jdbc.url='jdbc:sqlite:rollups.db')"
        + SEED000_TEXT
    )
    built = b.app(
        trade_stream(),
        seed000(
            purge=b.purge(False, interval="10 sec", retention={"sec": "120 sec", "min": "24 hours"}),
            retention={"day": "40 days"},
            partition_by_id=False,
            ignore_events_older_than_buffer=False,
            store=b.store(url="jdbc:sqlite:rollups.db"),
        ),
    )
    assert built == parse_app(text)
    agg = built.aggregations[0]
    assert agg.purge == PurgeSpec(False, "10 sec", (("sec", "120 sec"), ("min", "24 hours")))
    assert agg.retention == (("day", "40 days"),)
    assert agg.store == StoreSpec("rdbms", "jdbc:sqlite:rollups.db")


@pytest.mark.parametrize(
    ("annotation", "keyword"),
    [
        ("@purge(enable='true')", {"purge": True}),
        ("@purge(enable='false')", {"purge": False}),
        ("@PartitionById", {"partition_by_id": True}),
        ("@retentionPeriod(sec='120 sec')", {"retention": {"sec": "120 sec"}}),
        ("@allowedLateness('10 min')", {"allowed_lateness": "10 min"}),
        ("@allowedLateness('10 min')", {"allowed_lateness": 600_000}),
        ("@allowedLateness('250ms')", {"allowed_lateness": 250}),
        ("@BufferSize('2')", {"buffer_size": 2}),
        ("@IgnoreEventsOlderThanBuffer('false')", {"ignore_events_older_than_buffer": False}),
    ],
)
def test_annotation_keywords(annotation: str, keyword: dict[str, object]) -> None:
    assert b.app(trade_stream(), seed000(**keyword)) == parse_app(TRADE_TEXT + annotation + SEED000_TEXT)


def test_key_alias_literals_and_expression_trees() -> None:
    text = (
        TRADE_TEXT
        + """
    define aggregation A from TradeStream
    select symbol as sym, price * -7 as neg, quantity + 3000000000 as big, quantity * 2L as twice,
           sum(price / 2.5) as half, count(price) as n
    group by symbol aggregate every day
    """
    )
    built = b.app(
        trade_stream(),
        b.aggregation(
            "A",
            source="TradeStream",
            select=[
                b.expr("symbol").as_("sym"),
                b.expr("price * -7").as_("neg"),
                b.expr("quantity + 3000000000").as_("big"),
                b.expr(Binary("*", Attr("quantity"), Literal(2, "long"))).as_("twice"),
                b.agg("sum", "price / 2.5").as_("half"),
                b.agg("count", "price").as_("n"),
            ],
            group_by=["symbol"],
            every=["day"],
        ),
    )
    assert built == parse_app(text)
    select = built.aggregations[0].select
    assert select[0] == KeyItem("symbol", "sym")
    assert select[1].expr.right == Literal(-7, "int")  # type: ignore[union-attr]
    assert select[2].expr.right == Literal(3000000000, "long")  # type: ignore[union-attr]


def test_attributes_as_pairs_allow_any_name() -> None:
    stream = b.stream("S", [("from", "string"), ("v", "double")], ts="long")
    assert [(a.name, a.type.value) for a in stream.attributes] == [("from", "string"), ("v", "double"), ("ts", "long")]


def test_parse_expression() -> None:
    assert parse_expression("avg(a.price) * 2") == Binary("*", Call("avg", (Attr("price", "a"),)), Literal(2, "int"))
    with pytest.raises(DefinitionError, match="expected an expression") as excinfo:
        parse_expression("price *")
    assert (excinfo.value.line, excinfo.value.column) == (1, 8)


def test_helpers_follow_the_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """A function registered later is reachable as b.<name> and b.agg(<name>) without touching the builder."""
    monkeypatch.setattr(registry, "_FUNCTIONS", dict(registry._FUNCTIONS))
    monkeypatch.setattr(registry, "_ALIASES", dict(registry._ALIASES))
    registry.register(
        registry.AggregateFunction(
            "biggest",
            (registry.State("MAX", states.Build.MAX, states.Merge.MAX, lambda t: t or registry.AttrType.DOUBLE),),
            lambda s, _ops: s["MAX"],
            lambda t: t or registry.AttrType.DOUBLE,
        )
    )
    built = b.app(
        trade_stream(), seed000(select=["symbol", b.biggest("price").as_("top"), b.agg("BIGGEST", "quantity").as_("q")])
    )
    text = TRADE_TEXT + SEED000_TEXT.replace(
        "avg(price) as avgPrice, sum(quantity) as total", "biggest(price) as top, BIGGEST(quantity) as q"
    )
    assert built == parse_app(text)
    assert built.aggregations[0].select[1] == AggregateItem("biggest", Attr("price"), "top")


def test_unknown_module_attribute() -> None:
    with pytest.raises(AttributeError, match="stdevv"):
        b.stdevv  # noqa: B018


def test_docstring_example() -> None:
    assert doctest.testmod(b, raise_on_error=False).failed == 0


# --- errors -----------------------------------------------------------------------------------------------


def test_unknown_attribute_is_reported_like_text() -> None:
    with pytest.raises(DefinitionError) as built:
        b.app(trade_stream(), seed000(select=["symbol", b.avg("prce").as_("avgPrice")]))
    with pytest.raises(DefinitionError) as parsed:
        parse_app(TRADE_TEXT + SEED000_TEXT.replace("avg(price)", "avg(prce)").replace(", sum(quantity) as total", ""))
    assert message(built) == message(parsed)
    assert "unknown attribute of stream TradeStream 'prce' — did you mean 'price'?" in message(built)


def test_unknown_source_stream() -> None:
    with pytest.raises(DefinitionError, match="reads from unknown stream 'TradeStrem' — did you mean 'TradeStream'"):
        b.app(trade_stream(), seed000(source="TradeStrem"))


def test_unknown_function_did_you_mean() -> None:
    with pytest.raises(DefinitionError, match="unknown aggregate function 'avgg' — did you mean 'avg'"):
        b.agg("avgg", "price")
    with pytest.raises(DefinitionError, match="unknown function 'sqrt'"):
        b.expr("sqrt(price)")


def test_reversed_range_is_reported_like_text() -> None:
    with pytest.raises(DefinitionError) as built:
        seed000(every="year ... sec")
    assert message(built) == "reversed duration range 'year ... sec' goes from coarser to finer; write 'sec ... year'"
    with pytest.raises(DefinitionError) as parsed:
        parse_app(TRADE_TEXT + SEED000_TEXT.replace("sec ... year", "year ... sec"))
    assert message(parsed) == message(built)


@pytest.mark.parametrize(
    ("every", "expected"),
    [
        ("min, day, min", "duration 'min' is listed twice"),
        (["min", "minutes"], "duration 'minutes' is listed twice (as 'min' and 'minutes')"),
        ("day ... day", "range 'day ... day' names one duration twice; write 'day'"),
        ("10 sec ... min", "a duration range takes plain durations (sec ... year), got '10 sec'"),
        ("sec ... fortnight", "unknown duration 'fortnight'"),
        ("every day", "cannot read duration 'every day'"),
    ],
)
def test_bad_durations(every: object, expected: str) -> None:
    with pytest.raises(DefinitionError, match=re.escape(expected)):
        seed000(every=every)


def test_aggregate_without_alias() -> None:
    with pytest.raises(DefinitionError) as excinfo:
        seed000(select=["symbol", b.avg("price")])
    assert message(excinfo) == (
        "select item 'avg(price)' of aggregation TradeAggregation needs a name: "
        "add .as_('<name>') (in text 'avg(price) as <name>')"
    )
    with pytest.raises(DefinitionError, match=r"'price \* quantity' of aggregation TradeAggregation needs a name"):
        seed000(select=["symbol", "price * quantity"])


@pytest.mark.parametrize(
    ("item", "expected"),
    [
        (b.expr("sum(price) * 2").as_("x"), "combines aggregates in an expression"),
        (b.sum("avg(price)").as_("x"), "aggregate avg(price) cannot be used inside another aggregate"),
        (b.expr("avg()").as_("x"), "avg() needs an argument"),
        (b.expr("sum(price, quantity)").as_("x"), "sum() takes one argument, got 2"),
    ],
)
def test_bad_select_items(item: b.Item, expected: str) -> None:
    with pytest.raises(DefinitionError, match=re.escape(expected)):
        seed000(select=["symbol", item])


def test_other_refusals() -> None:
    with pytest.raises(DefinitionError, match="unknown attribute type 'strng' — did you mean 'string'"):
        b.stream("S", a="strng")
    with pytest.raises(DefinitionError, match="'symbol' is listed twice in group by"):
        seed000(group_by=["symbol", "symbol"])
    with pytest.raises(DefinitionError, match="buffer_size"):
        seed000(buffer_size="3")
    with pytest.raises(DefinitionError, match="@BufferSize must be a positive integer, got 0"):
        b.app(trade_stream(), seed000(buffer_size=0))
    with pytest.raises(DefinitionError, match="partition_by_id takes True or False"):
        seed000(partition_by_id="yes")
    with pytest.raises(DefinitionError, match=re.escape("app() takes b.stream()")):
        b.app(trade_stream(), "define stream X (a int)")  # type: ignore[arg-type]
    with pytest.raises(DefinitionError, match=r"unexpected name 'selct'.*did you mean 'select'"):
        b.query("from TradeAggregation within '2024-01-** **:**:**' per 'days' selct *")
    with pytest.raises(DefinitionError, match="is not aggregated per months"):
        b.app(
            trade_stream(),
            seed000(every="sec ... day"),
            b.query("from TradeAggregation within 0L, 1000L per 'months' select *"),
        )
    with pytest.raises(DefinitionError, match="'TradeStream' is defined 2 times"):
        b.app(trade_stream(), trade_stream())


@pytest.mark.parametrize("value", ["ten minutes", "1 month", -5, True])
def test_allowed_lateness_values(value: object) -> None:
    with pytest.raises(DefinitionError, match="allowed_lateness"):
        seed000(allowed_lateness=value)
