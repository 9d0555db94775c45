"""Evaluate ``on`` conditions and ``select`` expressions of a retrieval over finalized rows (pandas).

Aggregation attributes are columns of the frame; request-stream attributes are scalars of the one
request being answered.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from tiltframe.errors import QueryError
from tiltframe.functions import scalars
from tiltframe.model.expressions import Attr, Binary, Call, Expr, Literal, Unary
from tiltframe.model.queries import RetrievalQuery

_OPS = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "%": lambda a, b: a % b,
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
    "and": lambda a, b: a & b,
    "or": lambda a, b: a | b,
}


def is_request_attr(attr: Attr, query: RetrievalQuery | None) -> bool:
    """Whether ``attr`` names the request event's attribute: qualified by the request stream's alias or
    name (validation qualifies every attribute of a retrieval, ``lang.checks.retrieval``)."""
    if query is None or not query.request_stream or attr.qualifier is None:
        return False
    return attr.qualifier in (query.request_alias, query.request_stream)


def compute(expr: Expr, attr: Callable[[Attr], Any], call: Callable[[Call], Any]) -> Any:
    """``expr`` over values that ``attr`` gives for each attribute and ``call`` for each function call: a
    Series where any operand is one, else a scalar.  Operators follow SiddhiQL (``/`` of two integers is an
    integer, truncated)."""
    if isinstance(expr, Attr):
        return attr(expr)
    if isinstance(expr, Literal):
        return expr.value
    if isinstance(expr, Unary):
        inner = compute(expr.operand, attr, call)
        return ~inner if expr.op == "not" else -inner
    if isinstance(expr, Binary):
        left = compute(expr.left, attr, call)
        right = compute(expr.right, attr, call)
        if expr.op == "/":
            result = np.true_divide(left, right)
            if _integral(left) and _integral(right):
                return np.trunc(result).astype("int64") if isinstance(result, pd.Series) else int(result)
            return result
        return _OPS[expr.op](left, right)
    if isinstance(expr, Call):
        return call(expr)
    msg = f"unsupported expression {expr!r}"
    raise QueryError(msg)


def request_value(expr: Attr, request: Mapping[str, Any] | None) -> Any:
    """A request attribute's value for the request being answered."""
    if request is None or expr.name not in request:
        msg = f"'{expr}' needs a request event, but this retrieval has none"
        raise QueryError(msg)
    return request[expr.name]


def evaluate(
    expr: Expr, frame: pd.DataFrame, query: RetrievalQuery | None, request: Mapping[str, Any] | None = None
) -> Any:
    """A Series aligned with ``frame`` (or a scalar when ``expr`` uses no aggregation column).  Without a
    ``query`` (continuous queries) every attribute is a column of ``frame``."""

    def attr(a: Attr) -> Any:
        return request_value(a, request) if is_request_attr(a, query) else frame[a.name]

    def call(c: Call) -> Any:
        if query is None:  # continuous queries' scalar functions
            values = [evaluate(a, frame, query, request) for a in c.args]
            return scalars.get(c.name).pandas(c, values, len(frame))
        msg = f"function {c.name}() is not available in a retrieval"
        raise QueryError(msg)

    return compute(expr, attr, call)


def as_column(value: Any, index: pd.Index) -> pd.Series:
    """``value`` as one value per row of ``index``: a Series as it is, a constant repeated."""
    if isinstance(value, pd.Series):
        return value
    return pd.Series([value] * len(index), index=index, dtype=object if value is None else None)


def evaluate_column(
    expr: Expr, frame: pd.DataFrame, query: RetrievalQuery | None, request: Mapping[str, Any] | None = None
) -> pd.Series:
    """:func:`evaluate` as one value per row of ``frame``: a constant (a literal, a request attribute)
    repeated."""
    return as_column(evaluate(expr, frame, query, request), frame.index)


def holds(
    condition: Expr, frame: pd.DataFrame, query: RetrievalQuery | None, request: Mapping[str, Any] | None = None
) -> np.ndarray:
    """The rows of ``frame`` where ``condition`` is true; NULL is false, as in SQL."""
    value = evaluate_column(condition, frame, query, request)
    if value.dtype == bool:  # a comparison of columns without NULL
        return value.to_numpy()
    return value.astype("boolean").fillna(False).to_numpy(dtype=bool)




def _integral(value: Any) -> bool:
    if isinstance(value, pd.Series):
        return pd.api.types.is_integer_dtype(value.dtype)
    return isinstance(value, int) and not isinstance(value, bool)

