"""Partial states in Spark: events -> finest buckets, and finer buckets -> the next coarser level.

The registry's ``Build`` and ``Merge`` primitives are translated to Spark aggregate functions here and
nowhere else.  Non-aggregate items keep the values of the latest event: the maximum of a struct whose
leading fields are (event time, batch, arrival seq) carries the values of exactly that event.
"""

from __future__ import annotations

import functools

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from tiltframe.engine.arrival import ARRIVAL_SEQ, RECORD
from tiltframe.engine.buckets import bucket_start
from tiltframe.engine.events import EVENT_TS, REASON, SPARK_TYPES
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

LEVEL = "_tiltframe_level"
#: The level tag of recorded (moved or rejected) events in ``all_levels``.
RECORD_LEVEL = -1
REJECTED = "_tiltframe_rejected"
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


def _grouped(
    df: DataFrame, bucket: Column, layout: AggregationLayout, aggs: dict[str, Column], bad: Column
) -> DataFrame:
    """One ``groupBy().agg()`` whose output is already in table order, led by the reject tag.

    Casting inside the aggregation keeps each level a single DataFrame operation: every extra operation
    re-analyses the whole chained plan.
    """
    types = layout.column_types
    keys = [F.col(k.name) for k in layout.keys]
    grouping = [bad.alias(REJECTED), bucket.alias(AGG_TIMESTAMP), *keys]
    if not layout.tracks_arrival:
        ordered = [aggs[n].cast(SPARK_TYPES[types[n]]).alias(n) for n in types if n in aggs]
        return df.groupBy(*grouping).agg(*ordered)
    states = (aggs[s.name].alias(s.name) for s in layout.states)
    grouped = df.groupBy(*grouping).agg(aggs[_LATEST].alias(_LATEST), *states)
    flat = [
        (F.col(f"{_LATEST}.{n}") if n in layout.order_columns or n in _value_names(layout) else F.col(n))
        .cast(SPARK_TYPES[t])
        .alias(n)
        for n, t in types.items()
    ]
    return grouped.select(REJECTED, *flat)


def _value_names(layout: AggregationLayout) -> set[str]:
    return {v.name for v in layout.values}


def finest_partials(events: DataFrame, layout: AggregationLayout, batch_id: int) -> DataFrame:
    """Partial states per finest bucket and group from the typed events of one batch (level 0).

    Rejected events are grouped apart (``_rejected`` true, no bucket), so their count comes out of the
    same aggregation: an extra pass or an ``observe`` would stop Spark from sharing this shuffle with the
    coarser levels.
    """
    stream = layout.stream
    aggs = {
        s.name: _build(s.state.build, to_column(s.item.arg, stream) if s.item.arg is not None else None)
        for s in layout.states
    }
    if layout.tracks_arrival:
        aggs[_LATEST] = F.max(
            F.struct(
                F.col(EVENT_TS).alias(AGG_EVENT_TIMESTAMP),
                F.lit(batch_id).cast("long").alias(AGG_ARRIVAL_BATCH),
                F.col(ARRIVAL_SEQ).alias(AGG_ARRIVAL_SEQ),
                *[to_column(v.expr, stream).cast(SPARK_TYPES[v.type]).alias(v.name) for v in layout.values],
            )
        )
    else:
        aggs[AGG_EVENT_TIMESTAMP] = F.max(EVENT_TS)
    bad = F.col(REASON).isNotNull()
    bucket = F.when(~bad, bucket_start(F.col(EVENT_TS), layout.spec.finest, layout.zone))
    return _grouped(events, bucket, layout, aggs, bad)


def merge_partials(partials: DataFrame, layout: AggregationLayout, g: Granularity) -> DataFrame:
    """Roll partial rows of a finer level up to granularity ``g`` (merge, never rebuild from events)."""
    aggs = {s.name: _MERGE[s.merge](F.col(s.name)) for s in layout.states}
    if layout.tracks_arrival:
        aggs[_LATEST] = F.max(
            F.struct(*[F.col(c) for c in layout.order_columns], *[F.col(v.name) for v in layout.values])
        )
    else:
        aggs[AGG_EVENT_TIMESTAMP] = F.max(AGG_EVENT_TIMESTAMP)
    bucket = bucket_start(F.col(AGG_TIMESTAMP), g, layout.zone)
    # The reject tag passes through as a grouping column: a filter here would be pushed below the finest
    # aggregation by the optimizer, and the levels could no longer share its shuffle.
    return _grouped(partials, bucket, layout, aggs, F.col(REJECTED))


def all_levels(
    events: DataFrame, layout: AggregationLayout, batch_id: int, records: DataFrame | None = None
) -> DataFrame:
    """Every granularity's partial rows in one DataFrame, tagged by level index (0 = finest) and by
    ``_rejected`` (groups of rejected events, whose level-0 ``AGG_COUNT`` counts them; drop them all).

    Each level rolls up the one before it, so Spark reuses the shared shuffles and one job computes all.
    The level tag is added on the output side only: inside the chain it would make the finest shuffle of
    one branch differ from another's, and the events would be aggregated once per level.

    ``records`` (one struct column, ``RECORD``) rides along as level ``RECORD_LEVEL``, every other
    column null: the events a late-event policy moved or rejected come out of the same job, which
    shares the arrival-order shuffle with the aggregation instead of repeating it.
    """
    level = finest_partials(events, layout, batch_id)
    no_record = F.lit(None).cast(records.schema[RECORD].dataType) if records is not None else None

    def tag(i: int, df: DataFrame) -> DataFrame:
        return df.select(F.lit(i).alias(LEVEL), "*", *([no_record.alias(RECORD)] if no_record is not None else []))

    tagged = [tag(0, level)]
    for i, g in enumerate(layout.spec.granularities[1:], start=1):
        level = merge_partials(level, layout, g)
        tagged.append(tag(i, level))
    if records is not None:
        nulls = [F.lit(None).cast(f.dataType).alias(f.name) for f in level.schema.fields]
        tagged.append(records.select(F.lit(RECORD_LEVEL).alias(LEVEL), *nulls, RECORD))
    return functools.reduce(DataFrame.union, tagged)
