"""validate_continuous on WITH queries, SETTINGS, select items naming earlier ones, scalar functions and
group_array: what the engine reads (outputs, filter) and every refusal at its line and column."""

from __future__ import annotations

import pytest

from tests.seed003 import SEED_OTEL
from tiltframe.errors import DefinitionError
from tiltframe.lang import parse_app, parse_continuous
from tiltframe.model.aggregations import AggregateItem
from tiltframe.model.continuous import ContinuousQuery
from tiltframe.model.expressions import Attr, Binary, Call, Literal

STREAMS = """@eventTime('end_time')
define stream otel_traces (trace_id string, span_id string, parent_span_id string, name string,
                           start_time long, end_time long, attributes string, latency double);
"""
APP = parse_app(STREAMS)


def valid(sql: str) -> ContinuousQuery:
    return parse_continuous(sql, APP)


def refused(sql: str, marker: str, fragment: str) -> DefinitionError:
    """The error of ``sql`` (one line) is at the last ``marker`` and says ``fragment``."""
    with pytest.raises(DefinitionError) as caught:
        parse_continuous(sql, APP)
    error = caught.value
    assert (error.line, error.column) == (1, sql.rindex(marker) + 1), str(error)
    assert fragment in error.message, error.message
    return error


def _json(*pairs: tuple[str, object]) -> Call:
    return Call("json_object", tuple(x for name, value in pairs for x in (Literal(name, "string"), value)))


def test_seed_otel_query_folds_its_projection_into_the_outputs() -> None:
    q = valid(SEED_OTEL)
    spans = ("span_id", "parent_span_id", "name", "start_time", "end_time", "attributes")
    assert q.keys == ("trace_id",)
    assert q.aggregates == (
        AggregateItem("min", Attr("start_time"), "_agg0"),
        AggregateItem("max", Attr("end_time"), "_agg1"),
        AggregateItem("group_array", _json(*((n, Attr(n)) for n in spans)), "_agg2"),
    )
    span_ms = Call("date_diff", (Literal("ms", "string"), Attr("_agg0"), Attr("_agg1")))
    event = _json(
        ("trace_id", Attr("trace_id")),
        ("start_ts", Attr("_agg0")),
        ("end_ts", Attr("_agg1")),
        ("span_ms", span_ms),
        ("trace_events", Attr("_agg2")),
    )
    assert q.outputs == (("event", event),)
    assert q.output_names == ("event",) and q.filter is None and q.having is None


def test_select_star_and_where_over_the_rows_of_a_with_query() -> None:
    q = valid(
        "WITH g AS (SELECT trace_id, min(start_time) AS s, max(end_time) AS e FROM otel_traces GROUP BY trace_id "
        "EMIT AFTER KEY EXPIRE WITH MAXSPAN 1s) SELECT * FROM g WHERE g.e - s > 500"
    )
    assert q.outputs == (("trace_id", Attr("trace_id")), ("s", Attr("_agg0")), ("e", Attr("_agg1")))
    assert q.filter == Binary(">", Binary("-", Attr("_agg1"), Attr("_agg0")), Literal(500, "int"))


def test_validating_twice_gives_the_same_query() -> None:
    from tiltframe.lang.checks.continuous_queries import validate_continuous

    q = valid(SEED_OTEL.replace("SELECT json_encode", "SELECT span_ms, json_encode").replace(
        "FROM grouped", "FROM grouped WHERE span_ms > 500"))
    assert validate_continuous(APP, q) == q
    assert q.filter == Binary(">", Call("date_diff", (Literal("ms", "string"), Attr("_agg0"), Attr("_agg1"))),
                              Literal(500, "int"))


def test_select_items_name_the_items_before_them() -> None:
    q = valid("SELECT name, max(latency) AS hi, min(latency) AS lo, hi - lo AS spread FROM otel_traces GROUP BY name")
    assert dict(q.outputs)["spread"] == Binary("-", Attr("_agg0"), Attr("_agg1"))
    refused(
        "SELECT name, hi - 1 AS x, max(latency) AS hi FROM otel_traces GROUP BY name",
        "hi - 1",
        "'hi' is the name of a select item further on",
    )


def test_settings_are_checked() -> None:
    assert valid("SELECT count() FROM otel_traces SETTINGS default_hash_table='memory', max_hot_keys=5").settings
    refused("SELECT count() FROM otel_traces SETTINGS max_hot_key=5", "max_hot_key", "did you mean 'max_hot_keys'")
    refused("SELECT count() FROM otel_traces SETTINGS max_hot_keys=0", "max_hot_keys", "a whole number above 0")
    refused(
        "SELECT count() FROM otel_traces SETTINGS default_hash_table='disk'",
        "default_hash_table",
        "takes 'memory' or 'hybrid', got 'disk'",
    )
    refused("SELECT count() FROM otel_traces SETTINGS seek_to='earliest'", "seek_to", "unknown setting 'seek_to'")


@pytest.mark.parametrize(
    ("sql", "marker", "fragment"),
    [
        (
            "WITH g AS (SELECT name, count() AS n FROM otel_traces GROUP BY name) SELECT nn FROM g",
            "nn",
            "unknown column of g 'nn' — did you mean 'n'?",
        ),
        (
            "WITH g AS (SELECT name, count() AS n FROM otel_traces GROUP BY name) SELECT sum(n) AS t FROM g",
            "sum",
            "aggregating the rows of g again is not supported yet",
        ),
        (
            "WITH g AS (SELECT name, count() AS n FROM otel_traces GROUP BY name) SELECT x.n FROM g",
            "x.n",
            "'x.n' names x, but the query reads the rows of g",
        ),
        ("SELECT name, date_diff('week', min(start_time), max(end_time)) AS d FROM otel_traces GROUP BY name",
         "'week'", "unknown unit 'week'"),
        ("SELECT name, date_diff('ms', max(latency), max(end_time)) AS d FROM otel_traces GROUP BY name",
         "max(latency)", "date_diff() takes times as epoch milliseconds (int or long), got double"),
        ("SELECT name, date_diff('ms', max(end_time)) AS d FROM otel_traces GROUP BY name",
         "date_diff", "date_diff() takes 3 arguments"),
        ("SELECT name, group_array(json_encode()) AS d FROM otel_traces GROUP BY name",
         "json_encode", "json_encode() needs at least one column"),
        ("SELECT name, group_array(json_encdoe(span_id)) AS d FROM otel_traces GROUP BY name",
         "json_encdoe", "did you mean 'json_encode'"),
        ("SELECT name, group_array(span_id) + 1 AS d FROM otel_traces GROUP BY name",
         "group_array(span_id) +", "operator '+' needs numbers, got array and int"),
    ],
)
def test_refusals(sql: str, marker: str, fragment: str) -> None:
    refused(sql, marker, fragment)


def test_group_array_is_refused_in_rollups() -> None:
    with pytest.raises(DefinitionError) as caught:
        parse_app(STREAMS + "define aggregation A from otel_traces select name, group_array(span_id) as spans "
                  "group by name aggregate by end_time every sec ... min;")
    assert "group_array() keeps every value" in caught.value.message
    assert caught.value.line == 4
