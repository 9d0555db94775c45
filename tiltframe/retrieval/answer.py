"""Siddhi's query section over the retrieved rows of one request: select (or every attribute), group by with
aggregates, having, order by, limit and offset, in pandas.

The rows come finalized and filtered by ``on`` (:mod:`tiltframe.retrieval.retrieve`), one row per bucket and
key: a retrieval's answer is small next to the events it summarises, and each request is answered on its
own.  Attributes arrive resolved by validation (``lang.checks.retrieval``): a request attribute is one
value for the whole request, an aggregation attribute a column of the rows, and an unqualified name in
``having`` or ``order by`` a selected column.

A grouped retrieval (``group by``, or an aggregate such as ``sum(total)`` in select or having) has one row
per group, groups in the order of their first row (rows come by ``AGG_TIMESTAMP`` and keys).  An attribute
that is not grouped may still order the groups, as Siddhi allows: it takes its value in the group's last
row, so ``order by AGG_TIMESTAMP`` orders groups by their latest bucket.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from tiltframe.aggregates import registry
from tiltframe.aggregates.layout import AGG_TIMESTAMP, AggregationLayout
from tiltframe.errors import QueryError
from tiltframe.lang.checks.retrieval import aggregate_calls, is_grouped
from tiltframe.model.aggregations import AggregateItem, ExpressionItem, KeyItem
from tiltframe.model.expressions import Attr, Call, Expr, output_name
from tiltframe.model.queries import RetrievalQuery
from tiltframe.retrieval.evaluate import as_column, compute, is_request_attr, request_value
from tiltframe.store.reads.pandas_merges import numbered
from tiltframe.timeutil.time_columns import AGG_TIME

__all__ = ["all_columns", "answer"]

Lookup = Callable[[Attr], Any]


def all_columns(layout: AggregationLayout) -> list[str]:
    """The aggregation's attributes as Siddhi returns them without a select clause: ``AGG_TIMESTAMP``, then
    the aggregation's select items in the order they were written, with ``AGG_TIME`` after ``AGG_TIMESTAMP``
    and any group-by attribute the aggregation does not select before the items."""
    spec = layout.spec
    selected = {i.name for i in spec.select if isinstance(i, KeyItem)}
    names = [AGG_TIMESTAMP, AGG_TIME, *(k for k in spec.group_by if k not in selected)]
    for item in spec.select:
        if isinstance(item, KeyItem):
            names.append(item.name)  # keys are stored, and answered, under the stream attribute's name
        elif isinstance(item, AggregateItem):
            fn = registry.get(item.function)
            names.extend(fn.output_names(item.alias, layout.settings(item)))
        elif isinstance(item, ExpressionItem):
            names.append(item.alias)
    return names


def answer(
    rows: pd.DataFrame, layout: AggregationLayout, query: RetrievalQuery, request: Mapping[str, Any] | None
) -> pd.DataFrame:
    """The answer to ``query`` from its retrieved ``rows`` (finalized, ``on`` applied)."""
    rows = rows if numbered(rows) else rows.reset_index(drop=True)

    def row_value(a: Attr) -> Any:
        return request_value(a, request) if is_request_attr(a, query) else rows[a.name]

    aggregates: dict[Call, pd.Series] | None = None
    if is_grouped(query):
        out, env, aggregates = _grouped(rows, query, row_value)
    else:
        out, env = _rows(rows, layout, query, request, row_value), row_value
    if query.having is not None:
        keep = _truth(_evaluate(query.having, out, env, aggregates), out.index)
        out = out[keep]
    if query.order_by:
        keys = pd.DataFrame(
            {f"_{i}": as_column(_evaluate(o.expr, out, env, None), out.index) for i, o in enumerate(query.order_by)},
            index=out.index,
        )
        order = keys.sort_values(list(keys.columns), ascending=[o.ascending for o in query.order_by], kind="stable",
                                 na_position="last")
        out = out.loc[order.index]
    start = query.offset or 0
    stop = None if query.limit is None else start + query.limit
    if start or stop is not None:
        out = out.iloc[start:stop]
    return out if numbered(out) else out.reset_index(drop=True)


def _rows(
    rows: pd.DataFrame, layout: AggregationLayout, query: RetrievalQuery, request: Mapping[str, Any] | None,
    row_value: Lookup,
) -> pd.DataFrame:
    """One output row per retrieved row: the select items, or every attribute (the request's first in a join)."""
    columns: dict[str, Any] = {}
    if query.select is None:
        if query.request_stream is not None and request is not None:
            columns.update({name: as_column(value, rows.index) for name, value in request.items()})
        columns.update({name: rows[name] for name in all_columns(layout) if name in rows.columns})
    else:
        for item in query.select:
            columns[output_name(item.expr, item.alias)] = as_column(_evaluate(item.expr, rows, row_value, None),
                                                                    rows.index)
    return pd.DataFrame(columns, index=rows.index)


def _evaluate(expr: Expr, out: pd.DataFrame, env: Lookup, aggregates: Mapping[Call, pd.Series] | None) -> Any:
    """``expr`` with unqualified names read from the output columns and the rest from ``env``."""

    def attr(a: Attr) -> Any:
        return out[a.name] if a.qualifier is None else env(a)

    def call(c: Call) -> Any:
        if aggregates is None or c not in aggregates:  # pragma: no cover - validation keeps others out
            msg = f"function {c.name}() is not available here"
            raise QueryError(msg)
        return aggregates[c]

    return compute(expr, attr, call)


def _grouped(
    rows: pd.DataFrame, query: RetrievalQuery, row_value: Lookup
) -> tuple[pd.DataFrame, Lookup, dict[Call, pd.Series]]:
    """One row per group; the lookup that gives having and order by each group's values, and each aggregate
    of select and having per group."""
    ids, count = _group_ids(rows, query, row_value)
    index = pd.RangeIndex(count)
    # rows are numbered 0..n-1, so a group's last row is its greatest number
    last = rows.loc[pd.Series(rows.index).groupby(ids, sort=True).max().to_numpy()].set_index(index)
    calls = [c for e in _grouped_exprs(query) for c in aggregate_calls(e)]
    aggregates = {c: _aggregate(c, rows, ids, count, row_value) for c in dict.fromkeys(calls)}

    def group_value(a: Attr) -> Any:
        value = row_value(a)
        return last[a.name] if isinstance(value, pd.Series) else value

    empty = pd.DataFrame(index=index)
    columns = {
        output_name(item.expr, item.alias): as_column(_evaluate(item.expr, empty, group_value, aggregates), index)
        for item in query.select or ()
    }
    return pd.DataFrame(columns, index=index), group_value, aggregates


def _grouped_exprs(query: RetrievalQuery) -> list[Expr]:
    return [*(i.expr for i in query.select or ()), *([query.having] if query.having is not None else [])]


def _group_ids(rows: pd.DataFrame, query: RetrievalQuery, row_value: Lookup) -> tuple[np.ndarray, int]:
    """Each row's group number, numbered in order of first appearance, and the number of groups."""
    if rows.empty:
        return np.zeros(0, dtype=np.int64), 0
    if not query.group_by:
        return np.zeros(len(rows), dtype=np.int64), 1
    keys = pd.DataFrame({f"_{i}": as_column(row_value(g), rows.index) for i, g in enumerate(query.group_by)
                         if isinstance(g, Attr)}, index=rows.index)
    ids = keys.groupby(list(keys.columns), sort=False, dropna=False).ngroup().to_numpy()
    return ids, int(ids.max()) + 1


def _aggregate(call: Call, rows: pd.DataFrame, ids: np.ndarray, count: int, row_value: Lookup) -> pd.Series:
    """One aggregate of the retrieved rows per group (Siddhi's query aggregators; NULLs skipped, as there)."""
    name = registry.get(call.name).name
    index = pd.RangeIndex(count)
    if not call.args:  # count(): rows
        return pd.Series(np.bincount(ids, minlength=count), index=index, dtype="int64")

    def no_calls(c: Call) -> Any:  # pragma: no cover - validation refuses nested aggregates
        msg = f"function {c.name}() cannot be used inside an aggregate"
        raise QueryError(msg)

    values = as_column(compute(call.args[0], row_value, no_calls), rows.index)
    if name in ("sum", "avg", "stdDev") and pd.api.types.is_bool_dtype(values.dtype):
        values = values.astype("int64")
    if name == "sum" and pd.api.types.is_integer_dtype(values.dtype):
        values = values.astype("Int64")  # exact, and NULL for a group with no value
    grouped = values.groupby(ids, sort=True)
    if name == "sum":
        result = grouped.sum(min_count=1)
    elif name == "avg":
        result = grouped.mean()
    elif name == "min":
        result = grouped.min()
    elif name == "max":
        result = grouped.max()
    elif name == "count":
        result = grouped.count().astype("int64")
    elif name == "stdDev":
        result = grouped.std(ddof=0)
    elif name == "distinctCount":
        result = grouped.nunique(dropna=True).astype("int64")
    else:  # pragma: no cover - RETRIEVAL_AGGREGATES and this list are kept equal by a test
        msg = f"aggregate {call.name}() is not available in a retrieval"
        raise QueryError(msg)
    return result.reindex(index)


def _truth(value: Any, index: pd.Index) -> np.ndarray:
    """Rows where a condition holds; NULL is false, as in SQL."""
    return as_column(value, index).astype("boolean").fillna(False).to_numpy(dtype=bool)
