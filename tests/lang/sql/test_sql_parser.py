"""Streaming SQL text -> ContinuousQuery as written: windows, intervals, EMIT forms, expressions, syntax
errors in words at the right line and column, and continuous queries as statements of app files."""

from __future__ import annotations

import re

import pytest

from tests.errors import LARK_WORDS
from tests.seed003 import (
    SEED_GLOBAL_PERIODIC,
    SEED_ON_UPDATE,
    SEED_ON_UPDATE_BATCH,
    SEED_ON_UPDATE_DELAY,
    SEED_OTEL,
    SEED_PERIODIC_HAVING,
    SEED_REPEAT,
    SEED_TIMEOUT_NOTE,
    SEED_TUMBLE_DEFAULT,
    SEED_TUMBLE_DELAY_TYPO,
)
from tiltframe.errors import DefinitionError
from tiltframe.lang import parse_app, parse_continuous
from tiltframe.lang.siddhiql.parser import parse_sql
from tiltframe.model.aggregations import AggregateItem
from tiltframe.model.continuous import (
    ContinuousQuery,
    Emit,
    EmitPolicy,
    Projection,
    Setting,
    SqlItem,
)
from tiltframe.model.expressions import Attr, Binary, Call, ListLiteral, Literal, Unary
from tiltframe.model.streams import Annotation
from tiltframe.model.windows import CountWindow, GlobalWindow, HopWindow, SessionWindow, TumbleWindow, Window

STREAMS = (
    "@eventTime('ts')\n"
    "define stream device_utils (device string, cpu_usage double, ts long);\n"
    "define stream car_live_data (cid string, speed_kmh double, ts long);\n"
    "define stream t (x int);\n"
)


def syntax_error(text: str) -> DefinitionError:
    with pytest.raises(DefinitionError) as caught:
        parse_sql(text)
    assert not LARK_WORDS.search(str(caught.value).split("\n")[0]), str(caught.value)
    return caught.value


def app_error(text: str) -> DefinitionError:
    with pytest.raises(DefinitionError) as caught:
        parse_app(text)
    assert not LARK_WORDS.search(str(caught.value).split("\n")[0]), str(caught.value)
    return caught.value


def emit_of(clause: str, source: str = "tumble(device_utils, 5s)") -> Emit:
    return parse_sql(f"SELECT count() FROM {source} {clause}").emit


# --- the seed's queries, as written ---------------------------------------------------------------------


def test_seed_global_periodic() -> None:
    q = parse_sql(SEED_GLOBAL_PERIODIC)
    assert q == ContinuousQuery(
        stream="device_utils",
        window=GlobalWindow("device_utils"),
        select=(SqlItem(Attr("device")), SqlItem(Call("count"))),
        where=Binary(">", Attr("cpu_usage"), Literal(99, "int")),
        emit=Emit(interval_ms=5_000, policy=EmitPolicy.PERIODIC),
    )
    assert q.pos is not None and (q.pos.line, q.pos.column) == (1, 1)
    assert q.select[1].output_name == "count()"


def test_seed_tumble_with_default_emit() -> None:
    q = parse_sql(SEED_TUMBLE_DEFAULT)
    assert q.window == TumbleWindow("device_utils", size_ms=5_000)
    assert q.group_by == (Attr("device"), Attr("window_end"))
    assert q.select[1] == SqlItem(Call("max", (Attr("cpu_usage"),)))
    assert q.emit == Emit()  # the default is resolved by validation


def test_seed_tumble_with_delay_parses_and_keeps_the_typo_for_validation() -> None:
    q = parse_sql(SEED_TUMBLE_DELAY_TYPO)
    assert q.group_by[1] == Attr("widnow_end")
    assert q.emit == Emit(policy=EmitPolicy.AFTER_WINDOW_CLOSE, delay_ms=2_000)
    assert q.text == SEED_TUMBLE_DELAY_TYPO.rstrip(";")


def test_seed_periodic_with_having() -> None:
    q = parse_sql(SEED_PERIODIC_HAVING)
    assert q.select == (SqlItem(Attr("window_start")), SqlItem(Call("count"), "cnt"))
    assert q.having == Binary(">", Attr("cnt"), Literal(300, "int"))
    assert q.emit == Emit(policy=EmitPolicy.PERIODIC, interval_ms=1_000)


def test_seed_periodic_repeat() -> None:
    assert parse_sql(SEED_REPEAT).emit == Emit(policy=EmitPolicy.PERIODIC, interval_ms=3_000, repeat=True)


@pytest.mark.parametrize(
    ("text", "emit"),
    [
        (SEED_ON_UPDATE, Emit(policy=EmitPolicy.ON_UPDATE)),
        (SEED_ON_UPDATE_DELAY, Emit(policy=EmitPolicy.ON_UPDATE, delay_ms=2_000)),
        (SEED_ON_UPDATE_BATCH, Emit(policy=EmitPolicy.ON_UPDATE, batch_ms=2_000)),
    ],
    ids=["on update", "with delay", "with batch"],
)
def test_seed_on_update(text: str, emit: Emit) -> None:
    q = parse_sql(text)
    assert q.where == Binary(
        "or",
        Binary("==", Attr("cid"), Literal("c00033", "string")),
        Binary("==", Attr("cid"), Literal("c00022", "string")),
    )
    assert q.group_by == (Attr("window_start"), Attr("cid"))
    assert q.emit == emit


def test_seed_timeout_note_query() -> None:
    q = parse_sql(SEED_TIMEOUT_NOTE)
    assert q.window == TumbleWindow("stream", size_ms=2_000)  # `stream` is only a keyword in EMIT
    assert q.select[1] == SqlItem(Call("count"), "count")


def test_seed_otel_query_parses_into_an_aggregation_and_its_projection() -> None:
    q = parse_sql(SEED_OTEL)
    assert q.stream == "otel_traces" and q.window == GlobalWindow("otel_traces")
    assert [i.output_name for i in q.select] == ["trace_id", "start_ts", "end_ts", "span_ms", "trace_events"]
    span = Call("date_diff", (Literal("ms", "string"), Attr("start_ts"), Attr("end_ts")))
    assert q.select[3] == SqlItem(span, "span_ms")
    assert q.group_by == (Attr("trace_id"),)
    assert q.emit == Emit(EmitPolicy.AFTER_KEY_EXPIRE, identified_by="end_time", maxspan_ms=500, timeout_ms=2_000)
    names = ("trace_id", "start_ts", "end_ts", "span_ms", "trace_events")
    assert q.projection == Projection(
        "grouped", (SqlItem(Call("json_encode", tuple(Attr(n) for n in names)), "event"),)
    )
    assert q.settings == (
        Setting("default_hash_table", "hybrid"),
        Setting("max_hot_keys", 1_000_000),
        Setting("allow_independent_shard_processing", True),
    )


def test_with_query_forms() -> None:
    star = parse_sql("WITH g AS (SELECT count() AS n FROM t) SELECT * FROM g WHERE n > 1")
    assert star.projection == Projection("g", (), Binary(">", Attr("n"), Literal(1, "int")))
    outer_emit = parse_sql("WITH g AS (SELECT count() AS n FROM t) SELECT n FROM g EMIT PERIODIC 1s")
    assert outer_emit.emit == Emit(EmitPolicy.PERIODIC, interval_ms=1_000)
    plain = parse_sql("SELECT count() FROM t EMIT PERIODIC 1s SETTINGS max_hot_keys = 10;")
    assert plain.settings == (Setting("max_hot_keys", 10),) and plain.projection is None


@pytest.mark.parametrize(
    ("sql", "marker", "fragment"),
    [
        (
            "WITH a AS (SELECT count() FROM t), b AS (SELECT count() FROM t) SELECT * FROM a",
            "b AS",
            "one WITH query is supported yet",
        ),
        ("WITH g AS (SELECT count() AS n FROM t) SELECT n FROM t", "t", "write FROM g"),
        ("WITH g AS (SELECT count() AS n FROM t) SELECT n FROM tumble(g, 5s)", "tumble", "write FROM g"),
        (
            "WITH g AS (SELECT count() AS n FROM t) SELECT n FROM g GROUP BY n",
            "GROUP",
            "GROUP BY over the rows of WITH g is not supported yet",
        ),
        (
            "WITH g AS (SELECT count() AS n FROM t EMIT PERIODIC 1s) SELECT n FROM g EMIT ON UPDATE",
            "EMIT ON",
            "EMIT is given twice",
        ),
        ("SELECT count() FROM t SETTINGS max_hot_keys > 1", ">", "write a setting as max_hot_keys = <value>"),
        ("SELECT count() FROM t SETTINGS max_hot_keys = 1, MAX_HOT_KEYS = 2", "MAX_HOT", "given twice"),
    ],
)
def test_with_and_settings_errors(sql: str, marker: str, fragment: str) -> None:
    with pytest.raises(DefinitionError) as caught:
        parse_sql(sql)
    assert (caught.value.line, caught.value.column) == (1, sql.rindex(marker) + 1), str(caught.value)
    assert fragment in caught.value.message


# --- every EMIT form ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("clause", "emit"),
    [
        ("", Emit()),
        ("EMIT STREAM", Emit()),
        ("EMIT CHANGELOG", Emit(changelog=True)),
        ("EMIT AFTER WINDOW CLOSE", Emit(policy=EmitPolicy.AFTER_WINDOW_CLOSE)),
        ("EMIT AFTER WINDOW CLOSE WITH DELAY 1s", Emit(policy=EmitPolicy.AFTER_WINDOW_CLOSE, delay_ms=1_000)),
        (
            "EMIT STREAM AFTER WINDOW CLOSE WITH DELAY 1s AND TIMEOUT 5s",
            Emit(policy=EmitPolicy.AFTER_WINDOW_CLOSE, delay_ms=1_000, timeout_ms=5_000),
        ),
        ("EMIT PERIODIC 500ms", Emit(policy=EmitPolicy.PERIODIC, interval_ms=500)),
        ("EMIT PERIODIC", Emit(policy=EmitPolicy.PERIODIC)),
        ("EMIT PERIODIC 2m REPEAT", Emit(policy=EmitPolicy.PERIODIC, interval_ms=120_000, repeat=True)),
        (
            "EMIT STREAM PERIODIC 1s REPEAT WITH DELAY 1s AND TIMEOUT 5s",
            Emit(policy=EmitPolicy.PERIODIC, interval_ms=1_000, repeat=True, delay_ms=1_000, timeout_ms=5_000),
        ),
        ("EMIT ON UPDATE", Emit(policy=EmitPolicy.ON_UPDATE)),
        ("EMIT ON UPDATE WITH BATCH 1h", Emit(policy=EmitPolicy.ON_UPDATE, batch_ms=3_600_000)),
        (
            "EMIT ON UPDATE WITH DELAY 1s AND TIMEOUT 5s",
            Emit(policy=EmitPolicy.ON_UPDATE, delay_ms=1_000, timeout_ms=5_000),
        ),
        (
            "EMIT ON UPDATE WITH BATCH 1s WITH DELAY 1s AND TIMEOUT 5s",
            Emit(policy=EmitPolicy.ON_UPDATE, batch_ms=1_000, delay_ms=1_000, timeout_ms=5_000),
        ),
        (
            "EMIT CHANGELOG ON UPDATE WITH BATCH 1d",
            Emit(policy=EmitPolicy.ON_UPDATE, batch_ms=86_400_000, changelog=True),
        ),
        ("EMIT AFTER WINDOW CLOSE AND TIMEOUT 5s", Emit(policy=EmitPolicy.AFTER_WINDOW_CLOSE, timeout_ms=5_000)),
        (
            "EMIT AFTER KEY EXPIRE WITH MAXSPAN 500ms",
            Emit(policy=EmitPolicy.AFTER_KEY_EXPIRE, maxspan_ms=500),
        ),
        (
            "EMIT AFTER KEY EXPIRE IDENTIFIED BY ts WITH ONLY MAXSPAN 500ms AND TIMEOUT 2s",
            Emit(policy=EmitPolicy.AFTER_KEY_EXPIRE, identified_by="ts", only=True, maxspan_ms=500, timeout_ms=2_000),
        ),
        ("emit after window close with delay 1S;", Emit(policy=EmitPolicy.AFTER_WINDOW_CLOSE, delay_ms=1_000)),
    ],
)
def test_emit_forms(clause: str, emit: Emit) -> None:
    assert emit_of(clause) == emit


def test_emit_positions_point_at_each_clause() -> None:
    emit = emit_of("EMIT ON UPDATE\n  WITH BATCH 1s\n  WITH DELAY 2s AND TIMEOUT 5s", source="s")
    where = {part: (pos.line, pos.column) for part, pos in emit.positions}
    assert where == {"policy": (1, 28), "batch": (2, 3), "delay": (3, 3), "timeout": (3, 17)}
    assert emit.pos is not None and (emit.pos.line, emit.pos.column) == (1, 23)
    assert emit.pos_of("interval") == emit.pos  # not written: the EMIT keyword


@pytest.mark.parametrize(
    ("clause", "marker", "fragment"),
    [
        ("EMIT PERIODIC 1s ON UPDATE", "ON UPDATE", "a query emits by one policy, got PERIODIC and ON UPDATE"),
        (
            "EMIT AFTER WINDOW CLOSE PERIODIC 1s",
            "PERIODIC",
            "a query emits by one policy, got AFTER WINDOW CLOSE and PERIODIC",
        ),
        ("EMIT WITH BATCH 1s", "WITH", "WITH BATCH belongs to ON UPDATE"),
        ("EMIT PERIODIC 1s WITH BATCH 1s", "WITH", "WITH BATCH belongs to ON UPDATE"),
        ("EMIT WITH DELAY 1s", "WITH", "WITH DELAY follows an emit policy"),
        ("EMIT AND TIMEOUT 1s", "AND", "AND TIMEOUT follows an emit policy"),
        ("EMIT AFTER WINDOW CLOSE WITH DELAY 1s WITH DELAY 2s", "WITH DELAY 2s", "WITH DELAY is given twice"),
        ("EMIT PERIODIC 1s REPEAT REPEAT", "REPEAT REPEAT", "unexpected 'REPEAT'"),
        ("EMIT PERIODIC 1s WITH MAXSPAN 1s", "MAXSPAN", "expected 'batch' or 'delay'"),
        ("EMIT AFTER KEY EXPIRE AND TIMEOUT 1s", "AND", "expected 'identified' or 'with'"),
        ("EMIT PERIODIK 1s", "PERIODIK", "did you mean 'periodic'?"),
        ("EMIT ON UPDATE WITH BATCH", "", "unexpected end of the text"),
    ],
)
def test_emit_errors(clause: str, marker: str, fragment: str) -> None:
    text = f"SELECT count() FROM s {clause}"
    error = syntax_error(text)
    column = text.index(marker) + 1 if marker else len(text) + 1
    if marker == "REPEAT REPEAT":
        column += len("REPEAT ")
    assert (error.line, error.column) == (1, column), str(error)
    assert fragment in str(error)


# --- intervals ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("written", "ms"),
    [("500ms", 500), ("5s", 5_000), ("2m", 120_000), ("1h", 3_600_000), ("1d", 86_400_000), ("10MS", 10)],
)
def test_interval_units(written: str, ms: int) -> None:
    assert emit_of(f"EMIT PERIODIC {written}").interval_ms == ms
    assert parse_sql(f"SELECT count() FROM tumble(s, {written})").window.size_ms == ms


@pytest.mark.parametrize(
    ("interval", "fragment"),
    [
        ("0s", "an interval must be greater than 0, got '0s'"),
        ("1.5s", "an interval takes a whole number, got '1.5s'"),
        ("5", "interval '5' needs a unit: write it as 5s (units ms, s, m, h, d)"),
        ("5 s", "write an interval without a space, as 5s"),
        ("5sec", "interval '5sec': unknown interval unit 'sec'"),
        ("5 seconds", "interval '5 seconds': unknown interval unit 'seconds'"),
        ("5 events", "'5 events': a count of events only sizes a tumble window"),
    ],
)
def test_interval_errors(interval: str, fragment: str) -> None:
    error = syntax_error(f"SELECT count() FROM s\nEMIT PERIODIC {interval}")
    assert (error.line, error.column) == (2, 15), str(error)
    assert fragment in str(error)


# --- windows --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "window"),
    [
        ("device_utils", GlobalWindow("device_utils")),
        ("tumble(device_utils, 5s)", TumbleWindow("device_utils", size_ms=5_000)),
        ("TUMBLE(device_utils, ts, 5s)", TumbleWindow("device_utils", "ts", size_ms=5_000)),
        ("hop(device_utils, 1s, 5s)", HopWindow("device_utils", slide_ms=1_000, size_ms=5_000)),
        ("hop(device_utils, ts, 5s, 1s)", HopWindow("device_utils", "ts", slide_ms=5_000, size_ms=1_000)),
        ("session(device_utils, 5m)", SessionWindow("device_utils", gap_ms=300_000)),
        (
            "session(device_utils, ts, 5m, 1h)",
            SessionWindow("device_utils", "ts", gap_ms=300_000, max_length_ms=3_600_000),
        ),
        ("tumble(device_utils, 100 events)", CountWindow("device_utils", count=100)),
        ("tumble(device_utils, ts, 1 event)", CountWindow("device_utils", "ts", count=1)),
        ("tumble(device_utils, 100events)", CountWindow("device_utils", count=100)),
    ],
)
def test_windows(source: str, window: Window) -> None:
    assert parse_sql(f"SELECT count() FROM {source}").window == window


def test_window_positions() -> None:
    window = parse_sql("SELECT count()\nFROM session(s, ts, 5m, 1h)").window
    where = {part: (pos.line, pos.column) for part, pos in window.positions}
    assert where == {"stream": (2, 14), "time_attribute": (2, 17), "gap": (2, 21), "max_length": (2, 25)}
    assert window.pos is not None and (window.pos.line, window.pos.column) == (2, 6)


@pytest.mark.parametrize(
    ("source", "column", "fragment"),
    [
        ("tumbel(s, 5s)", 21, "unknown window function 'tumbel' — did you mean 'tumble'?"),
        ("tumble(5s)", 28, "the first argument of tumble() is the stream"),
        ("tumble(s, 5s, ts)", 35, "tumble() takes the time column right after the stream"),
        ("tumble(s)", 21, "tumble() got no size: write tumble(stream, [time column,] size)"),
        ("tumble(s, ts)", 21, "tumble() got no size"),
        ("tumble(s, 1s, 2s)", 35, "tumble() got 2 sizes"),
        ("hop(s, 1s)", 21, "hop() got 1 size: write hop(stream, [time column,] slide, size)"),
        ("hop(s, 1s, 2s, 3s)", 36, "hop() got 3 sizes"),
        (
            "session(s, 1s, 2s, 3s)",
            40,
            "session() got 3 sizes: write session(stream, [time column,] gap[, max length][, [start condition, "
        ),
        ("hop(s, 1s, 10 events)", 32, "a count of events sizes only a tumble window"),
        ("tumble(s, 5s, 10 events)", 35, "a count of events sizes only a tumble window"),
        ("tumble(s, 0 events)", 31, "a count of events must be greater than 0"),
        ("tumble(s, 0s)", 31, "an interval must be greater than 0"),
        ("tumble(s, 5 s)", 31, "write an interval without a space"),
        ("tumble(s, 5x)", 31, "unknown interval unit 'x'"),
        ("tumble(s 5s)", 30, "unexpected interval 5s"),
    ],
)
def test_window_errors(source: str, column: int, fragment: str) -> None:
    error = syntax_error(f"SELECT count() FROM {source}")
    assert (error.line, error.column) == (1, column), str(error)
    assert fragment in str(error)


# --- select items and expressions -----------------------------------------------------------------------


def test_keywords_are_case_insensitive_and_names_keep_their_case() -> None:
    q = parse_sql("select Device AS D, COUNT(*) as N from Tumble(S, 1s) where Device = 'x' group by Device")
    assert q.select == (SqlItem(Attr("Device"), "D"), SqlItem(Call("COUNT"), "N"))
    assert q.window.stream == "S"
    assert q.where == Binary("==", Attr("Device"), Literal("x", "string"))


@pytest.mark.parametrize(
    ("condition", "expr"),
    [
        ("a = 1", Binary("==", Attr("a"), Literal(1, "int"))),
        ("a == 1", Binary("==", Attr("a"), Literal(1, "int"))),
        ("a <> 1", Binary("!=", Attr("a"), Literal(1, "int"))),
        ("a != 1", Binary("!=", Attr("a"), Literal(1, "int"))),
        ("a <= 1.5", Binary("<=", Attr("a"), Literal(1.5, "double"))),
        ("a >= -2", Binary(">=", Attr("a"), Literal(-2, "int"))),
        ("a IN ('x')", Binary("==", Attr("a"), Literal("x", "string"))),
        (
            'a in ("x", "y", "z")',
            Binary(
                "or",
                Binary(
                    "or",
                    Binary("==", Attr("a"), Literal("x", "string")),
                    Binary("==", Attr("a"), Literal("y", "string")),
                ),
                Binary("==", Attr("a"), Literal("z", "string")),
            ),
        ),
        (
            "a NOT IN (1, 2)",
            Unary(
                "not",
                Binary("or", Binary("==", Attr("a"), Literal(1, "int")), Binary("==", Attr("a"), Literal(2, "int"))),
            ),
        ),
        (
            "NOT a > 1 AND b OR c",
            Binary("or", Binary("and", Unary("not", Binary(">", Attr("a"), Literal(1, "int"))), Attr("b")), Attr("c")),
        ),
        ("flag = true", Binary("==", Attr("flag"), Literal(True, "bool"))),
        ("flag = FALSE", Binary("==", Attr("flag"), Literal(False, "bool"))),
        (
            "(a + b) * 2 % 3 - c / 4 > 0",
            Binary(
                ">",
                Binary(
                    "-",
                    Binary("%", Binary("*", Binary("+", Attr("a"), Attr("b")), Literal(2, "int")), Literal(3, "int")),
                    Binary("/", Attr("c"), Literal(4, "int")),
                ),
                Literal(0, "int"),
            ),
        ),
    ],
)
def test_expressions(condition: str, expr: object) -> None:
    assert parse_sql(f"SELECT count() FROM s WHERE {condition}").where == expr


def test_strings_in_either_quotes_and_qualified_names() -> None:
    q = parse_sql("SELECT s.a, count() FROM s WHERE a = 'x;y' OR a = \"it's\" GROUP BY s.a")
    assert q.select[0] == SqlItem(Attr("a", "s"))
    assert q.where == Binary(
        "or", Binary("==", Attr("a"), Literal("x;y", "string")), Binary("==", Attr("a"), Literal("it's", "string"))
    )


def test_count_star_and_count_empty_are_the_same_call() -> None:
    q = parse_sql("SELECT count(*) AS a, count() AS b, Count ( * ) AS c FROM s")
    assert [item.expr for item in q.select] == [Call("count"), Call("count"), Call("Count")]


def test_function_constants_and_lists() -> None:
    q = parse_sql("SELECT kll(latency, [0.5, 0.99], 400) AS lat FROM s")
    assert q.select[0].expr == Call(
        "kll", (Attr("latency"), ListLiteral((Literal(0.5, "double"), Literal(0.99, "double"))), Literal(400, "int"))
    )


@pytest.mark.parametrize(
    ("text", "line", "column", "fragment"),
    [
        ("SELECT * FROM tumble(s, 5s)", 1, 8, "SELECT * is not allowed in an aggregation query"),
        ("SELECT a, * FROM s", 1, 11, "SELECT * is not allowed"),
        ("SELECT sum(*) FROM s", 1, 8, "only count(*) takes '*': write sum(<column>)"),
        ("SELECT count()\nFROM s\nWHRE a > 1", 3, 1, "did you mean 'where'?"),
        ("SELECT count() FORM s", 1, 16, "did you mean 'from'?"),
        ("SELECT count()", 1, 15, "unexpected end of the text at line 1, column 15; expected 'as', ',' or 'from'"),
        ("SELECT count() FROM", 1, 20, "expected a stream name or a window (tumble(...), hop(...) or session(...))"),
        ("SELECT count() FROM s WHERE", 1, 28, "expected a condition (such as cpu_usage > 99)"),
        ("SELECT count() FROM s GROUP BY", 1, 31, "expected a column to group by"),
        ("SELECT count() FROM s HAVING", 1, 29, "expected a condition (such as cnt > 300)"),
        ("SELECT count() FROM s WHERE a IN ()", 1, 35, "unexpected ')'"),
        ("SELECT count() FROM s WHERE a = 'x", 1, 33, "unterminated string"),
        ("SELECT count() AS 5 FROM s", 1, 19, "unexpected number 5 at line 1, column 19; expected a name"),
        ("SELECT count() FROM s JOIN t", 1, 23, "JOIN is not supported yet"),
        ("SELECT count() FROM s LIMIT 5", 1, 23, "LIMIT is not supported in continuous queries"),
        ("WITH x AS (SELECT 1) SELECT count() FROM x", 1, 20, "expected 'as', ',' or 'from'"),
    ],
)
def test_syntax_errors(text: str, line: int, column: int, fragment: str) -> None:
    error = syntax_error(text)
    assert (error.line, error.column) == (line, column), str(error)
    assert fragment in str(error)
    assert error.snippet is not None and "^" in error.snippet


def test_a_caret_under_the_offending_token() -> None:
    error = syntax_error("SELECT count()\nFROM tumble(s, 5s)\nEMIT PERIODIC 1s ON UPDATE")
    assert error.snippet is not None
    source_line, caret_line = error.snippet.splitlines()
    assert caret_line.index("^") == source_line.index("ON UPDATE")


# --- continuous queries in app files --------------------------------------------------------------------

APP = """@app:name('Monitoring')
@eventTime(attribute='ts')
define stream device_utils (device string, cpu_usage double, ts long);
define aggregation CpuAggregation from device_utils
select device, avg(cpu_usage) as avgCpu
group by device aggregate by ts every sec ... hour;

-- a continuous query, named as Siddhi names queries
@info(name='cpu_alerts')
SELECT device, max(cpu_usage) AS top
FROM tumble(device_utils, 5s)   -- a ';' in a comment does not end it
WHERE device != 'a;b' /* nor in a block; comment */
GROUP BY device
EMIT AFTER WINDOW CLOSE WITH DELAY 1s;

select count() AS n from device_utils emit periodic 1s;
from CpuAggregation within "2024-**-** **:**:**" per "hours" select *;
@info(name = 'busy') Select device, count(*) AS n From hop(device_utils, 1s, 5s) Group By device
"""


def test_app_mixes_definitions_retrievals_and_continuous_queries() -> None:
    app = parse_app(APP)
    assert app.name == "Monitoring"
    assert [s.event_time for s in app.streams] == ["ts"]
    assert [a.name for a in app.aggregations] == ["CpuAggregation"]
    assert [q.aggregation for q in app.queries] == ["CpuAggregation"]
    alerts, count, busy = app.continuous
    assert (alerts.name, count.name, busy.name) == ("cpu_alerts", None, "busy")
    assert alerts.annotations == (Annotation("info", (("name", "cpu_alerts"),)),)
    assert alerts.pos is not None and (alerts.pos.line, alerts.pos.column) == (10, 1)
    assert alerts.where == Binary("!=", Attr("device"), Literal("a;b", "string"))
    assert alerts.text.startswith("SELECT device, max(cpu_usage) AS top\nFROM")
    assert alerts.text.endswith("WITH DELAY 1s")
    assert alerts.emit.delay_ms == 1_000
    assert count.emit.interval_ms == 1_000
    assert isinstance(busy.window, HopWindow)
    assert alerts.aggregates == (AggregateItem("max", Attr("cpu_usage"), "_agg0"),)  # validated


def test_errors_in_an_app_point_into_the_whole_file() -> None:
    error = app_error(APP.replace("EMIT AFTER WINDOW CLOSE WITH DELAY 1s;", "EMIT AFTER WINDOW CLOSE WITH DELAY 1;"))
    assert (error.line, error.column) == (14, 36), str(error)
    assert "interval '1' needs a unit" in str(error)
    assert error.snippet is not None and error.snippet.splitlines()[0].endswith("EMIT AFTER WINDOW CLOSE WITH DELAY 1;")
    error = app_error(APP.replace("@info(name = 'busy') Select device,", "@info(name = 'busy') Select device,,"))
    assert (error.line, error.column) == (18, 36), str(error)
    source_line, caret_line = (error.snippet or "").splitlines()
    assert source_line.endswith(
        "@info(name = 'busy') Select device,, count(*) AS n From hop(device_utils, 1s, 5s) Group By device"
    )
    assert caret_line.index("^") == source_line.index(",,") + 1


@pytest.mark.parametrize(
    ("text", "line", "column", "fragment"),
    [
        (
            "SELECT count() FROM device_utils\ndefine stream t (a int);",
            2,
            1,
            "expected ';' to end the statement before it",
        ),
        (
            "SELECT count() FROM device_utils\nselect count() from t;",
            2,
            1,
            "expected ';' to end the statement before it",
        ),
        (
            "SELECT count() FROM device_utils\n@info(name='x') select 1;",
            2,
            1,
            "expected ';' to end the statement before it",
        ),
        ("define stream t (a int)\nSELECT count() FROM t;", 2, 1, "expected ';' to end the statement before it"),
        ("selec count() FROM device_utils", 1, 1, "'select ...'"),
        ("@info(name='') SELECT count() FROM device_utils", 1, 1, "@info takes a query name"),
        ("@eventTime('ts') SELECT count() FROM device_utils", 1, 1, "@eventTime belongs on define stream"),
        ("SELECT count() FROM device_utils WHERE a = 'x", 1, 44, "unterminated string"),
        ("SELECT count() FROM device_utils /* open", 1, 34, "unterminated comment"),
    ],
)
def test_statement_errors(text: str, line: int, column: int, fragment: str) -> None:
    error = app_error(STREAMS + text)
    assert (error.line, error.column) == (line + 4, column), str(error)
    assert fragment in str(error)


def test_define_aggregation_select_still_works_next_to_sql() -> None:
    text = STREAMS + (
        "define aggregation A from device_utils select device, max(cpu_usage) as m group by device "
        "aggregate by ts every sec;\nSELECT device, max(cpu_usage) AS m FROM device_utils GROUP BY device;"
    )
    app = parse_app(text)
    assert app.aggregations[0].select[1] == AggregateItem("max", Attr("cpu_usage"), "m")
    assert app.continuous[0].keys == ("device",)


def test_parse_continuous_takes_annotations_and_a_semicolon() -> None:
    app = parse_app(STREAMS)
    q = parse_continuous("@info(name='q')\nSELECT count() AS n FROM t;", app)
    assert q.name == "q"
    assert q.pos is not None and (q.pos.line, q.pos.column) == (2, 1)
    assert q.outputs == (("n", Attr("_agg0")),)


def test_continuous_query_names_are_unique() -> None:
    text = STREAMS + "@info(name='q') SELECT count() FROM t;\n@info(name='q') SELECT count() FROM t;"
    error = app_error(text)
    assert (error.line, error.column) == (6, 17)
    assert "continuous query name 'q' is given twice (first at line 5)" in str(error)


def test_app_without_continuous_queries_is_unchanged() -> None:
    app = parse_app(STREAMS)
    assert app.continuous == ()


def truncations() -> list[str]:
    cuts = [m.start() for m in re.finditer(r"\s", APP)]
    return [APP[:cut] + "\n ," for cut in cuts[::2]]


@pytest.mark.parametrize("text", truncations(), ids=lambda t: f"cut{len(t)}")
def test_broken_texts_never_leak_lark_names(text: str) -> None:
    """Cut the app anywhere and add junk: the error is ours, positioned and in words."""
    error = app_error(text)
    assert error.line is not None and error.column is not None
    assert error.snippet and "^" in error.snippet


# --- @eventTime on streams -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "annotation", ["@eventTime('ts')", "@eventTime(attribute='ts')", '@EVENTTIME(Attribute = "ts")']
)
def test_event_time_annotation(annotation: str) -> None:
    app = parse_app(f"{annotation}\ndefine stream s (a int, ts long);")
    assert app.streams[0].event_time == "ts"


def test_streams_without_event_time() -> None:
    assert parse_app("define stream s (a int, ts long);").streams[0].event_time is None


@pytest.mark.parametrize(
    ("annotation", "fragment"),
    [
        ("@eventTime", "@eventTime takes the name of the event-time attribute"),
        ("@eventTime(column='ts')", "unknown element 'column' of @eventTime (it takes attribute=..., as in "),
        ("@eventTime('ts', 'a')", "@eventTime takes 1 value, as in @eventTime('ts'); got 'a' too"),
        ("@eventTime(attribute='ts', 'a')", "@eventTime takes one value, as in @eventTime('ts'); got 2"),
        ("@eventTime('ts') @eventTime('a')", "annotation @eventTime is given twice"),
        ("@eventTime('tss')", "@eventTime of stream s: unknown attribute of stream s 'tss' — did you mean 'ts'?"),
        ("@eventTime('a')", "the event-time attribute 'a' must be long (epoch ms) or string"),
        ("@eventTime('ts') @store(type='rdbms')", "@store belongs on a define aggregation, not on define stream s"),
    ],
)
def test_event_time_errors(annotation: str, fragment: str) -> None:
    error = app_error(f"{annotation}\ndefine stream s (a int, ts long);")
    assert error.line == 1, str(error)
    assert fragment in str(error)


def test_event_time_on_an_aggregation_is_refused() -> None:
    text = (
        "define stream s (a int, ts long);\n"
        "@eventTime('ts')\n"
        "define aggregation A from s select sum(a) as x aggregate every sec;"
    )
    error = app_error(text)
    assert (error.line, error.column) == (2, 1)
    assert "@eventTime belongs on define stream; an aggregation names its event time with 'aggregate by" in str(error)


PROTON_STREAM = "@eventTime('ts') define stream s (id string, location string, value double, ts long);\n"


@pytest.mark.parametrize(
    ("query", "column", "message"),
    [
        # Proton's tests/stream/test_stream_smoke/0006_session_window.json writes these forms.
        ("SELECT max(value), id FROM session(s, ts, 2s) PARTITION BY id + 1 GROUP BY window_start;", 60,
         "PARTITION BY takes stream attributes, got"),
        ("SELECT id, count() FROM session(s, 10s) GROUP BY id EMIT ON UPDATE TIMEOUT 1s;", 68,
         "EMIT TIMEOUT stands alone; after ON UPDATE write AND TIMEOUT 1s"),
    ],
)
def test_proton_constructs_not_supported_yet_are_named_where_written(query: str, column: int, message: str) -> None:
    with pytest.raises(DefinitionError) as info:
        parse_app(PROTON_STREAM + query)
    assert message in info.value.message
    assert (info.value.line, info.value.column) == (2, column)


@pytest.mark.parametrize(
    ("bounds", "kept"),
    [
        ("[location='ca', location='sh']", (True, True)),
        ("[location='ca', location='sh')", (True, False)),
        ("(location='ca', location='sh']", (False, True)),
        ("(location='ca', location='sh')", (False, False)),
        ("location='ca', location<>'ca'", (True, True)),
    ],
)
def test_session_conditions_keep_or_leave_out_their_events(bounds: str, kept: tuple[bool, bool]) -> None:
    """Proton's brackets (0006_session_window.json, ids 16 to 22): '[' / ']' keep the starting / ending event."""
    app = parse_app(PROTON_STREAM + f"SELECT count() FROM session(s, ts, 5s, {bounds}) GROUP BY window_start;")
    window = app.continuous[0].window
    assert (window.start_inclusive, window.end_inclusive) == kept
    assert str(window.start_condition) == "(location == 'ca')"


def test_emit_timeout_alone_is_the_default_policy_with_a_timeout() -> None:
    """Proton's ``EMIT TIMEOUT 1s`` (0006_session_window.json, id 23)."""
    query = parse_app(PROTON_STREAM + "SELECT id, count() FROM session(s, ts, 10s) GROUP BY id EMIT TIMEOUT 1s;")
    emit = query.continuous[0].emit
    assert (emit.policy, emit.timeout_ms, emit.delay_ms) == (EmitPolicy.AFTER_WINDOW_CLOSE, 1000, None)
