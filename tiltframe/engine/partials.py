"""Partial states in Spark: events -> finest buckets, and finer buckets -> the next coarser level.

The registry's ``Build`` and ``Merge`` primitives are translated to Spark aggregate functions here and
nowhere else.  Non-aggregate items keep the values of the latest event: the maximum of a struct whose
leading fields are (event time, batch, arrival seq) carries the values of exactly that event.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from tiltframe.engine.buckets import bucket_start
from tiltframe.engine.events import EVENT_TS, SPARK_TYPES
from tiltframe.engine.expressions import to_column
from tiltframe.functions.registry import Build, Merge
from tiltframe.spec.durations import Granularity
from tiltframe.store.layout import (
    AGG_ARRIVAL_BATCH,
    AGG_ARRIVAL_SEQ,
    AGG_EVENT_TIMESTAMP,
    AGG_TIMESTAMP,
    AggregationLayout,
)

ARRIVAL_SEQ = "_arrival_seq"
_LATEST = "_latest"

_BUILD = {Build.SUM: F.sum, Build.MIN: F.min, Build.MAX: F.max}
_MERGE = {Merge.SUM: F.sum, Merge.MIN: F.min, Merge.MAX: F.max}


def _build(build: Build, arg: Column | None) -> Column:
    if build is Build.COUNT:
        return F.count(arg if arg is not None else F.lit(1))
    if arg is None:
        msg = f"{build.value} needs an argument"
        raise ValueError(msg)
    return _BUILD[build](arg)


def _layout_order(df: DataFrame, layout: AggregationLayout) -> DataFrame:
    """Flatten the latest-event struct and put columns in table order with their stored types."""
    cols = []
    for name, attr_type in layout.column_types.items():
        source = F.col(f"{_LATEST}.{name}") if layout.tracks_arrival and _is_latest(layout, name) else F.col(name)
        cols.append(source.cast(SPARK_TYPES[attr_type]).alias(name))
    return df.select(*cols)


def _is_latest(layout: AggregationLayout, name: str) -> bool:
    return name in layout.order_columns or any(v.name == name for v in layout.values)


def finest_partials(events: DataFrame, layout: AggregationLayout, batch_id: int) -> DataFrame:
    """Partial states per finest bucket and group from typed, valid events of one batch."""
    stream = layout.stream
    aggs = [
        _build(s.state.build, to_column(s.item.arg, stream) if s.item.arg is not None else None).alias(s.name)
        for s in layout.states
    ]
    if layout.tracks_arrival:
        latest = F.struct(
            F.col(EVENT_TS).alias(AGG_EVENT_TIMESTAMP),
            F.lit(batch_id).cast("long").alias(AGG_ARRIVAL_BATCH),
            F.col(ARRIVAL_SEQ).alias(AGG_ARRIVAL_SEQ),
            *[to_column(v.expr, stream).cast(SPARK_TYPES[v.type]).alias(v.name) for v in layout.values],
        )
        aggs.append(F.max(latest).alias(_LATEST))
    else:
        aggs.append(F.max(EVENT_TS).alias(AGG_EVENT_TIMESTAMP))
    bucket = bucket_start(F.col(EVENT_TS), layout.spec.finest, layout.zone).alias(AGG_TIMESTAMP)
    grouped = events.groupBy(bucket, *[F.col(k.name) for k in layout.keys]).agg(*aggs)
    return _layout_order(grouped, layout)


def merge_partials(partials: DataFrame, layout: AggregationLayout, g: Granularity) -> DataFrame:
    """Roll partial rows of a finer level up to granularity ``g`` (merge, never rebuild from events)."""
    aggs = [_MERGE[s.merge](F.col(s.name)).alias(s.name) for s in layout.states]
    if layout.tracks_arrival:
        latest = F.struct(*[F.col(c) for c in layout.order_columns], *[F.col(v.name) for v in layout.values])
        aggs.append(F.max(latest).alias(_LATEST))
    else:
        aggs.append(F.max(AGG_EVENT_TIMESTAMP).alias(AGG_EVENT_TIMESTAMP))
    bucket = bucket_start(F.col(AGG_TIMESTAMP), g, layout.zone).alias(AGG_TIMESTAMP)
    grouped = partials.groupBy(bucket, *[F.col(k.name) for k in layout.keys]).agg(*aggs)
    return _layout_order(grouped, layout)
