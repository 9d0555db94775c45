"""Trickle expressions over JSON values, as Tremor types them: integers and floats apart, errors named."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tiltframe.functions.trickle_values import Scope, TrickleRuntimeError, equal, evaluate
from tiltframe.lang.trickle.trickle_parser import parse_trickle


def value(expr: str, event: Any = None, group: list[Any] | None = None) -> Any:
    target = parse_trickle(f"select {expr} from in into out;").selects[0].target
    return evaluate(target, Scope(event=event, group=group))


@pytest.mark.parametrize(("expr", "expected"), [
    ("1 + 2", 3), ("1 + 2.0", 3.0), ("7 / 2", 3.5), ("6 / 3", 2.0), ("-7 % 3", -1), ("2 * -3", -6),
    ('"a" + "b"', "ab"), ("[1] + [2, 3]", [1, 2, 3]), ("1 == 1.0", True), ('[1, {"a": 2}] == [1, {"a": 2.0}]', True),
    ('"b" > "a"', True), ("not false", True), ("true xor true", False), ("false and event.missing", False),
    ("true or event.missing", True), ("1 / 0.0", math.inf), ("-1 / 0.0", -math.inf),
])
def test_operators(expr: str, expected: Any) -> None:
    got = value(expr, {})
    assert got == expected and type(got) is type(expected)


@pytest.mark.parametrize(("expr", "event", "message"), [
    ("event.a", {}, "event has no field 'a'"),
    ("event.a.b", {"a": 1}, 'event.a is integer 1: it has no field "b"'),
    ("event.a[2]", {"a": [1]}, "event.a[2] is past the array's 1 elements"),
    ("event.a + 1", {"a": "x"}, 'cannot apply + to string "x" and integer 1'),
    ("event.a < 1", {"a": "x"}, "cannot compare string"),
    ("1 / 0", {}, "division by zero"),
    ("9223372036854775807 * 4", {}, "overflows a 64-bit integer"),
    ("event.a and true", {"a": 1}, "and needs true or false, not integer 1"),
    ('patch event of insert "a" => 2 end', {"a": 1}, "already has the key 'a'"),
    ('patch event of update "b" => 2 end', {"a": 1}, "has no key 'b'"),
    ("record::keys(event.a)", {"a": [1]}, "record::keys needs a record, not array"),
])
def test_errors_name_the_expression_and_the_value(expr: str, event: Any, message: str) -> None:
    with pytest.raises(TrickleRuntimeError, match=message.replace("[", r"\[").replace("+", r"\+")):
        value(expr, event)


def test_records_patch_and_merge() -> None:
    event = {"tags": {"host": "a", "dc": "x"}, "n": {"a": {"b": 1, "c": 2}}}
    assert value('patch event.tags of insert "w" => "10s"; upsert "dc" => "y"; erase "host"; default "dc" => "z" '
                 "end", event) == {"dc": "y", "w": "10s"}
    assert value('patch event of merge "n" => {"a": {"c": null, "d": 3}} end', event)["n"] == {"a": {"b": 1, "d": 3}}
    assert value('merge event.tags of {"host": null, "new": 1} end', event) == {"dc": "x", "new": 1}
    assert value('{"k": event["tags"]["dc"], "g": group[1]}', event, ["v", '["v"]']) == {"k": "x", "g": '["v"]'}
    assert value("array::len(record::values(event.tags))", event) == 2
    assert value('string::lowercase("AbC")', event) == "abc"


@given(st.integers(-(2**62), 2**62), st.integers(-(2**62), 2**62))
def test_integer_arithmetic_stays_integer_and_exact(a: int, b: int) -> None:
    assert value(f"({a}) + ({b})") == a + b and type(value(f"({a}) + ({b})")) is int
    assert value(f"({a}) - ({b})") == a - b


def test_equality_tells_types_apart_except_numbers() -> None:
    assert equal(1, 1.0) and not equal(1, "1") and not equal(None, False) and not equal(True, 1)
    assert equal({"a": [1, 2]}, {"a": [1.0, 2]}) and not equal({"a": 1}, {"a": 1, "b": 2})
