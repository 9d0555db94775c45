"""The trickle front end: Tremor's queries parse into the model as written; every error names the problem at
its line and column, and constructs outside the subset are refused by name."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tiltframe.errors import DefinitionError, NotSupportedYet
from tiltframe.lang.trickle.trickle_parser import parse_trickle
from tiltframe.model.expressions import Binary, Call, Literal
from tiltframe.model.trickle import Array, GroupEach, GroupExpr, GroupSet, Patch, PatchOp, Path, Record

#: The seed's first example (002, "Aggregations"), as written.
SEED_TUMBLING = """\
use std::time::nanos;
define window `15secs` from tumbling
with
interval = nanos::from_seconds(15),
end;

select {
"count": aggr::stats::count(), # Aggregate 'count' function
"min": aggr::stats::min(event.value),
"max": aggr::stats::max(event.value),
"mean": aggr::stats::mean(event.value),
"stdev": aggr::stats::stdev(event.value),
"var": aggr::stats::var(event.value),
}
from in[`15secs`] # We apply the window nominally to streams or input ports
into out;
"""

#: The seed's tilt frame, as written, after the definitions of its four windows (the seed leaves them out).
TILT_WINDOWS = """\
use std::time::nanos;
define window `10secs` from tumbling with interval = nanos::from_seconds(10) end;
define window `1min` from tumbling with interval = nanos::from_seconds(60) end;
define window `10min` from tumbling with interval = nanos::from_minutes(10) end;
define window `1h` from tumbling with interval = nanos::from_hours(1) end;
create stream normalize;
"""
SEED_TILT = """\
select {
"measurement": event.measurement,
"tags": patch event.tags of insert "window" => window end,
"stats": aggr::stats::hdr(event.fields[group[2]], [ "0.5", "0.9", "0.99", "0.999" ]),
"class": group[2],
"timestamp": aggr::win::first(event.timestamp),
}
from in[`10secs`, `1min`, `10min`, `1h`]
where event.measurement == "udp_lb_test"
or event.measurement == "kafka-proxy.endpoints"
or event.measurement == "burrow_group"
or event.measurement == "burrow_partition"
or event.measurement == "burrow_topic"
group by set(event.measurement, event.tags, each(record::keys(event.fields)))
into normalize;
"""


def event(*segments: object) -> Path:
    return Path("event", tuple(segments))  # type: ignore[arg-type]


def test_the_seed_tumbling_window_parses_as_written() -> None:
    q = parse_trickle(SEED_TUMBLING)
    assert q.uses == ("std::time::nanos",)
    (window,) = q.windows
    assert (window.name, window.interval_ns, window.size, window.script) == ("15secs", 15_000_000_000, None, None)
    (select,) = q.selects
    assert (select.source, select.windows, select.into, select.group_by) == ("in", ("15secs",), "out", None)
    assert isinstance(select.target, Record)
    fields = {key.value: value for key, value in select.target.fields}  # type: ignore[union-attr]
    assert fields["count"] == Call("aggr::stats::count")
    for name in ("min", "max", "mean", "stdev", "var"):
        assert fields[name] == Call(f"aggr::stats::{name}", (event("value"),))


def test_the_seed_tilt_frame_parses_as_written() -> None:
    q = parse_trickle(TILT_WINDOWS + SEED_TILT)
    assert [(w.name, w.interval_ns) for w in q.windows] == [
        ("10secs", 10 * 10**9), ("1min", 60 * 10**9), ("10min", 600 * 10**9), ("1h", 3600 * 10**9)]
    (select,) = q.selects
    assert select.windows == ("10secs", "1min", "10min", "1h") and select.into == "normalize"
    fields = {key.value: value for key, value in select.target.fields}  # type: ignore[union-attr]
    assert fields["tags"] == Patch(event("tags"), (PatchOp("insert", "window", Path("window")),))
    assert fields["stats"] == Call("aggr::stats::hdr", (
        event("fields", Path("group", (Literal(2, "long"),))),
        Array(tuple(Literal(p, "string") for p in ("0.5", "0.9", "0.99", "0.999")))))
    assert fields["class"] == Path("group", (Literal(2, "long"),))
    assert select.group_by == GroupSet((GroupExpr(event("measurement")), GroupExpr(event("tags")),
                                        GroupEach(Call("record::keys", (event("fields"),)))))
    # five comparisons joined by 'or', left to right
    where = select.where
    ors = 0
    while isinstance(where, Binary) and where.op == "or":
        ors, where = ors + 1, where.left
    assert ors == 4 and where == Binary("==", event("measurement"), Literal("udp_lb_test", "string"))


def test_tremor_window_tests_parse() -> None:
    """Queries of Tremor's own window tests (tests/queries/window_mixed_1, window_by_two_scripted, group_each,
    cardinality, streams, having_filter)."""
    mixed = parse_trickle("""
define window four_nanos from tumbling
with
  # comment
  interval = 4
end;
define window two_size from tumbling
with
  size = 2
end;
define window nine_nanos from tumbling
with
  interval = 8 #
end;
select {
  "group": group[0],
  "count": aggr::stats::count(),
  "sum": aggr::stats::sum(event.num)
}
from in[four_nanos, two_size, nine_nanos] # tilt frame of three windows
group by set(event.g)
into out;""")
    assert [(w.interval_ns, w.size) for w in mixed.windows] == [(4, None), (None, 2), (8, None)]
    scripted = parse_trickle("define window by_two from tumbling\nwith\n  size = 4\nscript\n  2\nend;\n\n"
                             "select aggr::win::collect_flattened(event) from in[by_two] into out;")
    assert scripted.windows[0].script == Literal(2, "long")
    each = parse_trickle('use std::record;\ndefine window by_2 from tumbling\nwith\n  size = 2\nend;\n'
                         'select {\n  "g": group[0],\n  "c": aggr::stats::sum(event.c),\n}\nfrom in[by_2]\n'
                         'group by set(each(record::keys(event.g))) into out;')
    assert each.selects[0].group_by == GroupSet((GroupEach(Call("record::keys", (event("g"),))),))
    streams = parse_trickle("create stream test1;\ncreate stream test2;\nselect event from in into test1;\n"
                            "select event from test1 into test2;\nselect event from test2 into out;")
    assert [(s.source, s.into) for s in streams.selects] == [("in", "test1"), ("test1", "test2"), ("test2", "out")]
    having = parse_trickle('select\n  merge event of {"type2": event.type} end\nfrom in\ninto out\nhaving\n'
                           '  event.type == "sillylog";')
    assert having.selects[0].having == Binary("==", event("type"), Literal("sillylog", "string"))


def test_paths_literals_and_operators() -> None:
    q = parse_trickle('select [event["k"], event.a[0].b, -1_000, 2.5e3, null, not true, 1 + 2 * 3, '
                      'string::lowercase(event.s) != "x", array::len(record::values(event))] from in into out;')
    items = q.selects[0].target.items  # type: ignore[union-attr]
    assert items[0] == event(Literal("k", "string"))
    assert items[1] == event("a", Literal(0, "long"), "b")
    assert items[2].op == "-" and items[2].operand == Literal(1000, "long")
    assert items[3] == Literal(2500.0, "double") and items[4] == Literal(None, "object")
    assert items[6] == Binary("+", Literal(1, "long"), Binary("*", Literal(2, "long"), Literal(3, "long")))


@given(st.recursive(st.integers(1, 10**6), lambda inner: st.tuples(inner, st.sampled_from("+-*"), inner),
                    max_leaves=6))
def test_window_settings_are_integer_arithmetic(tree: object) -> None:
    """``interval = <expr>`` is the value Python computes for the same expression (when at least 1)."""
    def text(t: object) -> str:
        return f"({text(t[0])} {t[1]} {text(t[2])})" if isinstance(t, tuple) else f"{t:_}"

    def value(t: object) -> int:
        if not isinstance(t, tuple):
            return t  # type: ignore[return-value]
        left, op, right = value(t[0]), t[1], value(t[2])
        return left + right if op == "+" else left - right if op == "-" else left * right

    expected = value(tree)
    source = f"define window w from tumbling with interval = {text(tree)} end;"
    if expected < 1:
        with pytest.raises(DefinitionError, match="interval is a whole number of at least 1"):
            parse_trickle(source)
    else:
        assert parse_trickle(source).windows[0].interval_ns == expected


@pytest.mark.parametrize(("text", "message", "line", "column"), [
    # syntax, in words
    ("select event fro in into out;", "unexpected name 'fro'", 1, 14),
    ("select event fro in into out;", "did you mean 'from'?", 1, 14),
    ("select event from in where event.a = 1 into out;", "compare with '=='", 1, 36),
    ("select event from in into out", "unexpected end of the text", 1, 30),
    ("select event from in into out;\nselect {\"a\": 1 from in into out;", "unexpected 'from'", 2, 16),
    # outside the subset, refused by name
    ("select match event of case 1 => 2 end from in into out;", "match ... end (pattern matching) is not "
     "supported", 1, 8),
    ("select state.a from in into out;", "state (a script's or window's own state) is not supported", 1, 8),
    ("define operator bt from grouper::bucket;", "define operator is not supported", 1, 8),
    ("define script s\nscript\n  event\nend;", "define script is not supported", 1, 8),
    ("select event[1:2] from in into out;", "ranges (event[1:3]) are not supported", 1, 8),
    ('select "a#{event.x}" from in into out;', "string interpolation", 1, 8),
    ("define window w from sliding with size = 2 end;", "sliding windows are not supported", 1, 22),
    ("select $meta from in into out;", "metadata ($) is not supported", 1, 8),
    ("select for event of case (k, v) => v end from in into out;", "for comprehensions are not supported", 1, 8),
    # window definitions
    ("define window w from tumbling with interval = 0 end;", "interval is a whole number of at least 1", 1, 47),
    ("define window w from tumbling with size = 2, intervall = 3 end;", "unknown window setting 'intervall' — did "
     "you mean 'interval'?", 1, 46),
    ("define window w from tumbling with size = 2, interval = 3 end;", "gives both interval and size", 1, 15),
    ("define window w from tumbling with max_groups = 3 end;", "gives neither interval nor size", 1, 15),
    ("define window w from tumbling with size = event.a end;", "a window setting is a constant", 1, 43),
    ("define window w from tumbling with size = 2, emit_empty_windows = 1 end;", "emit_empty_windows is true or "
     "false", 1, 67),
    ("define window w from tumbling with size = nanos::from_weeks(1) end;", "unknown function 'nanos::from_weeks'",
     1, 43),
    ("use std::foo;", "unknown module 'std::foo'", 1, 1),
    ("define window w from tumbling with size = 2 script group end;", "a window script reads the event only, "
     "not group", 1, 52),
    # names and where things may appear
    ("select x from in into out;", "unknown name 'x'", 1, 8),
    ("define window w from tumbling with size = 2 end;\nselect event from in[v] into out;",
     "unknown window 'v'", 2, 1),
    ("select event from in into outt;", "unknown stream to write 'outt' — did you mean 'out'?", 1, 1),
    ("select event from other into out;", "unknown stream to read 'other'", 1, 1),
    ("select aggr::stats::count() from in into out;", "aggregate function aggr::stats::count cannot be used in a "
     "select without a window", 1, 8),
    ("define window w from tumbling with size = 2 end;\nselect aggr::stats::count() from in[w] where "
     "aggr::stats::count() > 1 into out;", "cannot be used in where", 2, 46),
    ("define window w from tumbling with size = 2 end;\nselect aggr::stats::sum(aggr::stats::max(event.a)) "
     "from in[w] into out;", "aggregate aggr::stats::max inside aggregate aggr::stats::sum", 2, 25),
    ("select group[2] from in group by event.a into out;", "group[2] is past the group's 1 value and its key",
     1, 8),
    ("select group[4] from in group by set(event.a, each(event.b), event.c) into out;", "group's 3 values", 1, 8),
    ("select event from in where group[0] == 1 group by event.a into out;", "where reads the event, not group",
     1, 28),
    ("define window w from tumbling with size = 2 end;\nselect {\"a\": event.a, \"b\": event.b} from in[w] "
     "group by set(event.a) into out;", "event is read here outside an aggregate", 2, 28),
    ("define window w from tumbling with size = 2 end;\nselect string::lowercase(event.k) from in[w] "
     "group by each(event.k) into out;", "event is read here outside an aggregate", 2, 26),
    ("select record::keyz(event) from in into out;", "unknown function 'record::keyz' — did you mean "
     "'record::keys'?", 1, 8),
    ("define window w from tumbling with size = 2 end;\nselect aggr::stats::sum() from in[w] into out;",
     "aggr::stats::sum takes 1 argument, not 0", 2, 8),
    ("define window w from tumbling with size = 2 end;\nselect aggr::stats::hdr(event.a, [0.5]) from in[w] "
     "into out;", "percentiles are an array of strings", 2, 34),
])
def test_errors_name_the_problem_and_where(text: str, message: str, line: int, column: int) -> None:
    with pytest.raises(DefinitionError) as caught:
        parse_trickle(text)
    assert message in str(caught.value)
    assert (caught.value.line, caught.value.column) == (line, column), str(caught.value)


def test_a_windowed_select_reads_the_event_through_its_group_by_or_aggregates() -> None:
    q = parse_trickle("define window w from tumbling with size = 2 end;\n"
                      'select {"m": string::lowercase(event.m), "t": patch event.t of insert "w" => window end, '
                      '"n": aggr::win::last(event.n), "k": group[1]} from in[w] '
                      "group by set(event.m, event.t, each(record::keys(event.f))) into out;")
    assert q.selects[0].windows == ("w",)


def test_refusals_are_not_supported_errors() -> None:
    with pytest.raises(NotSupportedYet):
        parse_trickle("select let x = 1 from in into out;")
