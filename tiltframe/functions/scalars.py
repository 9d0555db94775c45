"""Scalar functions of continuous queries: one value per row, defined once for Spark and for pandas.

A continuous query computes a scalar function in Spark where it reads event attributes (WHERE, the
argument of an aggregate: ``group_array(json_encode(span_id, name))``) and in pandas where it reads
finalized aggregates (select items and HAVING: ``date_diff('ms', start_ts, end_ts)``).  Each function is
therefore written here once, with its type rule and both translations side by side; the tests run both on
the same values and compare.

``json_encode(a, b, ...)`` is Timeplus's spelling of ``json_object('a', a, 'b', b, ...)``: validation
rewrites it (:func:`canonical_call`) while the argument names are still the written ones, before select
aliases are replaced by the expressions they stand for.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from tiltframe.errors import DefinitionError, unknown
from tiltframe.model.expressions import Call, Expr, Literal, output_name
from tiltframe.model.streams import AttrType

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import Column

__all__ = ["DATE_DIFF_UNITS", "ScalarFunction", "canonical_call", "get", "is_scalar", "json_value", "names"]

#: ``date_diff`` units in milliseconds, by every name it takes.
DATE_DIFF_UNITS = {
    **dict.fromkeys(("ms", "millisecond", "milliseconds"), 1),
    **dict.fromkeys(("s", "second", "seconds"), 1_000),
    **dict.fromkeys(("m", "minute", "minutes"), 60_000),
    **dict.fromkeys(("h", "hour", "hours"), 3_600_000),
    **dict.fromkeys(("d", "day", "days"), 86_400_000),
}


@dataclass(frozen=True, slots=True)
class ScalarFunction:
    """One scalar function: its result type from the arguments, and its Spark and pandas forms.

    ``result_type(call, types)`` raises :class:`DefinitionError` for arguments the function cannot take;
    ``spark(call, columns)`` and ``pandas(call, values, rows)`` receive the call (for constants such as a
    unit) and its arguments computed: Spark columns, or pandas Series and scalars.
    """

    name: str
    usage: str
    result_type: Callable[[Call, Sequence[AttrType]], AttrType]
    spark: Callable[[Call, Sequence[Column]], Column]
    pandas: Callable[[Call, Sequence[Any], int], Any]
    doc: str = ""


_FUNCTIONS: dict[str, ScalarFunction] = {}
#: Written names that validation rewrites into another function (see :func:`canonical_call`).
_SPELLINGS = ("json_encode",)


def get(name: str) -> ScalarFunction:
    """The function called ``name`` (case-insensitive); unknown names get a 'did you mean' error."""
    found = _FUNCTIONS.get(name.lower())
    if found is None:
        raise DefinitionError(unknown("function", name, names()))
    return found


def is_scalar(name: str) -> bool:
    return name.lower() in _FUNCTIONS or name.lower() in _SPELLINGS


def names() -> tuple[str, ...]:
    return tuple(sorted((*_FUNCTIONS, *_SPELLINGS)))


def canonical_call(call: Call) -> Call:
    """``json_encode(a, b)`` as ``json_object('a', a, 'b', b)``; any other call with its name in lower case."""
    name = call.name.lower()
    if name == "json_encode":
        if not call.args:
            msg = "json_encode() needs at least one column, such as json_encode(trace_id, span_ms)"
            raise DefinitionError.at(msg, call.pos)
        pairs = [x for arg in call.args for x in (Literal(output_name(arg, None), "string", pos=arg.pos), arg)]
        return Call("json_object", tuple(pairs), pos=call.pos)
    return Call(name, call.args, pos=call.pos)


def _fail(message: str, expr: Expr) -> DefinitionError:
    return DefinitionError.at(message, expr.pos)


def _register(fn: ScalarFunction) -> None:
    _FUNCTIONS[fn.name] = fn


# --- json_object('k', v, ...) -----------------------------------------------------------------------------


def _json_object_type(call: Call, _types: Sequence[AttrType]) -> AttrType:
    args = call.args
    if not args or len(args) % 2:
        raise _fail("json_object() takes pairs of a name and a value: json_object('id', trace_id, ...)", call)
    for key in args[::2]:
        if not (isinstance(key, Literal) and key.type == "string"):
            raise _fail(f"json_object() takes names as strings in quotes, got {key}", key)
    return AttrType.STRING


def _keys(call: Call) -> list[str]:
    return [str(key.value) for key in call.args[::2]]  # type: ignore[union-attr]  # checked by the type rule


def _json_object_spark(call: Call, columns: Sequence[Column]) -> Column:
    from pyspark.sql import functions as F

    fields = [value.alias(key) for key, value in zip(_keys(call), columns[1::2], strict=True)]
    return F.to_json(F.struct(*fields), {"ignoreNullFields": "false"})


def json_value(value: Any) -> Any:
    """A cell as a JSON value: numpy scalars and arrays (a ``group_array`` list) as Python ones, missing
    values as None."""
    if isinstance(value, np.ndarray | list | tuple):
        return [json_value(v) for v in value]
    pandas = sys.modules.get("pandas")  # a value is pandas' NA only where pandas is loaded: not imported here
    if value is None or (pandas is not None and value is pandas.NA) or (
            isinstance(value, float | np.floating) and np.isnan(value)):
        return None
    if isinstance(value, np.float32):
        return float(str(value))  # the shortest decimal of the float, as Spark writes it
    if isinstance(value, np.generic):
        return value.item()
    return value


def _cells(values: pd.Series) -> Any:
    """The values of a column, numpy scalars kept (a float32 is written as the float32 it is)."""
    return values.to_numpy() if isinstance(values.dtype, np.dtype) else values.to_numpy(dtype=object)


def _json_object_pandas(call: Call, values: Sequence[Any], rows: int) -> Any:
    import pandas as pd

    keys = _keys(call)
    columns = [_cells(v) if isinstance(v, pd.Series) else [v] * rows for v in values[1::2]]
    text = [
        json.dumps(dict(zip(keys, map(json_value, row), strict=True)), separators=(",", ":"), ensure_ascii=False)
        for row in zip(*columns, strict=True)
    ] if columns else ["{}"] * rows
    return pd.Series(text, dtype=object)


_register(
    ScalarFunction(
        "json_object",
        "json_object('name', value, ...)",
        _json_object_type,
        _json_object_spark,
        _json_object_pandas,
        doc="A JSON object of the given names and values, nulls included; json_encode(a, b) names each value "
            "after its column: {\"a\":...,\"b\":...}. Lists become JSON arrays.",
    )
)


# --- date_diff(unit, start, end) ------------------------------------------------------------------------------


def _unit_ms(call: Call) -> int:
    unit = call.args[0]
    if not (isinstance(unit, Literal) and unit.type == "string"):
        raise _fail(f"the unit of date_diff() is a string such as 'ms' or 's', got {unit}", unit)
    size = DATE_DIFF_UNITS.get(str(unit.value).lower())
    if size is None:
        raise _fail(f"date_diff(): {unknown('unit', str(unit.value), DATE_DIFF_UNITS)}", unit)
    return size


def _date_diff_type(call: Call, types: Sequence[AttrType]) -> AttrType:
    if len(call.args) != 3:
        where = call.args[3] if len(call.args) > 3 else call
        raise _fail(f"date_diff() takes 3 arguments (unit, start, end), got {len(call.args)}", where)
    _unit_ms(call)
    for arg, t in zip(call.args[1:], types[1:], strict=True):
        if not t.is_integral:
            msg = f"date_diff() takes times as epoch milliseconds (int or long), got {t.value} {arg}"
            raise _fail(msg, arg)
    return AttrType.LONG


def _date_diff_spark(call: Call, columns: Sequence[Column]) -> Column:
    from pyspark.sql import functions as F

    size = F.lit(_unit_ms(call))
    start, end = (c.cast("long") for c in columns[1:])
    # Both floored to the unit, then an exact division of longs (no rounding through doubles).
    return (((end - F.pmod(end, size)) - (start - F.pmod(start, size))) / size).cast("long")


def _date_diff_pandas(call: Call, values: Sequence[Any], rows: int) -> Any:
    import pandas as pd

    size = _unit_ms(call)
    start, end = (pd.Series(v, dtype="Int64") if isinstance(v, pd.Series) else v for v in values[1:])
    return end // size - start // size


_register(
    ScalarFunction(
        "date_diff",
        "date_diff(unit, start, end)",
        _date_diff_type,
        _date_diff_spark,
        _date_diff_pandas,
        doc="How many unit boundaries (ms, s, m, h, d) lie between two epoch-millisecond times: end - start "
            "in milliseconds for 'ms', and as in ClickHouse, date_diff('s', 999, 1000) is 1.",
    )
)
