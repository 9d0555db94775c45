"""validate_continuous: names checked against the stream, aggregates split out as _agg<i>, outputs and
HAVING rewritten over them, EMIT defaults and rules; every refusal at the line and column of its token."""

from __future__ import annotations

import dataclasses

import pytest

from tests.errors import refused_at
from tests.seed003 import SEED_GLOBAL_PERIODIC, SEED_ON_UPDATE, SEED_TUMBLE_DELAY_TYPO
from tiltframe.errors import DefinitionError
from tiltframe.lang import parse_app, parse_continuous
from tiltframe.lang.checks.continuous_queries import DEFAULT_PERIODIC_MS, validate_continuous
from tiltframe.lang.checks.cross_references import validate_app
from tiltframe.model.aggregations import AggregateItem
from tiltframe.model.continuous import ContinuousQuery, Emit, EmitPolicy, SqlItem
from tiltframe.model.expressions import Attr, Binary, Call, Literal, Unary
from tiltframe.model.windows import CountWindow, GlobalWindow, HopWindow, SessionWindow, TumbleWindow, Window

STREAMS = """@eventTime('ts')
define stream device_utils (device string, cpu_usage double, ts long, mem int, note string);
define stream car_live_data (cid string, speed_kmh double, ts long);
define stream t (x int);
@eventTime(attribute='end_time')
define stream otel_traces (trace_id string, name string, start_time long, end_time long, latency double);
define stream stream (a int);
"""
APP = parse_app(STREAMS)


def valid(sql: str) -> ContinuousQuery:
    return parse_continuous(sql, APP)


def refused(sql: str, marker: str, fragment: str, *, occurrence: int = 0) -> DefinitionError:
    return refused_at(valid, sql, marker, fragment, occurrence=occurrence)


# --- the seed's queries ---------------------------------------------------------------------------------


def test_seed_global_periodic_as_written() -> None:
    """The seed writes a global aggregation without GROUP BY: the columns selected on their own are its keys,
    the same query as with GROUP BY device."""
    q = valid(SEED_GLOBAL_PERIODIC)
    assert q.window == GlobalWindow("device_utils", time_attribute="ts")
    assert q.keys == ("device",)
    assert q.aggregates == (AggregateItem("count", None, "_agg0"),)
    assert q.outputs == (("device", Attr("device")), ("count()", Attr("_agg0")))
    assert q.output_names == ("device", "count()")
    assert q.where == Binary(">", Attr("cpu_usage"), Literal(99, "int"))
    assert q.emit == Emit(policy=EmitPolicy.PERIODIC, interval_ms=5_000)
    grouped = valid(SEED_GLOBAL_PERIODIC.replace("WHERE cpu_usage > 99", "WHERE cpu_usage > 99\nGROUP BY device"))
    assert (grouped.keys, grouped.aggregates, grouped.outputs) == (q.keys, q.aggregates, q.outputs)


def test_implicit_keys_are_the_columns_selected_on_their_own() -> None:
    q = valid("SELECT device_utils.device AS d, count() AS n, max(cpu_usage), device AS again FROM device_utils")
    assert q.keys == ("device",)
    q = valid("SELECT window_start, device, count() FROM tumble(device_utils, 5s)")
    assert q.keys == ("device",)
    assert q.output_names == ("window_start", "device", "count()")
    assert valid("SELECT count() FROM device_utils").keys == ()
    refused(
        "SELECT device, cpu_usage * 2 AS double_cpu, count() FROM device_utils",
        "cpu_usage",
        "column 'cpu_usage' in SELECT is neither a key nor inside an aggregate function: without GROUP BY the keys "
        "are the columns selected on their own; select cpu_usage on its own, write GROUP BY or aggregate it",
    )
    refused(
        "SELECT device, count() FROM tumble(device_utils, 5s) GROUP BY window_start",
        "device",
        "column 'device' in SELECT is neither in GROUP BY nor inside an aggregate function",
    )


def test_seed_tumble_defaults_to_after_window_close() -> None:
    q = valid("SELECT device, max(cpu_usage)\nFROM tumble(device_utils, 5s)\nGROUP BY device, window_end")
    assert q.window == TumbleWindow("device_utils", time_attribute="ts", size_ms=5_000)
    assert q.keys == ("device",)  # window_end in GROUP BY means the window
    assert q.aggregates == (AggregateItem("max", Attr("cpu_usage"), "_agg0"),)
    assert q.outputs == (("device", Attr("device")), ("max(cpu_usage)", Attr("_agg0")))
    assert q.emit == Emit(policy=EmitPolicy.AFTER_WINDOW_CLOSE)


def test_seed_typo_widnow_end() -> None:
    error = refused(SEED_TUMBLE_DELAY_TYPO, "widnow_end", "unknown column 'widnow_end' — did you mean 'window_end'?")
    assert (error.line, error.column) == (3, 18)
    assert valid(SEED_TUMBLE_DELAY_TYPO.replace("widnow_end", "window_end")).emit == Emit(
        policy=EmitPolicy.AFTER_WINDOW_CLOSE, delay_ms=2_000
    )


def test_seed_periodic_having_on_an_output_name() -> None:
    q = valid(
        "SELECT window_start, count() AS cnt\nFROM tumble(car_live_data, 5s)\nGROUP BY window_start\n"
        "HAVING cnt > 300\nEMIT PERIODIC 1s"
    )
    assert q.window.time_attribute is None  # car_live_data declares no @eventTime: arrival time
    assert q.keys == ()
    assert q.outputs == (("window_start", Attr("window_start")), ("cnt", Attr("_agg0")))
    assert q.having == Binary(">", Attr("_agg0"), Literal(300, "int"))
    assert q.emit == Emit(policy=EmitPolicy.PERIODIC, interval_ms=1_000)


def test_seed_periodic_repeat() -> None:
    q = valid("SELECT count() FROM t\nEMIT PERIODIC 3s REPEAT")
    assert q.emit == Emit(policy=EmitPolicy.PERIODIC, interval_ms=3_000, repeat=True)
    assert q.outputs == (("count()", Attr("_agg0")),)


@pytest.mark.parametrize(
    ("suffix", "emit"),
    [
        ("", Emit(policy=EmitPolicy.ON_UPDATE)),
        (" WITH DELAY 2s", Emit(policy=EmitPolicy.ON_UPDATE, delay_ms=2_000)),
        (" WITH BATCH 2s", Emit(policy=EmitPolicy.ON_UPDATE, batch_ms=2_000)),
    ],
)
def test_seed_on_update(suffix: str, emit: Emit) -> None:
    q = valid(SEED_ON_UPDATE + suffix)
    assert q.keys == ("cid",)
    assert q.outputs == (("window_start", Attr("window_start")), ("cid", Attr("cid")), ("cnt", Attr("_agg0")))
    assert q.emit == emit


def test_seed_timeout_note() -> None:
    q = valid("SELECT window_start, count() as count FROM tumble(stream,2s)\nGROUP BY window_start")
    assert q.stream == "stream"
    assert q.outputs == (("window_start", Attr("window_start")), ("count", Attr("_agg0")))


def test_seed_key_expire_without_the_cte() -> None:
    q = valid(
        "SELECT trace_id, min(start_time) AS start_ts, max(end_time) AS end_ts, count() AS spans\n"
        "FROM otel_traces\nGROUP BY trace_id\n"
        "EMIT AFTER KEY EXPIRE IDENTIFIED BY end_time WITH MAXSPAN 500ms AND TIMEOUT 2s"
    )
    assert q.keys == ("trace_id",)
    assert q.emit == Emit(
        policy=EmitPolicy.AFTER_KEY_EXPIRE, identified_by="end_time", maxspan_ms=500, timeout_ms=2_000
    )


# --- streams, columns and the time attribute ------------------------------------------------------------


def test_unknown_stream() -> None:
    refused(
        "SELECT count() FROM tumble(device_util, 5s)",
        "device_util",
        "continuous query reads from unknown stream 'device_util' — did you mean 'device_utils'?",
    )


@pytest.mark.parametrize(
    ("sql", "marker", "fragment"),
    [
        ("SELECT devise, count() FROM device_utils GROUP BY device", "devise", "did you mean 'device'?"),
        ("SELECT count() FROM device_utils WHERE cpu_usge > 1", "cpu_usge", "did you mean 'cpu_usage'?"),
        ("SELECT sum(memory) FROM device_utils", "memory", "unknown column 'memory' — did you mean 'mem'?"),
        ("SELECT count() AS n FROM t HAVING nn > 1", "nn", "unknown column 'nn' — did you mean 'n'?"),
        ("SELECT d.x, count() FROM t GROUP BY x", "d.x", "'d.x' names d, but the query reads stream t"),
    ],
)
def test_unknown_columns(sql: str, marker: str, fragment: str) -> None:
    refused(sql, marker, fragment)


def test_qualified_names_are_the_stream_and_are_dropped() -> None:
    q = valid("SELECT t.x, count() FROM t WHERE t.x > 1 GROUP BY t.x")
    assert q.keys == ("x",)
    assert q.outputs[0] == ("x", Attr("x"))
    assert q.where == Binary(">", Attr("x"), Literal(1, "int"))


@pytest.mark.parametrize(
    ("sql", "marker"),
    [
        ("SELECT window_start, count() FROM t", "window_start"),
        ("SELECT count() FROM t GROUP BY window_end", "window_end"),
        ("SELECT count() FROM t WHERE window_end > 0", "window_end"),
        ("SELECT count() AS n FROM t HAVING window_start > 0", "window_start"),
    ],
)
def test_window_columns_only_in_windowed_queries(sql: str, marker: str) -> None:
    refused(sql, marker, f"{marker} exists only in windowed queries: read FROM tumble(t, 5s), hop(...) or session(...)")


def test_window_columns_are_not_known_in_where() -> None:
    refused(
        "SELECT count() FROM tumble(t, 1s) WHERE window_start > 0",
        "window_start",
        "window_start is only known once events are in windows; it cannot be used in WHERE",
    )


def test_window_columns_may_be_selected_without_group_by() -> None:
    q = valid("SELECT window_start, window_end, cid, avg(speed_kmh) AS v FROM hop(car_live_data, 1s, 10s) GROUP BY cid")
    assert q.keys == ("cid",)
    assert q.output_names == ("window_start", "window_end", "cid", "v")
    assert q.window == HopWindow("car_live_data", slide_ms=1_000, size_ms=10_000)


@pytest.mark.parametrize(
    ("source", "time_attribute"),
    [
        ("tumble(device_utils, 5s)", "ts"),  # the stream's @eventTime
        ("tumble(device_utils, note, 5s)", "note"),  # the window call's column, a string
        ("tumble(car_live_data, 5s)", None),  # neither: arrival time
        ("tumble(car_live_data, ts, 5s)", "ts"),
        ("session(otel_traces, 1m)", "end_time"),
        ("tumble(device_utils, 10 events)", "ts"),
        ("device_utils", "ts"),  # a global aggregation: the stream's
        ("car_live_data", None),
    ],
)
def test_time_attribute(source: str, time_attribute: str | None) -> None:
    assert valid(f"SELECT count() FROM {source}").window.time_attribute == time_attribute


@pytest.mark.parametrize(
    ("source", "marker", "fragment"),
    [
        ("tumble(device_utils, tss, 5s)", "tss", "unknown attribute of stream device_utils 'tss' — did you mean 'ts'?"),
        ("tumble(device_utils, mem, 5s)", "mem", "the time column 'mem' must be long (epoch ms) or string"),
        ("hop(car_live_data, speed_kmh, 1s, 5s)", "speed_kmh", "must be long (epoch ms) or string"),
    ],
)
def test_time_column_errors(source: str, marker: str, fragment: str) -> None:
    refused(f"SELECT count() FROM {source}", marker, fragment)


# --- windows ---------------------------------------------------------------------------------------------


def test_session_max_length_must_exceed_the_gap() -> None:
    refused(
        "SELECT count() FROM session(t, 5m, 5m)",
        "5m",
        "the max length of a session (5m) must be longer than its gap (5m)",
        occurrence=1,
    )
    assert valid("SELECT count() FROM session(t, 5m, 1h)").window.max_length_ms == 3_600_000


def test_hop_slide_need_not_divide_the_size() -> None:
    assert valid("SELECT count() FROM hop(t, 3s, 10s)").window.slide_ms == 3_000
    assert valid("SELECT count() FROM hop(t, 10s, 3s)").window.size_ms == 3_000  # sampling windows


@pytest.mark.parametrize(
    ("window", "fragment"),
    [
        (TumbleWindow("t"), "a tumble window needs its size"),
        (TumbleWindow("t", size_ms=0), "the size of a window must be greater than 0"),
        (HopWindow("t", size_ms=1_000, slide_ms=-1), "the slide of a window must be greater than 0"),
        (HopWindow("t", size_ms=1_000), "a hop window needs its slide"),
        (SessionWindow("t", gap_ms=5, max_length_ms=5), "must be longer than its gap"),
        (CountWindow("t", count=0), "the count of a window must be greater than 0"),
    ],
)
def test_windows_built_in_python(window: Window, fragment: str) -> None:
    query = ContinuousQuery(stream="t", window=window, select=(SqlItem(Call("count"), "n"),))
    with pytest.raises(DefinitionError, match=fragment):
        validate_continuous(APP, query)


@pytest.mark.parametrize(("kind", "size"), [(CountWindow, {"count": 5, "size_ms": 5}), (GlobalWindow, {"size_ms": 5})])
def test_a_window_takes_no_size_of_another_kind(kind: type[Window], size: dict[str, int]) -> None:
    """A count window takes no size, nor does a global aggregation: their classes have no such field."""
    with pytest.raises(TypeError, match="size_ms"):
        kind("t", **size)


# --- aggregates ------------------------------------------------------------------------------------------


def test_identical_calls_share_one_aggregate() -> None:
    q = valid(
        "SELECT device, avg(cpu_usage) AS a, AVG(cpu_usage) + 1 AS b, Avg(device_utils.cpu_usage) AS c, "
        "count(*) AS n, count() AS m FROM device_utils GROUP BY device HAVING avg(cpu_usage) > 1 AND sum(mem) > 2"
    )
    assert q.aggregates == (
        AggregateItem("avg", Attr("cpu_usage"), "_agg0"),
        AggregateItem("count", None, "_agg1"),
        AggregateItem("sum", Attr("mem"), "_agg2"),
    )
    assert dict(q.outputs) == {
        "device": Attr("device"),
        "a": Attr("_agg0"),
        "b": Binary("+", Attr("_agg0"), Literal(1, "int")),
        "c": Attr("_agg0"),
        "n": Attr("_agg1"),
        "m": Attr("_agg1"),
    }
    assert q.having == Binary(
        "and", Binary(">", Attr("_agg0"), Literal(1, "int")), Binary(">", Attr("_agg2"), Literal(2, "int"))
    )


@pytest.mark.parametrize(
    ("call", "function"),
    [
        ("stddev_pop(cpu_usage)", "stdDev"),
        ("STDDEV_SAMP(cpu_usage)", "stdDevSample"),
        ("var_pop(cpu_usage)", "var"),
        ("var_samp(cpu_usage)", "varSample"),
        ("earliest(cpu_usage)", "first"),
        ("latest(note)", "last"),
        ("uniq(device)", "distinctCount"),
        ("Sum(cpu_usage)", "sum"),
        ("MIN(mem)", "min"),
        ("mean(mem)", "avg"),
    ],
)
def test_function_names_are_case_insensitive_and_take_timeplus_aliases(call: str, function: str) -> None:
    assert valid(f"SELECT {call} AS v FROM device_utils").aggregates[0].function == function


def test_function_constants_become_params() -> None:
    q = valid("SELECT uniq(device, 14) AS u, kll(cpu_usage, [0.5, 0.99], 400) AS k FROM tumble(device_utils, 1m)")
    assert [(a.function, a.params) for a in q.aggregates] == [("distinctCount", (14,)), ("kll", ((0.5, 0.99), 400))]


def test_a_quantile_sketch_gives_one_output_per_quantile() -> None:
    q = valid("SELECT name, kll(latency, [0.5, 0.99]) AS lat FROM otel_traces GROUP BY name HAVING lat_p99 > 100")
    assert q.outputs == (("name", Attr("name")), ("lat_p50", Attr("_agg0_p50")), ("lat_p99", Attr("_agg0_p99")))
    assert q.having == Binary(">", Attr("_agg0_p99"), Literal(100, "int"))


@pytest.mark.parametrize(
    ("sql", "marker", "fragment"),
    [
        (
            "SELECT sum(max(cpu_usage)) AS s FROM t",
            "max",
            "aggregate max() cannot be used inside the argument of sum()",
        ),
        (
            "SELECT count() FROM device_utils WHERE avg(cpu_usage) > 1",
            "avg",
            "aggregate avg() cannot be used in WHERE, which filters events before they are aggregated: use HAVING",
        ),
        ("SELECT cunt() FROM t", "cunt", "unknown function 'cunt' — did you mean 'count'?"),
        ("SELECT count() FROM t WHERE abs(x) > 1", "abs", "unknown function 'abs'"),
        ("SELECT count() AS n FROM t HAVING lenght(n) > 1", "lenght", "unknown function 'lenght'"),
        ("SELECT sum() FROM t", "sum", "sum() needs an argument, such as sum(<column>)"),
        ("SELECT sum(note) FROM device_utils", "sum", "sum() needs a numeric argument in SELECT, got string"),
        ("SELECT sum(x, 2) FROM t", "2", "sum() takes one argument, got 2"),
        ("SELECT kll(x, [1.5]) AS k FROM t", "[1.5]", "a quantile must be a number from 0 to 1, got 1.5"),
        ("SELECT uniq(x, 30) AS u FROM t", "30", "lg_k must be an integer from 4 to 21, got 30"),
        ("SELECT kll(x, x) AS k FROM t", "x)", "'x' is not a constant"),
        ("SELECT kll(x, [0.5]) FROM t", "kll", "kll(...) gives one column per quantile: name it"),
        ("SELECT kll(x, [0.5]) + 1 AS k FROM t", "kll", "kll() gives one column per quantile and cannot be part of"),
        ("SELECT sum(x) FROM t WHERE x + 1", "x + 1", "WHERE needs a condition (true or false)"),
        ("SELECT sum(x) FROM t WHERE x * 'a' > 1", "x * 'a'", "operator '*' needs numbers"),
        ("SELECT count() FROM t WHERE x IN ([1, 2])", "[1, 2]", "a list such as [1, 2] is only a constant"),
    ],
)
def test_aggregate_errors(sql: str, marker: str, fragment: str) -> None:
    refused(sql, marker, fragment)


# --- grouping ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sql", "marker", "occurrence", "fragment"),
    [
        ("SELECT x + 1 FROM tumble(t, 1s)", "x", 0, "column 'x' in SELECT is neither a key nor inside an aggregate"),
        ("SELECT x + 1 AS y, count() FROM t", "x", 0, "neither a key nor inside an aggregate"),
        (
            "SELECT device, count() FROM device_utils GROUP BY device HAVING mem > 1",
            "mem",
            0,
            "column 'mem' in HAVING is neither in GROUP BY nor inside an aggregate function",
        ),
        ("SELECT count() FROM t GROUP BY x + 1", "x + 1", 0, "GROUP BY takes columns"),
        ("SELECT count() FROM t GROUP BY x, x", "x", 1, "column 'x' is listed twice in GROUP BY"),
        ("SELECT x FROM t GROUP BY x", "SELECT", 0, "a continuous query needs an aggregate function"),
        ("SELECT count() AS n, sum(x) AS n FROM t", "sum", 0, "output column 'n' is selected twice"),
        ("SELECT count() AS _agg1 FROM t", "count", 0, "'_agg1' is a name tiltframe keeps for its aggregates"),
    ],
)
def test_grouping_errors(sql: str, marker: str, occurrence: int, fragment: str) -> None:
    refused(sql, marker, fragment, occurrence=occurrence)


def test_a_window_without_aggregates_groups_distinct_keys() -> None:
    q = valid("SELECT window_start, cid FROM tumble(car_live_data, 5s) GROUP BY window_start, cid")
    assert (q.keys, q.aggregates) == (("cid",), ())


def test_having_uses_aggregates_keys_window_columns_and_outputs() -> None:
    q = valid(
        "SELECT window_end AS we, cid, max(speed_kmh) AS top FROM tumble(car_live_data, 5s) GROUP BY cid "
        "HAVING top > 100 AND cid != 'x' AND window_start > 0 AND count() > 3 AND we > 0"
    )
    assert q.having == Binary(
        "and",
        Binary(
            "and",
            Binary(
                "and",
                Binary(
                    "and",
                    Binary(">", Attr("_agg0"), Literal(100, "int")),
                    Binary("!=", Attr("cid"), Literal("x", "string")),
                ),
                Binary(">", Attr("window_start"), Literal(0, "int")),
            ),
            Binary(">", Attr("_agg1"), Literal(3, "int")),
        ),
        Binary(">", Attr("window_end"), Literal(0, "int")),
    )


def test_an_output_name_in_having_wins_over_a_column() -> None:
    """As in ClickHouse: `max(cpu_usage) AS cpu_usage` makes cpu_usage in HAVING the aggregate."""
    q = valid("SELECT max(cpu_usage) AS cpu_usage FROM device_utils HAVING cpu_usage > 90")
    assert q.having == Binary(">", Attr("_agg0"), Literal(90, "int"))


def test_where_keeps_in_and_not() -> None:
    q = valid("SELECT count() FROM t WHERE x NOT IN (1, 2) AND NOT x = 3")
    assert q.where == Binary(
        "and",
        Unary(
            "not", Binary("or", Binary("==", Attr("x"), Literal(1, "int")), Binary("==", Attr("x"), Literal(2, "int")))
        ),
        Unary("not", Binary("==", Attr("x"), Literal(3, "int"))),
    )


# --- EMIT -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sql", "emit"),
    [
        ("SELECT count() FROM t", Emit(policy=EmitPolicy.PERIODIC, interval_ms=DEFAULT_PERIODIC_MS)),
        ("SELECT count() FROM t EMIT STREAM", Emit(policy=EmitPolicy.PERIODIC, interval_ms=2_000)),
        ("SELECT count() FROM t EMIT CHANGELOG", Emit(policy=EmitPolicy.PERIODIC, interval_ms=2_000, changelog=True)),
        (
            "SELECT count() FROM t EMIT PERIODIC REPEAT",
            Emit(policy=EmitPolicy.PERIODIC, interval_ms=2_000, repeat=True),
        ),
        ("SELECT count() FROM t EMIT ON UPDATE WITH BATCH 1s", Emit(policy=EmitPolicy.ON_UPDATE, batch_ms=1_000)),
        ("SELECT count() FROM tumble(t, 1s)", Emit(policy=EmitPolicy.AFTER_WINDOW_CLOSE)),
        (
            "SELECT count() FROM tumble(t, 1s) EMIT CHANGELOG",
            Emit(policy=EmitPolicy.AFTER_WINDOW_CLOSE, changelog=True),
        ),
        (
            "SELECT count() FROM session(t, 1s) EMIT STREAM AFTER WINDOW CLOSE WITH DELAY 1s AND TIMEOUT 5s",
            Emit(policy=EmitPolicy.AFTER_WINDOW_CLOSE, delay_ms=1_000, timeout_ms=5_000),
        ),
        (
            "SELECT count() FROM hop(t, 1s, 2s) EMIT STREAM PERIODIC 1s REPEAT WITH DELAY 1s AND TIMEOUT 5s",
            Emit(policy=EmitPolicy.PERIODIC, interval_ms=1_000, repeat=True, delay_ms=1_000, timeout_ms=5_000),
        ),
        (
            "SELECT count() FROM tumble(t, 1s) EMIT ON UPDATE WITH BATCH 1s WITH DELAY 1s AND TIMEOUT 5s",
            Emit(policy=EmitPolicy.ON_UPDATE, batch_ms=1_000, delay_ms=1_000, timeout_ms=5_000),
        ),
        (
            "SELECT count() FROM tumble(t, 100 events) EMIT AFTER WINDOW CLOSE AND TIMEOUT 5s",
            Emit(policy=EmitPolicy.AFTER_WINDOW_CLOSE, timeout_ms=5_000),
        ),
        (
            "SELECT device, count() FROM device_utils GROUP BY device EMIT AFTER KEY EXPIRE WITH ONLY MAXSPAN 1s",
            Emit(policy=EmitPolicy.AFTER_KEY_EXPIRE, identified_by="ts", only=True, maxspan_ms=1_000),
        ),
        (
            "SELECT device, count() FROM device_utils GROUP BY device "
            "EMIT AFTER KEY EXPIRE IDENTIFIED BY note WITH MAXSPAN 1s AND TIMEOUT 3s",
            Emit(policy=EmitPolicy.AFTER_KEY_EXPIRE, identified_by="note", maxspan_ms=1_000, timeout_ms=3_000),
        ),
    ],
)
def test_emit_defaults_and_forms(sql: str, emit: Emit) -> None:
    assert valid(sql).emit == emit


@pytest.mark.parametrize(
    ("sql", "marker", "fragment"),
    [
        (
            "SELECT count() FROM t EMIT AFTER WINDOW CLOSE",
            "AFTER",
            "EMIT AFTER WINDOW CLOSE needs a time window (tumble, hop or session)",
        ),
        (
            "SELECT count() FROM t EMIT PERIODIC 1s WITH DELAY 1s",
            "WITH",
            "WITH DELAY and AND TIMEOUT only can be applied to time-window based aggregations",
        ),
        (
            "SELECT count() FROM t EMIT ON UPDATE AND TIMEOUT 1s",
            "AND",
            "WITH DELAY and AND TIMEOUT only can be applied to time-window based aggregations",
        ),
        (
            "SELECT x, count() FROM t GROUP BY x EMIT AFTER KEY EXPIRE IDENTIFIED BY x WITH MAXSPAN 1s WITH DELAY 1s",
            "WITH DELAY",
            "WITH DELAY and AND TIMEOUT only can be applied to time-window based aggregations",
        ),
        (
            "SELECT count() FROM tumble(t, 1s) EMIT AFTER KEY EXPIRE WITH MAXSPAN 1s",
            "AFTER",
            "EMIT AFTER KEY EXPIRE applies to a global aggregation grouped by a key",
        ),
        (
            "SELECT count() FROM device_utils EMIT AFTER KEY EXPIRE WITH MAXSPAN 1s",
            "AFTER",
            "EMIT AFTER KEY EXPIRE needs GROUP BY a key",
        ),
        (
            "SELECT x, count() FROM t GROUP BY x EMIT AFTER KEY EXPIRE WITH MAXSPAN 1s",
            "AFTER",
            "write IDENTIFIED BY <column>, or declare @eventTime('<column>') on stream t",
        ),
        (
            "SELECT device, count() FROM device_utils GROUP BY device EMIT AFTER KEY EXPIRE IDENTIFIED BY mem "
            "WITH MAXSPAN 1s",
            "mem",
            "IDENTIFIED BY 'mem' must be long (epoch ms) or string",
        ),
        (
            "SELECT device, count() FROM device_utils GROUP BY device EMIT AFTER KEY EXPIRE IDENTIFIED BY tss "
            "WITH MAXSPAN 1s",
            "tss",
            "unknown column 'tss' — did you mean 'ts'?",
        ),
        (
            "SELECT count() FROM tumble(t, 10 events) EMIT AFTER WINDOW CLOSE WITH DELAY 1s",
            "WITH",
            "a window of N events closes on its Nth event, so WITH DELAY has nothing to wait for",
        ),
    ],
)
def test_emit_errors(sql: str, marker: str, fragment: str) -> None:
    refused(sql, marker, fragment)


@pytest.mark.parametrize(
    ("emit", "fragment"),
    [
        (Emit(policy=EmitPolicy.PERIODIC, interval_ms=0), "an EMIT interval must be greater than 0"),
        (Emit(policy=EmitPolicy.ON_UPDATE, batch_ms=-5), "an EMIT interval must be greater than 0"),
        (Emit(policy=EmitPolicy.ON_UPDATE, repeat=True), "EMIT option repeat belongs to PERIODIC, not to ON UPDATE"),
        (Emit(batch_ms=5), "EMIT option batch_ms belongs to ON UPDATE, not to AFTER WINDOW CLOSE"),
        (Emit(policy=EmitPolicy.AFTER_WINDOW_CLOSE, maxspan_ms=5), "belongs to AFTER KEY EXPIRE"),
    ],
)
def test_emit_built_in_python(emit: Emit, fragment: str) -> None:
    query = ContinuousQuery(
        stream="t", window=TumbleWindow("t", size_ms=1_000), select=(SqlItem(Call("count")),), emit=emit
    )
    with pytest.raises(DefinitionError, match=fragment):
        validate_continuous(APP, query)


def test_key_expire_needs_a_maxspan_when_built_in_python() -> None:
    query = ContinuousQuery(
        stream="t",
        window=GlobalWindow("t"),
        select=(SqlItem(Attr("x")), SqlItem(Call("count"))),
        group_by=(Attr("x"),),
        emit=Emit(policy=EmitPolicy.AFTER_KEY_EXPIRE, identified_by="x"),
    )
    with pytest.raises(DefinitionError, match=r"needs WITH MAXSPAN <interval>"):
        validate_continuous(APP, query)


# --- apps -------------------------------------------------------------------------------------------------


def test_validation_is_idempotent() -> None:
    app = parse_app(
        STREAMS + "@info(name='q') SELECT name, kll(latency, [0.5, 0.99]) AS lat, count() AS n FROM otel_traces "
        "GROUP BY name HAVING lat_p99 > 1 AND n > 2 AND sum(latency) > 3 EMIT ON UPDATE;"
    )
    assert validate_app(app) == app
    q = app.continuous[0]
    assert validate_continuous(app, q) == q
    assert q.having == Binary(
        "and",
        Binary("and", Binary(">", Attr("_agg0_p99"), Literal(1, "int")), Binary(">", Attr("_agg1"), Literal(2, "int"))),
        Binary(">", Attr("_agg2"), Literal(3, "int")),
    )


def test_app_exposes_its_continuous_queries_by_name() -> None:
    app = parse_app(
        STREAMS
        + "@info(name='per_device') SELECT device, count() AS n FROM tumble(device_utils, 1m) GROUP BY device;\n"
        "SELECT count() FROM t;"
    )
    assert app.continuous_query("per_device").keys == ("device",)
    assert app.continuous[1].name is None
    assert app.continuous_query("continuous1") is app.continuous[1]  # an unnamed query by its place
    with pytest.raises(DefinitionError, match="unknown continuous query 'per_devise' — did you mean 'per_device'"):
        app.continuous_query("per_devise")
    with pytest.raises(DefinitionError, match="'continuous0'"):  # the named query has its name only
        app.continuous_query("continuous0")


def test_an_invalid_continuous_query_fails_the_app_at_its_line() -> None:
    with pytest.raises(DefinitionError) as caught:
        parse_app(STREAMS + "\nSELECT count() FROM tumble(t, 1s)\nGROUP BY y;")
    assert (caught.value.line, caught.value.column) == (10, 10)
    assert "unknown column 'y'" in str(caught.value)


def test_python_built_query_without_positions() -> None:
    query = ContinuousQuery(
        stream="device_utils",
        window=TumbleWindow("device_utils", size_ms=5_000),
        select=(SqlItem(Attr("device")), SqlItem(Call("max", (Attr("cpu_usage"),)), "top")),
        group_by=(Attr("device"),),
    )
    q = validate_continuous(APP, query)
    assert q.outputs == (("device", Attr("device")), ("top", Attr("_agg0")))
    assert q.window.time_attribute == "ts"
    with pytest.raises(DefinitionError, match="unknown column 'devise'") as caught:
        validate_continuous(APP, dataclasses.replace(query, group_by=(Attr("devise"),)))
    assert caught.value.line is None


@pytest.mark.parametrize(
    ("text", "where", "message"),
    [
        ("SELECT emit_version() + 1 AS v, count() FROM tumble(s, 5s)", (1, 8), "as a select item on its own"),
        ("SELECT count() FROM tumble(s, 5s) HAVING emit_version() > 1", (1, 42), "not inside an expression"),
        ("SELECT emit_version(k) AS v, count() FROM tumble(s, 5s)", (1, 21), "takes no arguments"),
    ],
)
def test_emit_version_is_a_select_item_on_its_own(text: str, where: tuple[int, int], message: str) -> None:
    with pytest.raises(DefinitionError) as info:
        parse_app("@eventTime('ts') define stream s (k string, v double, ts long);\n" + text + ";")
    assert message in info.value.message
    assert (info.value.line, info.value.column) == (where[0] + 1, where[1])


def test_emit_version_output_is_a_long() -> None:
    app = parse_app("@eventTime('ts') define stream s (k string, ts long);\n"
                    "SELECT emit_version() AS v, k, count() AS n FROM tumble(s, 5s) GROUP BY k;")
    assert app.continuous[0].outputs[0][0] == "v"
    assert app.continuous[0].output_names == ("v", "k", "n")
