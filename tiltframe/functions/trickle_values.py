"""Trickle expressions evaluated over JSON values, with Tremor's typing: integers and floats stay apart
(``1 + 1`` is ``2``, ``1 + 1.0`` is ``2.0``, ``3 / 2`` is ``1.5``), records and arrays are values, and a
type error or a missing field is a :class:`TrickleRuntimeError` naming the expression, which the caller
records with the event instead of going on with a wrong value.

Values are Python's JSON values: ``None``, ``bool``, ``int``, ``float``, ``str``, ``list``, ``dict``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tiltframe.errors import DataError
from tiltframe.model.expressions import Binary, Call, Literal, Unary
from tiltframe.model.trickle import Array, Merge, Patch, Path, Record, TExpr

#: Integers are 64-bit, as in Tremor: a result outside overflows.
INT_MIN, INT_MAX = -(2**63), 2**64 - 1


class TrickleRuntimeError(DataError):
    """An event an expression cannot be evaluated on (a type error, a missing field, an overflow)."""


@dataclass
class Scope:
    """What an expression may read: the event, the group's values (then its key), the emitting window's
    name, the values given to some of its nodes, and what the select's functions read."""

    event: Any = None
    group: list[Any] | None = None
    window: str | None = None
    #: Values of nodes of the expression, by the node's identity: an emission's aggregates, and in a select
    #: with windows the expressions it groups by (the group's values).
    given: Mapping[int, Any] = field(default_factory=dict)
    ingest_ns: int = 0
    cardinality: int = 0


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "record"


def equal(left: Any, right: Any) -> bool:
    """Tremor's equality: records and arrays by their elements, numbers by value (floats within epsilon)."""
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(equal(v, right[k]) for k, v in left.items())
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(equal(a, b) for a, b in zip(left, right, strict=True))
    if is_number(left) and is_number(right):
        if isinstance(left, int) and isinstance(right, int):
            return left == right
        return abs(float(left) - float(right)) < 2.220446049250313e-16
    if isinstance(left, bool) or isinstance(right, bool) or left is None or right is None:
        return type(left) is type(right) and left == right
    return isinstance(left, str) and isinstance(right, str) and left == right


def _int(value: int, what: str) -> int:
    if not INT_MIN <= value <= INT_MAX:
        raise TrickleRuntimeError(f"{what} overflows a 64-bit integer")
    return value


def arithmetic(op: str, left: Any, right: Any) -> Any:
    """``+ - * / %`` of two values; ``+`` also joins strings and arrays."""
    if op == "+" and isinstance(left, str) and isinstance(right, str):
        return left + right
    if op == "+" and isinstance(left, list) and isinstance(right, list):
        return left + right
    if not (is_number(left) and is_number(right)):
        raise TrickleRuntimeError(f"cannot apply {op} to {type_name(left)} {_show(left)} and "
                                  f"{type_name(right)} {_show(right)}")
    if isinstance(left, int) and isinstance(right, int):
        if op in ("/", "%") and right == 0:
            raise TrickleRuntimeError("division by zero")
        if op == "/":
            return left / right
        if op == "%":
            return int(math.fmod(left, right))  # the sign of the dividend, as in Rust
        return _int({"+": left + right, "-": left - right, "*": left * right}[op], f"{left} {op} {right}")
    if op == "%":
        raise TrickleRuntimeError(f"cannot apply % to {type_name(left)} and {type_name(right)}")
    a, b = float(left), float(right)
    if op == "/":
        return a / b if b else _ieee_division_by_zero(a, b)
    return {"+": a + b, "-": a - b, "*": a * b}[op]


def _ieee_division_by_zero(a: float, b: float) -> float:
    """A float divided by zero, as IEEE 754 (and Tremor) gives it: infinity of the quotient's sign, or NaN."""
    if a == 0 or math.isnan(a):
        return math.nan
    return math.copysign(math.inf, a) * math.copysign(1.0, b)


def compare(op: str, left: Any, right: Any) -> bool:
    if op in ("==", "!="):
        return equal(left, right) == (op == "==")
    if (is_number(left) and is_number(right)) or (isinstance(left, str) and isinstance(right, str)):
        return {"<": left < right, "<=": left <= right, ">": left > right, ">=": left >= right}[op]
    raise TrickleRuntimeError(f"cannot compare {type_name(left)} {_show(left)} with {type_name(right)} "
                              f"{_show(right)} by {op}")


def _show(value: Any) -> str:
    import json

    text = json.dumps(value, separators=(",", ":"), sort_keys=True, allow_nan=True)
    return text if len(text) <= 60 else text[:57] + "..."


def _bool(value: Any, op: str) -> bool:
    if not isinstance(value, bool):
        raise TrickleRuntimeError(f"{op} needs true or false, not {type_name(value)} {_show(value)}")
    return value


def _record_keys(value: Any) -> list[str]:
    if not isinstance(value, dict):
        raise TrickleRuntimeError(f"record::keys needs a record, not {type_name(value)} {_show(value)}")
    return list(value)


def _record_values(value: Any) -> list[Any]:
    if not isinstance(value, dict):
        raise TrickleRuntimeError(f"record::values needs a record, not {type_name(value)} {_show(value)}")
    return list(value.values())


def _array_len(value: Any) -> int:
    if not isinstance(value, list):
        raise TrickleRuntimeError(f"array::len needs an array, not {type_name(value)} {_show(value)}")
    return len(value)


def _lowercase(value: Any) -> str:
    if not isinstance(value, str):
        raise TrickleRuntimeError(f"string::lowercase needs a string, not {type_name(value)} {_show(value)}")
    return value.lower()


#: Functions of one value.
SCALARS: dict[str, Callable[[Any], Any]] = {
    "record::keys": _record_keys,
    "record::values": _record_values,
    "array::len": _array_len,
    "string::lowercase": _lowercase,
}


def evaluate(expr: TExpr, scope: Scope) -> Any:
    """The value of ``expr`` in ``scope``; a node whose value ``scope.given`` holds is not evaluated."""
    if id(expr) in scope.given:
        return scope.given[id(expr)]
    if isinstance(expr, Literal):
        return expr.value
    if isinstance(expr, Path):
        return _path(expr, scope)
    if isinstance(expr, Record):
        out: dict[str, Any] = {}
        for key_expr, value_expr in expr.fields:
            key = evaluate(key_expr, scope)
            if not isinstance(key, str):
                raise TrickleRuntimeError(f"a record's key is a string, not {type_name(key)} {_show(key)}")
            out[key] = evaluate(value_expr, scope)
        return out
    if isinstance(expr, Array):
        return [evaluate(item, scope) for item in expr.items]
    if isinstance(expr, Patch):
        return _patch(expr, scope)
    if isinstance(expr, Merge):
        return merge_values(evaluate(expr.target, scope), evaluate(expr.value, scope))
    if isinstance(expr, Unary):
        value = evaluate(expr.operand, scope)
        if expr.op == "not":
            return not _bool(value, "not")
        if not is_number(value):
            raise TrickleRuntimeError(f"cannot apply {expr.op} to {type_name(value)} {_show(value)}")
        return _int(-value, f"-{value}") if expr.op == "-" and isinstance(value, int) else (
            -value if expr.op == "-" else value)
    if isinstance(expr, Binary):
        return _binary(expr, scope)
    if isinstance(expr, Call):
        return _call(expr, scope)
    raise TrickleRuntimeError(f"cannot evaluate {expr!r}")  # pragma: no cover - the model has no other node


def _binary(expr: Binary, scope: Scope) -> Any:
    op = expr.op
    if op in ("and", "or"):
        left = _bool(evaluate(expr.left, scope), op)
        if (op == "and" and not left) or (op == "or" and left):
            return left  # short-circuit, as Tremor's
        return _bool(evaluate(expr.right, scope), op)
    left, right = evaluate(expr.left, scope), evaluate(expr.right, scope)
    if op == "xor":
        return _bool(left, op) != _bool(right, op)
    if op in ("==", "!=", "<", "<=", ">", ">="):
        return compare(op, left, right)
    return arithmetic(op, left, right)


def _call(expr: Call, scope: Scope) -> Any:
    if expr.name == "win::cardinality":
        return scope.cardinality
    if expr.name == "system::ingest_ns":
        return scope.ingest_ns
    function = SCALARS.get(expr.name)
    if function is None:
        raise TrickleRuntimeError(f"{expr.name} has no value here")
    return function(evaluate(expr.args[0], scope))


def _path(path: Path, scope: Scope) -> Any:
    value: Any = {"event": scope.event, "group": scope.group, "window": scope.window}[path.root]
    walked = path.root
    for segment in path.segments:
        key = segment if isinstance(segment, str) else evaluate(segment, scope)
        if isinstance(value, dict) and isinstance(key, str):
            if key not in value:
                raise TrickleRuntimeError(f"{walked} has no field {key!r}")
            value, walked = value[key], f"{walked}.{key}"
        elif isinstance(value, list) and isinstance(key, int) and not isinstance(key, bool):
            if not 0 <= key < len(value):
                raise TrickleRuntimeError(f"{walked}[{key}] is past the array's {len(value)} elements")
            value, walked = value[key], f"{walked}[{key}]"
        else:
            raise TrickleRuntimeError(f"{walked} is {type_name(value)} {_show(value)}: it has no "
                                      f"{'field' if isinstance(key, str) else 'element'} {_show(key)}")
    return value


def _patch(expr: Patch, scope: Scope) -> Any:
    target = evaluate(expr.target, scope)
    if not isinstance(target, dict):
        raise TrickleRuntimeError(f"patch needs a record, not {type_name(target)} {_show(target)}")
    out = dict(target)
    for op in expr.ops:
        value = evaluate(op.value, scope) if op.value is not None else None
        present = op.key in out
        if op.kind == "insert" and present:
            raise TrickleRuntimeError(f"patch insert: the record already has the key {op.key!r}")
        if op.kind == "update" and not present:
            raise TrickleRuntimeError(f"patch update: the record has no key {op.key!r}")
        if op.kind == "erase":
            out.pop(op.key, None)
        elif op.kind == "default":
            out.setdefault(op.key, value)
        elif op.kind == "merge":
            out[op.key] = merge_values(out.get(op.key), value)
        else:  # insert, upsert, update
            out[op.key] = value
    return out


def merge_values(target: Any, value: Any) -> Any:
    """Tremor's merge: a record merged into a record key by key (null erases, records merge deeper);
    anything else replaces the target."""
    if not (isinstance(target, dict) and isinstance(value, dict)):
        return value
    out = dict(target)
    for key, new in value.items():
        if new is None:
            out.pop(key, None)
        else:
            out[key] = merge_values(out.get(key), new)
    return out
