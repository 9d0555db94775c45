"""Text -> spec: the seed examples parse exactly as written, and each clause maps to the right spec field."""

from __future__ import annotations

from pathlib import Path

import pytest

from tiltframe.lang import parse_app, parse_query
from tiltframe.lang.siddhiql import parser as parser_module
from tiltframe.model.aggregations import AggregateItem, AggregationSpec, ExpressionItem, KeyItem, PurgeSpec, StoreSpec
from tiltframe.model.durations import Granularity, Unit
from tiltframe.model.expressions import Attr, Binary, Call, Literal, Pos, Unary
from tiltframe.model.queries import OrderItem, OutputItem, RetrievalQuery
from tiltframe.model.streams import Annotation, AttrType

HERE = Path(__file__).parent
VALID = sorted((HERE / "valid").glob("*.siddhi"))
ALL_UNITS = tuple(Granularity(u) for u in Unit if u is not Unit.WEEKS)  # sec ... year
TRADE_STREAM = "define stream TradeStream (symbol string, price double, quantity long, timestamp long);\n"


@pytest.fixture
def unvalidated(monkeypatch: pytest.MonkeyPatch) -> None:
    """Check what the parser itself builds, whatever cross-reference validation adds or refuses later."""
    monkeypatch.setattr(parser_module, "validate_app", lambda app: app)


def read(name: str) -> str:
    return (HERE / "valid" / name).read_text(encoding="utf-8")


def aggregation(text: str) -> AggregationSpec:
    return parse_app(TRADE_STREAM + text).aggregations[0]


@pytest.mark.parametrize("path", VALID, ids=lambda p: p.stem)
def test_valid_files_parse(path: Path) -> None:
    app = parse_app(path.read_text(encoding="utf-8"))
    assert app.streams or app.aggregations or app.queries or app.name


# --- seed 000 -------------------------------------------------------------------------------------------


@pytest.mark.usefixtures("unvalidated")
def test_seed000_aggregation() -> None:
    app = parse_app(read("seed000_trade_app.siddhi"))
    trade, request = app.streams
    assert [(a.name, a.type) for a in trade.attributes] == [
        ("symbol", AttrType.STRING),
        ("price", AttrType.DOUBLE),
        ("quantity", AttrType.LONG),
        ("timestamp", AttrType.LONG),
    ]
    assert request.name == "TradeSummaryRetrievalStream"
    assert app.aggregations == (
        AggregationSpec(
            name="TradeAggregation",
            source="TradeStream",
            select=(
                KeyItem("symbol"),
                AggregateItem("avg", Attr("price"), "avgPrice"),
                AggregateItem("sum", Attr("quantity"), "total"),
            ),
            granularities=ALL_UNITS,
            group_by=("symbol",),
            time_attribute="timestamp",
            store=StoreSpec(
                type="rdbms",
                url="jdbc:mysql://localhost:3306/TestDB",
                username="root",
                password="root",
                options=(("jdbc.driver.name", "com.mysql.jdbc.Driver"),),
            ),
            buffer_size=3,
            ignore_events_older_than_buffer=True,
        ),
    )
    agg = app.aggregations[0]
    assert [a.name for a in agg.annotations] == ["BufferSize", "IgnoreEventsOlderThanBuffer", "store"]
    assert agg.annotations[0] == Annotation("BufferSize", ((None, "3"),))
    assert agg.pos == Pos(8, 1)  # the `define` keyword, after its annotations


@pytest.mark.usefixtures("unvalidated")
def test_seed000_queries() -> None:
    first, ordered = parse_app(read("seed000_trade_app.siddhi")).queries
    within = (
        Literal("2014-02-15 00:00:00 +05:30", "string"),
        Literal("2014-03-16 00:00:00 +05:30", "string"),
    )
    common = {
        "aggregation": "TradeAggregation",
        "aggregation_alias": "a",
        "request_stream": "TradeSummaryRetrievalStream",
        "request_alias": "b",
        "on": Binary("==", Attr("symbol", "a"), Attr("symbol", "b")),
        "within": within,
        "per": Literal("days", "string"),
        "insert_into": "TradeSummaryStream",
    }
    columns = (
        OutputItem(Attr("symbol", "a")),
        OutputItem(Attr("total", "a")),
        OutputItem(Attr("avgPrice", "a")),
    )
    assert first == RetrievalQuery(**common, select=columns)
    assert ordered == RetrievalQuery(
        **common,
        select=(OutputItem(Attr("AGG_TIMESTAMP")), *columns),
        order_by=(OrderItem(Attr("AGG_TIMESTAMP")),),
    )
    assert first.on is not None and first.on.pos == Pos(17, 4)


@pytest.mark.usefixtures("unvalidated")
def test_seed000_within_and_per_from_request_attributes() -> None:
    (query,) = parse_app(read("seed000_within_from_attributes.siddhi")).queries
    assert query.within == (Attr("startTime", "b"), Attr("endTime", "b"))
    assert query.per == Attr("perDuration", "b")


@pytest.mark.usefixtures("unvalidated")
def test_seed001_positional_store_element() -> None:
    (agg,) = parse_app(read("seed001_trade_app.siddhi")).aggregations
    assert agg.store == StoreSpec(
        "rdbms",
        "jdbc:mysql://localhost:3306/TestDB",
        "root",
        "root",
        options=(("", "com.mysql.jdbc.Driver"),),
    )
    assert agg.annotations[0].elements[-1] == (None, "com.mysql.jdbc.Driver")


# --- aggregation definitions ----------------------------------------------------------------------------


@pytest.mark.usefixtures("unvalidated")
def test_select_items_are_sorted_into_keys_aggregates_and_expressions() -> None:
    agg = aggregation(
        "define aggregation A from TradeStream "
        "select symbol as sym, price, price * quantity as value, COUNT() as n, count(price) as c, "
        "Mean(price) as m, MAX(price) as hi "
        "group by symbol aggregate every sec"
    )
    assert agg.select == (
        KeyItem("symbol", "sym"),
        ExpressionItem(Attr("price"), "price"),
        ExpressionItem(Binary("*", Attr("price"), Attr("quantity")), "value"),
        AggregateItem("count", None, "n"),
        AggregateItem("count", Attr("price"), "c"),
        AggregateItem("avg", Attr("price"), "m"),
        AggregateItem("max", Attr("price"), "hi"),
    )
    assert agg.time_attribute is None


@pytest.mark.usefixtures("unvalidated")
@pytest.mark.parametrize(
    ("every", "expected"),
    [
        ("sec ... year", ALL_UNITS),
        ("minute ... days", (Granularity(Unit.MINUTES), Granularity(Unit.HOURS), Granularity(Unit.DAYS))),
        ("sec...min", (Granularity(Unit.SECONDS), Granularity(Unit.MINUTES))),
        ("year, min, Day", (Granularity(Unit.MINUTES), Granularity(Unit.DAYS), Granularity(Unit.YEARS))),
        ("months", (Granularity(Unit.MONTHS),)),
        ("10 sec, 1 min", (Granularity(Unit.SECONDS, 10), Granularity(Unit.MINUTES))),
    ],
)
def test_durations(every: str, expected: tuple[Granularity, ...]) -> None:
    agg = aggregation(
        "define aggregation A from TradeStream select sum(quantity) as q "
        f"aggregate by timestamp every {every}"
    )
    assert agg.granularities == expected
    assert agg.time_attribute == "timestamp"


@pytest.mark.usefixtures("unvalidated")
def test_interpreted_annotations() -> None:
    agg = aggregation(
        "@purge(enable='false', interval='15 min', @retentionPeriod(sec='120 sec', min='24 hours'))\n"
        "@retentionPeriod(hour='30 days')\n"
        "@PartitionById\n"
        "@timezone('Asia/Kolkata')\n"
        "define aggregation A from TradeStream select sum(quantity) as q "
        "aggregate by timestamp every sec ... day"
    )
    assert agg.purge == PurgeSpec(False, "15 min", (("sec", "120 sec"), ("min", "24 hours")))
    assert agg.retention == (("hour", "30 days"),)
    assert agg.partition_by_id is True
    assert agg.timezone == "Asia/Kolkata"
    assert [a.name for a in agg.annotations] == [
        "purge",
        "retentionPeriod",
        "PartitionById",
        "timezone",
    ]
    assert agg.annotations[0].elements == (("enable", "false"), ("interval", "15 min"))


@pytest.mark.usefixtures("unvalidated")
@pytest.mark.parametrize(
    ("annotation", "expected"),
    [
        ("@PartitionById(enable='false')", False),
        ("@PartitionById(enable='TRUE')", True),
        ("@PartitionById()", True),
    ],
)
def test_partition_by_id(annotation: str, expected: bool) -> None:
    text = f"{annotation} define aggregation A from TradeStream select sum(quantity) as q aggregate every sec"
    assert aggregation(text).partition_by_id is expected


@pytest.mark.usefixtures("unvalidated")
def test_annotation_values_may_be_bare_numbers_and_names() -> None:
    agg = aggregation(
        '@BufferSize(3) @store(type=rdbms, "positional") '
        "define aggregation A from TradeStream select sum(quantity) as q aggregate by timestamp every sec"
    )
    assert agg.buffer_size == 3
    assert agg.store == StoreSpec("rdbms", options=(("", "positional"),))


# --- app level ------------------------------------------------------------------------------------------


@pytest.mark.usefixtures("unvalidated")
def test_app_annotations_and_comments() -> None:
    app = parse_app(
        "/* a header\n   comment */ @app:name('Trades') -- the name\n"
        '@App:Timezone("Asia/Kolkata")\n'
        "@app:description('demo')\n"
        "@source(type='http') DEFINE Stream TradeStream (symbol STRING, ok boolean)"
    )
    assert (app.name, app.timezone) == ("Trades", "Asia/Kolkata")
    assert [a.name for a in app.annotations] == ["app:name", "App:Timezone", "app:description"]
    (stream,) = app.streams
    assert stream.annotations == (Annotation("source", (("type", "http"),)),)
    assert [a.type for a in stream.attributes] == [AttrType.STRING, AttrType.BOOL]


@pytest.mark.usefixtures("unvalidated")
def test_keywords_are_names_where_only_a_name_can_stand() -> None:
    app = parse_app("define stream Orders (order string, limit int, events long);")
    assert [a.name for a in app.streams[0].attributes] == ["order", "limit", "events"]


@pytest.mark.usefixtures("unvalidated")
def test_aggregation_may_stand_on_either_side_of_join() -> None:
    app = parse_app(
        TRADE_STREAM
        + "define stream Req (symbol string);\n"
        + "define aggregation Agg from TradeStream select symbol, sum(quantity) as total group by symbol "
        + "aggregate by timestamp every sec ... day;\n"
        + "from Agg as a join Req as b on a.symbol == b.symbol within 0L, 1000L per 'days' select a.total;\n"
        + "from Req join Agg within 0L, 1000L per 'days' select total"
    )
    left, right = app.queries
    assert (left.aggregation, left.aggregation_alias, left.request_stream, left.request_alias) == (
        "Agg",
        "a",
        "Req",
        "b",
    )
    assert (right.aggregation, right.request_stream) == ("Agg", "Req")


# --- retrieval queries ----------------------------------------------------------------------------------


def test_parse_query_on_demand_form() -> None:
    query = parse_query(
        "@info(name='q1') from TradeAggregation as a on symbol == \"IBM\" "
        'within 1496200000000L, 1596434876000L per "hours" '
        "select symbol, total as t order by total desc, symbol asc limit 5;"
    )
    assert query == RetrievalQuery(
        aggregation="TradeAggregation",
        aggregation_alias="a",
        on=Binary("==", Attr("symbol"), Literal("IBM", "string")),
        within=(Literal(1496200000000, "long"), Literal(1596434876000, "long")),
        per=Literal("hours", "string"),
        select=(OutputItem(Attr("symbol")), OutputItem(Attr("total"), "t")),
        order_by=(OrderItem(Attr("total"), ascending=False), OrderItem(Attr("symbol"))),
        limit=5,
        name="q1",
    )


def test_parse_query_pattern_within_and_select_all() -> None:
    query = parse_query("from TradeAggregation within '2018-01-** **:**:**' per 'months' select *")
    assert query.within == (Literal("2018-01-** **:**:**", "string"),)
    assert query.select is None
    assert query.request_stream is None


def test_parse_query_join_sides() -> None:
    text = "from TradeAggregation as a join Req as b within 0L, 1L per 'days' select a.total"
    assert parse_query(text).aggregation == "Req"  # no context: the right side, as in Siddhi's examples
    assert parse_query(text, aggregations={"TradeAggregation"}).aggregation == "TradeAggregation"


@pytest.mark.parametrize(
    ("insert", "events", "target"),
    [
        ("insert into Out", None, "Out"),
        ("insert all events into Out", "all", "Out"),
        ("INSERT Current EVENTS INTO Out", "current", "Out"),
        ("insert expired events into Out", "expired", "Out"),
        ("", None, None),
    ],
)
def test_insert_clause(insert: str, events: str | None, target: str | None) -> None:
    query = parse_query(f"from Req join Agg within 0L, 1L per 'days' select * {insert}")
    assert (query.output_events, query.insert_into) == (events, target)


# --- expressions ----------------------------------------------------------------------------------------


def select_expr(expr: str) -> object:
    query = parse_query(f"from A within 0L, 1L per 'days' select {expr} as x")
    assert query.select is not None
    return query.select[0].expr


@pytest.mark.parametrize(
    ("text", "value", "kind"),
    [
        ("12", 12, "int"),
        ("12L", 12, "long"),
        ("12l", 12, "long"),
        ("2147483648", 2147483648, "long"),
        ("1.5f", 1.5, "float"),
        ("1.5", 1.5, "double"),
        ("1e3", 1000.0, "double"),
        ("1.5d", 1.5, "double"),
        ("3D", 3.0, "double"),
        ("-7", -7, "int"),
        ("'it\\'s'", "it's", "string"),
        ('"double"', "double", "string"),
        ("true", True, "bool"),
        ("FALSE", False, "bool"),
    ],
)
def test_literals(text: str, value: object, kind: str) -> None:
    assert select_expr(text) == Literal(value, kind)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a + b * c", Binary("+", Attr("a"), Binary("*", Attr("b"), Attr("c")))),
        ("(a + b) * c", Binary("*", Binary("+", Attr("a"), Attr("b")), Attr("c"))),
        ("a - b - c", Binary("-", Binary("-", Attr("a"), Attr("b")), Attr("c"))),
        ("a % 2 == 0", Binary("==", Binary("%", Attr("a"), Literal(2, "int")), Literal(0, "int"))),
        (
            "not a.x >= 1 and b != 2 or c",
            Binary(
                "or",
                Binary(
                    "and",
                    Unary("not", Binary(">=", Attr("x", "a"), Literal(1, "int"))),
                    Binary("!=", Attr("b"), Literal(2, "int")),
                ),
                Attr("c"),
            ),
        ),
        ("-a / 2", Binary("/", Unary("-", Attr("a")), Literal(2, "int"))),
        ("sum(a.total)", Call("sum", (Attr("total", "a"),))),
    ],
)
def test_expressions(text: str, expected: object) -> None:
    assert select_expr(text) == expected


def test_expression_positions_are_their_start() -> None:
    query = parse_query("from A within 0L, 1L per 'days'\nselect x,\n   a + (b * c) as y")
    assert query.select is not None
    expr = query.select[1].expr
    assert isinstance(expr, Binary)
    assert expr.pos == Pos(3, 4)
    assert expr.right.pos == Pos(3, 9)
    assert query.select[1].pos == Pos(3, 4)
