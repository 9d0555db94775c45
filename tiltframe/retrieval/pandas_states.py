"""Partial states of a continuous query's groups, built and merged in pandas inside the stateful processor.

A continuous query keeps the same partial states as an aggregation (the registry's states), laid out by
an :class:`AggregationLayout` whose ``AGG_TIMESTAMP`` is the window start: merging and finalizing reuse
:func:`tiltframe.store.reads.pandas_merges.merge_rows` and :func:`~tiltframe.store.reads.pandas_merges.finalize`.
Only the build from events is translated here, because the events of a micro-batch reach the processor as
pandas frames (the registry's ``Build`` primitives as pandas group operations:
``aggregates/targets/in_pandas.py``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tiltframe.aggregates import registry
from tiltframe.aggregates.layout import AGG_EVENT_TIMESTAMP, AggregationLayout, expression_type
from tiltframe.aggregates.targets.in_pandas import BUILD, BuildInput
from tiltframe.lang.checks.continuous_queries import output_scope
from tiltframe.model.aggregations import AggregationSpec, KeyItem
from tiltframe.model.app import AppSpec
from tiltframe.model.continuous import ContinuousQuery
from tiltframe.model.durations import Granularity, Unit
from tiltframe.model.expressions import Attr
from tiltframe.model.streams import AttrType

#: Columns of the events the processor receives: event time (epoch ms) and arrival position.
TS = "tf_ts"
SEQ = "tf_seq"


def arg_column(alias: str) -> str:
    """The input column holding the argument of aggregate ``alias`` (computed in Spark)."""
    return f"tf_arg{alias}"


def layout_for(app: AppSpec, query: ContinuousQuery) -> AggregationLayout:
    """The partial-state layout of ``query``'s groups: keys, then the registry states of its aggregates."""
    stream = app.stream(query.stream)
    spec = AggregationSpec(
        name=query.name or "query",
        source=query.stream,
        select=(*(KeyItem(k) for k in query.keys), *query.aggregates),
        granularities=(Granularity(Unit.SECONDS),),
        group_by=query.keys,
    )
    return AggregationLayout(spec, stream, "UTC")


def output_types(app: AppSpec, query: ContinuousQuery) -> dict[str, AttrType]:
    """The type of each output column of ``query``, inferred like an aggregation's expressions over a
    stream of its keys, window columns and finalized aggregates."""
    scope = output_scope(query, app.stream(query.stream))
    return {name: expression_type(expr, scope) for name, expr in query.outputs}


def array_elements(app: AppSpec, query: ContinuousQuery) -> dict[str, AttrType]:
    """The element type of each list output (a ``group_array`` selected as it is): its argument's type."""
    stream = app.stream(query.stream)
    items = {item.alias: item for item in query.aggregates}
    return {
        name: expression_type(items[expr.name].arg, stream)  # type: ignore[arg-type]
        for name, expr in query.outputs
        if isinstance(expr, Attr) and expr.name in items and not registry.get(items[expr.name].function).bounded
    }


def build_states(events: pd.DataFrame, layout: AggregationLayout, batch: int) -> pd.DataFrame:
    """One row per (AGG_TIMESTAMP, keys) of ``events``: every state column built from the group's events
    (``in_pandas.BUILD``), and ``AGG_EVENT_TIMESTAMP``.  ``batch`` stands for the arrival batch of first/last
    tie-breaks."""
    keys = list(layout.key_names)
    grouped = events.groupby(keys, sort=False, dropna=False)
    out = grouped.size().reset_index()[keys]
    for s in layout.states:
        arg = arg_column(s.item.alias) if s.item.arg is not None else None
        settings = layout.settings(s.item) if s.merge.is_sketch else None
        values = BUILD[s.state.build](BuildInput(events, grouped, arg, TS, SEQ, batch, s.state.field, s.merge,
                                                 settings))
        out[s.name] = np.asarray(values, dtype=object if values.dtype == object else None)
    out[AGG_EVENT_TIMESTAMP] = grouped[TS].max().to_numpy()
    return out
