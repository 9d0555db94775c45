"""The merge of ``tf.select`` in the store's GROUP BY, where it gives what the pandas merge gives.

:mod:`tiltframe.retrieval.select` merges a pre-aggregated table's partial rows by the query's keys.  The
store can do that merge (``Store.read_merged``) when every state of the merging layout merges by SUM, MIN
or MAX without a combine function (no sketch, no first/last, no latest-event value), the keys it groups by
are of a type SQL groups exactly (text, whole numbers, booleans), and WHERE is made only of terms SQL
applies exactly, joined by ``and``: the time column compared with a whole number, a dimension compared
with a literal of its own type (booleans: ``==`` and ``!=`` only).  Anything else is merged in pandas
from the partial rows, as is a read the store declines (``read_merged`` answers None).  HAVING, outputs,
ORDER BY and LIMIT are evaluated over the merged rows either way.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from tiltframe.aggregates.layout import AGG_TIMESTAMP, AggregationLayout
from tiltframe.aggregates.states import LONG_MAX, LONG_MIN
from tiltframe.model.expressions import Attr, Binary, Expr, Literal, Unary
from tiltframe.model.streams import AttrType
from tiltframe.model.tables import TableQuery
from tiltframe.retrieval.pushdown import conjuncts
from tiltframe.store.base import KeyTerm, Store
from tiltframe.store.reads.merged_reads import COMPARISONS, EXACT_KEYS, ORDERING, merges_in_sql

__all__ = ["key_terms", "merged_in_store"]

_FLIPPED = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}


def merged_in_store(
    store: Store, layout: AggregationLayout, merging: AggregationLayout, query: TableQuery, time_column: str,
    start: int | None, end: int | None,
) -> pd.DataFrame | None:
    """The partial rows of ``layout`` selected by ``query.where`` and merged by ``merging``'s keys (and the
    interval when ``time_column`` is a key) in the store, or None where that might differ from merging
    them in pandas.  ``start``/``end``: the interval range WHERE implies (``select._time_range``)."""
    if merging.tracks_arrival or not merges_in_sql(merging.states):
        return None
    types = {k.name: k.type for k in layout.keys}
    by = merging.spec.group_by
    if any(types[k] not in EXACT_KEYS for k in by):
        return None
    terms = key_terms(query.where, time_column, types)
    if terms is None:
        return None
    if not all(v is None or LONG_MIN <= v <= LONG_MAX for v in (start, end)):
        start = end = None  # the terms select the same rows; a bound beyond 64 bits cannot be bound
    return store.read_merged(layout, layout.spec.finest, by, [s.name for s in merging.states], start, end,
                             by_interval=time_column in query.keys, where=terms)


def key_terms(where: Expr | None, time_column: str, types: Mapping[str, AttrType]) -> tuple[KeyTerm, ...] | None:
    """``where`` as terms a store applies exactly (the time column as ``AGG_TIMESTAMP``; ``types``: the
    dimensions'), or None when any of its ``and``-joined parts is not one."""
    terms = []
    for part in conjuncts(where):
        term = _term(part, time_column, types)
        if term is None:
            return None
        terms.append(term)
    return tuple(terms)


def _term(expr: Expr, time_column: str, types: Mapping[str, AttrType]) -> KeyTerm | None:
    """``column op literal`` (either way round) whose literal is of the column's own type, as SQL and
    pandas compare it alike; else None."""
    if not isinstance(expr, Binary) or expr.op not in COMPARISONS:
        return None
    if isinstance(expr.left, Attr):
        attr, value, op = expr.left, _constant(expr.right), expr.op
    elif isinstance(expr.right, Attr):
        attr, value, op = expr.right, _constant(expr.left), _FLIPPED[expr.op]
    else:
        return None
    if attr.name == time_column:
        return KeyTerm(AGG_TIMESTAMP, op, value) if _long(value) else None
    kind = types.get(attr.name)
    if kind not in EXACT_KEYS:
        return None
    if kind is AttrType.BOOL:
        exact = isinstance(value, bool) and op not in ORDERING
    elif kind is AttrType.STRING:
        exact = isinstance(value, str) and _storable(value)
    else:
        exact = _long(value)
    return KeyTerm(attr.name, op, value) if exact else None


def _constant(expr: Expr) -> object:
    """A literal's value (``-n`` for a whole number too); None for anything else."""
    if isinstance(expr, Unary) and expr.op == "-" and isinstance(expr.operand, Literal) and _long(expr.operand.value):
        return -expr.operand.value  # type: ignore[operator]
    return expr.value if isinstance(expr, Literal) else None


def _long(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and LONG_MIN <= value <= LONG_MAX


def _storable(text: str) -> bool:
    """Text every store binds as it is: UTF-8 without NUL (PostgreSQL refuses NUL; no key holds one)."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return "\x00" not in text
