"""Answer a SELECT over a pre-aggregated table (docs/preaggregation.md).

A table is stored as the partial rows of its one-level rollup: up to ``workers`` rows per interval and
dimension values, plus one row per row inserted without pre-aggregation.  A validated
:class:`~tiltframe.model.tables.TableQuery` says everything needed: WHERE selects the partial rows (it
reads only the time column and dimensions, which every partial row has), the rows are merged by the
query's keys, and outputs, HAVING, ORDER BY and LIMIT are evaluated over the merged rows in pandas.

The merge runs in the store's GROUP BY where that gives the same rows
(:mod:`tiltframe.retrieval.select_pushdown`); otherwise the partial rows are read, filtered by WHERE and
merged in pandas with the registry's merges (:mod:`tiltframe.store.reads.pandas_merges`, through a layout whose
group-by is the query's keys).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pandas as pd

from tiltframe.aggregates.layout import AGG_EVENT_TIMESTAMP, AGG_TIMESTAMP, SHARD_ID, AggregationLayout
from tiltframe.aggregates.measures import measure_types
from tiltframe.aggregates.states import Build
from tiltframe.errors import StoreError
from tiltframe.model.aggregations import AggregateItem, AggregationSpec, KeyItem
from tiltframe.model.app import AppSpec
from tiltframe.model.durations import Granularity, Unit
from tiltframe.model.expressions import Attr, Binary, Expr, Literal
from tiltframe.model.streams import AttrType
from tiltframe.model.tables import WORKER_COLUMN, TableQuery, TableSpec
from tiltframe.retrieval.evaluate import evaluate_column, holds
from tiltframe.retrieval.pandas_states import SEQ, TS, arg_column, build_states
from tiltframe.retrieval.select_pushdown import merged_in_store
from tiltframe.store.base import Store
from tiltframe.store.raw_rows import read_raw_rows, unfolded_raw_rows
from tiltframe.store.reads.pandas_merges import finalize, merge_rows

__all__ = ["select"]

_FLIPPED = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "=="}


def select(app: AppSpec, query: TableQuery, store: Store) -> pd.DataFrame:
    """The rows of a validated table query (``parse_table_query``), one column per output, typed as
    ``query.output_types``."""
    table = app.table(query.table, query.table_pos)
    if table.preaggregation is None or table.time_column is None:
        frame = _raw_frame(table, query, store)
    else:
        frame = _stored_frame(app, table, query, store)
    out = pd.DataFrame({name: evaluate_column(expr, frame, None) for name, expr in query.outputs}, index=frame.index)
    if query.order_by:
        order = pd.DataFrame({f"_{i}": evaluate_column(o.expr, out, None) for i, o in enumerate(query.order_by)},
                             index=out.index)
        ranked = order.sort_values(list(order.columns), ascending=[o.ascending for o in query.order_by],
                                   kind="stable")
        out = out.loc[ranked.index]
    if query.limit is not None:
        out = out.head(query.limit)
    types = dict(query.output_types)
    return pd.DataFrame({name: _typed(out[name], types[name]) for name in out.columns})


def _stored_frame(app: AppSpec, table: TableSpec, query: TableQuery, store: Store) -> pd.DataFrame:
    """The rows a pre-aggregated table's query reads: partial rows as they are, or merged by its keys."""
    assert table.time_column is not None
    layout = AggregationLayout.of(app, table.name)
    unfolded = unfolded_raw_rows(store, table, layout)
    if unfolded:
        msg = (f"table {table.name} holds {unfolded} rows stored raw before its pre-aggregation was enabled, which "
               f"its rollup does not hold yet: run 'tiltframe migrate' (or insert into it) to fold them in")
        raise StoreError(msg)
    start, end = _time_range(query.where, table.time_column)
    if query.partials:
        rows = store.read(layout, layout.spec.finest, start, end, with_shards=True)
        frame = _partial_frame(rows, layout, table)
        return _filter(frame, query.where)
    dimensions = tuple(k for k in query.keys if k != table.time_column)
    merging = _merging_layout(layout, dimensions, query.measures)
    merged = merged_in_store(store, layout, merging, query, table.time_column, start, end)
    if merged is None:
        rows = store.read(layout, layout.spec.finest, start, end)
        if query.where is not None and not rows.empty:
            keys = pd.DataFrame({table.time_column: rows[AGG_TIMESTAMP], **{d: rows[d] for d in layout.spec.group_by}})
            rows = rows[holds(query.where, keys, None)].reset_index(drop=True)
        if table.time_column not in query.keys:  # every interval merges into one
            rows = rows.assign(**{AGG_TIMESTAMP: np.zeros(len(rows), dtype="int64")})
        merged = merge_rows(rows, merging)
    frame = _merged_frame(merged, merging, table, query)
    return _filter(frame, query.having)


def _raw_frame(table: TableSpec, query: TableQuery, store: Store) -> pd.DataFrame:
    """A raw table's stored rows, filtered by WHERE; grouped by the query's keys with its aggregates
    computed from them (the registry's states, built and finalized in pandas), then filtered by HAVING."""
    rows = _filter(read_raw_rows(store, table), query.where)
    if not query.merged:
        return rows
    stream = table.as_stream()
    spec = AggregationSpec(name=table.name, source=stream.name,
                           select=(*(KeyItem(k) for k in query.keys), *query.aggregates),
                           granularities=(Granularity(Unit.SECONDS),), group_by=query.keys)
    layout = AggregationLayout(spec, stream, "UTC")
    events = pd.DataFrame({k: rows[k] for k in query.keys}, index=rows.index)
    events[AGG_TIMESTAMP] = 0
    events[TS] = 0  # rows have no time: the first and the last are the first and last inserted
    events[SEQ] = np.arange(len(rows))
    for item in query.aggregates:
        if item.arg is not None:
            events[arg_column(item.alias)] = evaluate_column(item.arg, rows, None)
    states = build_states(events, layout, 0)
    if events.empty and not query.keys:  # SQL: aggregates over no rows are one row (counts 0, others NULL)
        states = pd.DataFrame({AGG_TIMESTAMP: [0], AGG_EVENT_TIMESTAMP: [None],
                               **{s.name: [0 if s.state.build is Build.COUNT else None] for s in layout.states}})
    final = finalize(states, layout)
    if query.keys:
        final = final.sort_values(list(query.keys), kind="stable")
    return _filter(final.reset_index(drop=True), query.having)


def _merged_frame(
    merged: pd.DataFrame, merging: AggregationLayout, table: TableSpec, query: TableQuery
) -> pd.DataFrame:
    """One row per value of ``query.keys``: the keys by their query names and the measures read, ordered
    by the keys.  ``merged``: the partial rows merged by ``merging``'s keys and the interval (0 when the
    time column is not a key), in any order."""
    time_column = table.time_column
    assert time_column is not None
    final = finalize(merged, merging)
    sort = [AGG_TIMESTAMP if k == time_column else k for k in query.keys]
    if sort:
        final = final.sort_values(sort, kind="stable")
    final = final.reset_index(drop=True)
    columns: dict[str, Any] = {k: final[AGG_TIMESTAMP if k == time_column else k] for k in query.keys}
    measures = measure_types(table)
    columns.update({c: final[c] for c in final.columns if c in measures})
    return pd.DataFrame(columns, index=final.index)


def _merging_layout(
    layout: AggregationLayout, dimensions: tuple[str, ...], measures: tuple[str, ...]
) -> AggregationLayout:
    """``layout`` grouped by ``dimensions`` alone, keeping the aggregates of ``measures`` (sketches not read
    are not merged)."""
    select = tuple(
        item for item in layout.spec.select
        if (isinstance(item, KeyItem) and item.name in dimensions)
        or (isinstance(item, AggregateItem) and item.alias in measures)
    )
    spec = dataclasses.replace(layout.spec, group_by=dimensions, select=select)
    return dataclasses.replace(layout, spec=spec)


def _partial_frame(rows: pd.DataFrame, layout: AggregationLayout, table: TableSpec) -> pd.DataFrame:
    """Each stored partial row as it is: time column, ``SHARD_ID``, dimensions, each measure finalized on
    the row alone; ordered as stored (interval, dimensions, worker)."""
    time_column = table.time_column
    assert time_column is not None
    rows = rows.sort_values([*layout.key_names, SHARD_ID], kind="stable").reset_index(drop=True)
    final = finalize(rows, layout)
    columns: dict[str, Any] = {time_column: final[AGG_TIMESTAMP], WORKER_COLUMN: rows[SHARD_ID]}
    columns.update({d: final[d] for d in layout.spec.group_by})
    columns.update({name: final[name] for name in measure_types(table)})
    return pd.DataFrame(columns, index=final.index)


def _time_range(where: Expr | None, time_column: str) -> tuple[int | None, int | None]:
    """``[start, end)`` of interval starts implied by comparisons of the time column with a whole number
    joined by ``and`` at the top of WHERE; only narrows the read, the whole WHERE still filters."""
    start: int | None = None
    end: int | None = None
    stack = [where] if where is not None else []
    while stack:
        e = stack.pop()
        if not isinstance(e, Binary):
            continue
        if e.op == "and":
            stack += [e.left, e.right]
            continue
        op, value = e.op, None
        if isinstance(e.left, Attr) and e.left.name == time_column and _whole(e.right):
            value = e.right.value  # type: ignore[union-attr]
        elif isinstance(e.right, Attr) and e.right.name == time_column and _whole(e.left):
            op, value = _FLIPPED.get(op, op), e.left.value  # type: ignore[union-attr]
        if not isinstance(value, int):
            continue
        low = {">=": value, ">": value + 1, "==": value}.get(op)
        high = {"<": value, "<=": value + 1, "==": value + 1}.get(op)
        if low is not None:
            start = low if start is None else max(start, low)
        if high is not None:
            end = high if end is None else min(end, high)
    return start, end


def _whole(expr: Expr) -> bool:
    return isinstance(expr, Literal) and isinstance(expr.value, int) and not isinstance(expr.value, bool)


def _filter(frame: pd.DataFrame, condition: Expr | None) -> pd.DataFrame:
    if condition is None or frame.empty:
        return frame
    return frame[holds(condition, frame, None)].reset_index(drop=True)


def _typed(values: pd.Series, t: AttrType) -> pd.Series:
    """A column of type ``t``: whole numbers stay whole (``Int64`` only where NULL), NULL doubles NaN."""
    values = values.reset_index(drop=True)
    if t.is_integral:
        typed = pd.to_numeric(values).astype("Int64")
        return typed if typed.isna().any() else typed.astype("int64")
    if t.is_numeric:
        return pd.Series(pd.to_numeric(values).astype("Float64").to_numpy(dtype="float64", na_value=np.nan))
    if t is AttrType.BOOL:
        typed = values.astype("boolean")
        return typed if typed.isna().any() else typed.astype(bool)
    return values
