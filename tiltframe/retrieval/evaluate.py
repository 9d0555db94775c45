"""Evaluate ``on`` conditions and ``select`` expressions of a retrieval over finalized rows (pandas).

Aggregation attributes are columns of the frame; request-stream attributes are scalars of the one
request being answered.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from tiltframe.errors import QueryError
from tiltframe.functions import scalars
from tiltframe.spec.expressions import Attr, Binary, Call, Expr, Literal, Unary
from tiltframe.spec.model import RetrievalQuery

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
    if query is None or not query.request_stream:
        return False
    return attr.qualifier in (query.request_alias, query.request_stream)


def evaluate(
    expr: Expr, frame: pd.DataFrame, query: RetrievalQuery | None, request: Mapping[str, Any] | None = None
) -> Any:
    """A Series aligned with ``frame`` (or a scalar when ``expr`` uses no aggregation column).  Without a
    ``query`` (continuous queries) every attribute is a column of ``frame``."""
    if isinstance(expr, Attr):
        if is_request_attr(expr, query):
            if request is None or expr.name not in request:
                msg = f"'{expr}' needs a request event, but this retrieval has none"
                raise QueryError(msg)
            return request[expr.name]
        return frame[expr.name]
    if isinstance(expr, Literal):
        return expr.value
    if isinstance(expr, Unary):
        inner = evaluate(expr.operand, frame, query, request)
        return ~inner if expr.op == "not" else -inner
    if isinstance(expr, Binary):
        left = evaluate(expr.left, frame, query, request)
        right = evaluate(expr.right, frame, query, request)
        if expr.op == "/":
            result = np.true_divide(left, right)
            if _integral(left) and _integral(right):
                return np.trunc(result).astype("int64") if isinstance(result, pd.Series) else int(result)
            return result
        return _OPS[expr.op](left, right)
    if isinstance(expr, Call) and query is None:  # continuous queries' scalar functions
        values = [evaluate(a, frame, query, request) for a in expr.args]
        return scalars.get(expr.name).pandas(expr, values, len(frame))
    if isinstance(expr, Call):
        msg = f"function {expr.name}() is not available in a retrieval"
        raise QueryError(msg)
    msg = f"unsupported expression {expr!r}"
    raise QueryError(msg)


def evaluate_column(
    expr: Expr, frame: pd.DataFrame, query: RetrievalQuery | None, request: Mapping[str, Any] | None = None
) -> pd.Series:
    """:func:`evaluate` as one value per row of ``frame``: a constant (a literal, a request attribute)
    repeated."""
    value = evaluate(expr, frame, query, request)
    if isinstance(value, pd.Series):
        return value
    return pd.Series([value] * len(frame), index=frame.index, dtype=object if value is None else None)


def holds(
    condition: Expr, frame: pd.DataFrame, query: RetrievalQuery | None, request: Mapping[str, Any] | None = None
) -> np.ndarray:
    """The rows of ``frame`` where ``condition`` is true; NULL is false, as in SQL."""
    value = evaluate_column(condition, frame, query, request)
    return value.astype("boolean").fillna(False).to_numpy(dtype=bool)


def _integral(value: Any) -> bool:
    if isinstance(value, pd.Series):
        return pd.api.types.is_integer_dtype(value.dtype)
    return isinstance(value, int) and not isinstance(value, bool)

