"""The group-by keys a retrieval's ``on`` pins to values, so that the store reads those keys' rows only.

``on symbol == "IBM"`` over an aggregation of a thousand symbols would otherwise read a thousand keys'
rows for one.  Only what is certain is pushed: at the top of ``on`` (terms joined by ``and``), a key equal
to constants (``k == "a"``, or ``k == "a" or k == "b"``) of the key's own type, or to a request
attribute's value of that type.  The store may return more (a case-insensitive collation): the
condition itself is still applied to every row read, so the answer never depends on the pushdown.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from tiltframe.aggregates.layout import AggregationLayout
from tiltframe.model.expressions import Attr, Binary, Expr, Literal
from tiltframe.model.queries import RetrievalQuery
from tiltframe.model.streams import AttrType
from tiltframe.retrieval.evaluate import is_request_attr

#: Python values a key of each type compares equal to exactly, in SQL as in pandas.
_EXACT: dict[AttrType, type | tuple[type, ...]] = {
    AttrType.STRING: str, AttrType.INT: int, AttrType.LONG: int, AttrType.BOOL: bool,
}


def pinned_keys(
    layout: AggregationLayout, query: RetrievalQuery, request: Mapping[str, Any] | None = None
) -> dict[str, tuple[Any, ...]]:
    """Per group-by key that ``query.on`` pins: the values it may take (empty when nothing is certain)."""
    if query.on is None:
        return {}
    types = {k.name: k.type for k in layout.keys}
    pinned: dict[str, tuple[Any, ...]] = {}
    for term in conjuncts(query.on):
        found = _alternatives(term, types, query, request)
        if found is None:
            continue
        key, values = found
        pinned[key] = tuple(v for v in pinned[key] if v in values) if key in pinned else values
    return pinned


def conjuncts(expr: Expr | None) -> Iterator[Expr]:
    """The terms of ``expr`` joined by ``and`` at its top (none for no condition)."""
    if isinstance(expr, Binary) and expr.op == "and":
        yield from conjuncts(expr.left)
        yield from conjuncts(expr.right)
    elif expr is not None:
        yield expr


def _alternatives(expr: Expr, types: Mapping[str, AttrType], query: RetrievalQuery,
                  request: Mapping[str, Any] | None) -> tuple[str, tuple[Any, ...]] | None:
    """``k == v`` or ``k == v1 or k == v2 ...`` on one key: the key and its values; else None."""
    if isinstance(expr, Binary) and expr.op == "or":
        left = _alternatives(expr.left, types, query, request)
        right = _alternatives(expr.right, types, query, request)
        if left is None or right is None or left[0] != right[0]:
            return None
        return left[0], tuple(dict.fromkeys((*left[1], *right[1])))
    if not (isinstance(expr, Binary) and expr.op == "=="):
        return None
    for key_side, value_side in ((expr.left, expr.right), (expr.right, expr.left)):
        if not isinstance(key_side, Attr) or is_request_attr(key_side, query) or key_side.name not in types:
            continue
        value = _constant(value_side, query, request)
        exact = _EXACT.get(types[key_side.name])
        if exact is None or value is None or not isinstance(value, exact):
            return None
        if isinstance(value, bool) != (types[key_side.name] is AttrType.BOOL):
            return None  # True == 1 in Python, not in a store
        return key_side.name, (value,)
    return None


def _constant(expr: Expr, query: RetrievalQuery, request: Mapping[str, Any] | None) -> Any:
    if isinstance(expr, Literal):
        return expr.value
    if isinstance(expr, Attr) and is_request_attr(expr, query) and request is not None:
        return request.get(expr.name)
    return None
