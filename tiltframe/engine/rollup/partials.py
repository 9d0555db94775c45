"""Partial states in Spark: events -> finest buckets, and finer buckets -> the coarser levels.

Each state column is built and merged by its primitive's Spark aggregate (``aggregates/targets/in_spark``);
the states that merge as one (a combine function's, an event's fields) are folded here.  Non-aggregate
items keep the values of the latest event: the maximum of a struct whose leading fields are (event time,
batch, arrival seq) carries the values of exactly that event.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DataType

from tiltframe.aggregates.layout import (
    AGG_ARRIVAL_BATCH,
    AGG_ARRIVAL_SEQ,
    AGG_EVENT_TIMESTAMP,
    AGG_TIMESTAMP,
    SHARD_ID,
    AggregationLayout,
    StateColumn,
    expression_type,
)
from tiltframe.aggregates.registry import EVENT_ORDER, AggregateFunction
from tiltframe.aggregates.states import Build, Merge
from tiltframe.aggregates.targets.in_spark import BUILD, MERGE, NOT_BUILT, BuildInput, SparkOps
from tiltframe.engine.events.arrival import ARRIVAL_SEQ, RECORD
from tiltframe.engine.events.buckets import bucket_start
from tiltframe.engine.events.spark_expressions import to_column
from tiltframe.engine.events.typed import EVENT_TS, REASON, SPARK_TYPES
from tiltframe.engine.rollup.sum_overflow import ansi_enabled
from tiltframe.model.durations import Granularity, nests_in, rollup_source
from tiltframe.model.expressions import Expr
from tiltframe.model.streams import AttrType

LEVEL = "_tiltframe_level"
#: The level tag of recorded (moved or rejected) events in ``Levels``' output.
RECORD_LEVEL = -1
REJECTED = "_tiltframe_rejected"
_LATEST = "_latest"
_TARGET = "_tiltframe_target"
#: The batch id as a column of the events (``Levels`` adds it): the finest aggregation refers to it, so its
#: columns are built once for every batch instead of holding the batch id as a literal.
_BATCH = "_tiltframe_batch"
#: Prefix of the columns counting, per bucket, the non-null values of each aggregate's argument
#: (``counted_columns``): built at the finest level, summed up the others (every level's rows have the same
#: columns), read by the pipeline at the finest, never stored.
COUNTED = "_tiltframe_counted_"

def counted_columns(layout: AggregationLayout) -> dict[str, str]:
    """Per aggregate item that takes an argument (by alias, in select order), the column counting the
    non-null values of that argument in a bucket; items with the same argument share one.  An event whose
    argument is null (or NaN, which typing makes null) is skipped by the aggregate, so a batch's skipped
    values are its aggregated events less this count."""
    columns: dict[Expr, str] = {}
    return {item.alias: columns.setdefault(item.arg, f"{COUNTED}{len(columns)}")
            for item in layout.argument_measures if item.arg is not None}


def _counting(layout: AggregationLayout) -> dict[str, Expr]:
    """Each counting column and the argument it counts (Spark computes a ``count(arg)`` that a state such
    as ``avg``'s ``COUNT`` already holds once)."""
    columns = counted_columns(layout)
    return {columns[item.alias]: item.arg for item in layout.argument_measures if item.arg is not None}


def _build(state: StateColumn, layout: AggregationLayout, batch: Column, ansi: bool) -> Column:
    """The Spark aggregate of one state column over the events of a bucket (``in_spark.BUILD``)."""
    item = state.item
    arg = to_column(item.arg, layout.stream) if item.arg is not None else None
    build = state.state.build
    if build not in BUILD:
        msg = f"no Spark build for {build}: {NOT_BUILT.get(build, 'unknown')}"
        raise ValueError(msg)
    event = None
    if arg is not None and build in (Build.EARLIEST, Build.LATEST):
        event = F.struct(F.col(EVENT_TS).alias("ts"), batch.alias("batch"), F.col(ARRIVAL_SEQ).alias("seq"),
                         arg.alias("value"))
    arg_type = expression_type(item.arg, layout.stream) if item.arg is not None else None
    return BUILD[build](BuildInput(arg, arg_type, layout.settings(item), state.type.is_integral, ansi, event,
                                   state.state.field))


def _combine_step(fn: AggregateFunction, types: dict[str, DataType]) -> Callable[[Column, Column], Column]:
    """The lambda of Spark's ``aggregate`` that merges one more row into the accumulated state."""
    combine = fn.combine
    assert combine is not None

    def step(acc: Column, row: Column) -> Column:
        merged = combine({k: acc[k] for k in types}, {k: row[k] for k in types}, SparkOps())
        return F.struct(*[merged[k].cast(t).alias(k) for k, t in types.items()])

    return step


def _merge(layout: AggregationLayout, ansi: bool) -> tuple[dict[str, Column | _Field], dict[str, Column]]:
    """Spark aggregates merging the partial rows of a group: per state column, and the struct aggregates
    some of them read a field of.

    The states of an earliest/latest-event merge come from the min or max of a struct ranked by (ts,
    batch, seq); rows without an event never win.  The states of a ``Merge.COMBINE`` function fold the
    group's rows pairwise with its ``combine``: the rows are collected per group (at most as many as the
    finer level has buckets in one coarser bucket) and folded with Spark's ``aggregate``.
    """
    aggs: dict[str, Column | _Field] = {}
    structs: dict[str, Column] = {}
    for columns in layout.state_groups:
        fn, alias = columns[0].function, columns[0].item.alias
        if fn.combine is not None:
            rows = F.collect_list(F.struct(*[F.col(c.name).alias(c.state.suffix) for c in columns]))
            rest = F.slice(rows, 2, F.greatest(F.size(rows) - 1, F.lit(0)))
            step = _combine_step(fn, {c.state.suffix: SPARK_TYPES[c.type] for c in columns})
            structs[f"_fold_{alias}"] = F.aggregate(rest, rows[0], step)
            aggs.update({c.name: _Field(f"_fold_{alias}", c.state.suffix) for c in columns})
            continue
        for c in columns:
            if c.merge not in (Merge.EARLIEST, Merge.LATEST):
                checked = c.state.build is Build.SUM and c.type.is_integral
                aggs[c.name] = MERGE[c.merge](F.col(c.name), checked, ansi)
        for kind in (Merge.EARLIEST, Merge.LATEST):
            event = {c.state.field: c.name for c in columns if c.merge is kind}
            if event:
                name = f"_{kind.value}_{alias}"
                ranked = F.struct(*[F.col(event[f]).alias(f) for f in (*EVENT_ORDER, "value")])
                pick = F.min if kind is Merge.EARLIEST else F.max
                structs[name] = pick(F.when(F.col(event["ts"]).isNotNull(), ranked))
                aggs.update({n: _Field(name, f) for f, n in event.items()})
    return aggs, structs


@dataclass(frozen=True, slots=True)
class _Field:
    """A column taken from a field of one struct aggregate (computed once, read by several columns)."""

    struct: str
    field: str


@dataclass(frozen=True, slots=True)
class _Aggregation:
    """The columns of one ``groupBy().agg()`` and of the projection after it (``None``: none needed).

    Built once and applied to every batch: building columns costs a Py4J round trip per function call,
    which adds up to a good part of a small batch.
    """

    grouping: tuple[Column, ...]
    aggs: tuple[Column, ...]
    flat: tuple[Column | str, ...] | None

    def __call__(self, df: DataFrame) -> DataFrame:
        grouped = df.groupBy(*self.grouping).agg(*self.aggs)
        return grouped if self.flat is None else grouped.select(*self.flat)


def _grouped(
    bucket: Column, layout: AggregationLayout, aggs: dict[str, Column | _Field], structs: dict[str, Column],
    bad: Column, sharded: bool, level: Column | None = None,
) -> _Aggregation:
    """One ``groupBy().agg()`` whose output is in table order, led by the reject tag (and by ``LEVEL``
    when ``level`` is given: several levels grouped at once); ``sharded``: rows carry ``SHARD_ID``.

    Without struct aggregates, casting inside the aggregation keeps each level a single DataFrame
    operation: every extra operation re-analyses the whole chained plan.  Struct aggregates (the latest
    event, a combine fold) are computed once and their fields read by a projection after it.
    """
    types = {**layout.column_types, **dict.fromkeys(_counting(layout), AttrType.LONG)}
    keys = [F.col(k.name) for k in layout.keys]
    if sharded:  # a pre-aggregation worker's rows stay apart
        keys.append(F.col(SHARD_ID))
        types = {**types, SHARD_ID: AttrType.STRING}
    lead = [level.alias(LEVEL)] if level is not None else []
    grouping = (*lead, bad.alias(REJECTED), bucket.alias(AGG_TIMESTAMP), *keys)
    if not structs:
        ordered = [aggs[n].cast(SPARK_TYPES[types[n]]).alias(n) for n in types if n in aggs]  # type: ignore[union-attr]
        return _Aggregation(grouping, tuple(ordered), None)
    plain = [c.alias(n) for n, c in aggs.items() if isinstance(c, Column)]
    flat: list[Column | str] = [LEVEL] if level is not None else []
    flat.append(REJECTED)
    for n, t in types.items():
        ref = aggs.get(n)  # keys and the bucket are grouping columns
        column = F.col(f"{ref.struct}.{ref.field}") if isinstance(ref, _Field) else F.col(n)
        flat.append(column.cast(SPARK_TYPES[t]).alias(n))
    return _Aggregation(grouping, (*(c.alias(n) for n, c in structs.items()), *plain), tuple(flat))


def _batch_dependent(layout: AggregationLayout) -> bool:
    """The finest aggregation ranks events by their batch id."""
    return layout.tracks_arrival or any(s.state.build in (Build.EARLIEST, Build.LATEST) for s in layout.states)


def _finest(layout: AggregationLayout, batch: Column, sharded: bool, ansi: bool,
            level: Granularity | None = None) -> _Aggregation:
    """Partial states per finest bucket (or ``level``'s) and group from the typed events of one batch
    (``batch``: its id, a long).

    Rejected events are grouped apart (``_rejected`` true, no bucket), so their count comes out of the
    same aggregation: an extra pass or an ``observe`` would stop Spark from sharing this shuffle with the
    coarser levels.
    """
    stream = layout.stream
    aggs: dict[str, Column | _Field] = {s.name: _build(s, layout, batch, ansi) for s in layout.states}
    aggs.update({c: F.count(to_column(arg, stream)) for c, arg in _counting(layout).items()})
    structs: dict[str, Column] = {}
    if layout.tracks_arrival:
        structs[_LATEST] = F.max(
            F.struct(
                F.col(EVENT_TS).alias(AGG_EVENT_TIMESTAMP),
                batch.alias(AGG_ARRIVAL_BATCH),
                F.col(ARRIVAL_SEQ).alias(AGG_ARRIVAL_SEQ),
                *[to_column(v.expr, stream).cast(SPARK_TYPES[v.type]).alias(v.name) for v in layout.values],
            )
        )
        aggs.update({n: _Field(_LATEST, n) for n in (*layout.order_columns, *(v.name for v in layout.values))})
    else:
        aggs[AGG_EVENT_TIMESTAMP] = F.max(EVENT_TS)
    bad = F.col(REASON).isNotNull()
    bucket = F.when(~bad, bucket_start(F.col(EVENT_TS), level or layout.spec.finest, layout.zone))
    return _grouped(bucket, layout, aggs, structs, bad, sharded)


def _sharded(events: DataFrame, layout: AggregationLayout, row_writer: str | None) -> DataFrame:
    """The events with ``SHARD_ID`` when their rows are stored per writer or per worker."""
    if row_writer is not None:
        # EventQL's INSERT_NOPREAGGR: each row stored as its own partial row (its writer id is unique).
        row = F.monotonically_increasing_id().cast("string")
        return events.withColumn(SHARD_ID, F.concat(F.lit(row_writer), row))
    if layout.spec.workers is not None:
        # EventQL's pre-aggregation: rows dealt round-robin to the workers, not by key, so a hot key
        # spreads over all of them; each worker's partial row of a bucket and key is stored apart.
        return events.repartition(layout.spec.workers).withColumn(SHARD_ID, F.spark_partition_id().cast("string"))
    return events


def _merges(layout: AggregationLayout, ansi: bool) -> tuple[dict[str, Column | _Field], dict[str, Column]]:
    """``_merge`` plus the order columns (the latest event's values, or the greatest event time)."""
    aggs, structs = _merge(layout, ansi)
    aggs.update({c: F.sum(c) for c in _counting(layout)})
    if layout.tracks_arrival:
        latest = (*layout.order_columns, *(v.name for v in layout.values))
        structs[_LATEST] = F.max(F.struct(*[F.col(c) for c in latest]))
        aggs.update({n: _Field(_LATEST, n) for n in latest})
    else:
        aggs[AGG_EVENT_TIMESTAMP] = F.max(AGG_EVENT_TIMESTAMP)
    return aggs, structs


def _merged(layout: AggregationLayout, g: Granularity, sharded: bool, ansi: bool) -> _Aggregation:
    """Roll partial rows of a finer level up to granularity ``g`` (merge, never rebuild from events)."""
    aggs, structs = _merges(layout, ansi)
    bucket = bucket_start(F.col(AGG_TIMESTAMP), g, layout.zone)
    # The reject tag passes through as a grouping column: a filter here would be pushed below the finest
    # aggregation by the optimizer, and the levels could no longer share its shuffle.
    return _grouped(bucket, layout, aggs, structs, F.col(REJECTED), sharded)


@dataclass(frozen=True, slots=True)
class _Rollup:
    """Several coarser levels from one finer level in one aggregation, tagged by ``LEVEL``.

    Each row is repeated once per level with that level's bucket and all are grouped by (level, bucket,
    keys): one shuffle instead of one per level, and no level waits for the one before it.  A finer bucket
    lies inside one bucket of every coarser level (the levels nest), so this equals rolling up level by
    level.
    """

    targets: Column
    aggregation: _Aggregation

    def __call__(self, partials: DataFrame) -> DataFrame:
        return self.aggregation(partials.select(F.explode(self.targets).alias(_TARGET), *partials.columns))


def _rollup(layout: AggregationLayout, levels: dict[int, Granularity], sharded: bool, ansi: bool) -> _Rollup:
    """The rollup to ``levels`` (level index -> granularity)."""
    aggs, structs = _merges(layout, ansi)
    ts = F.col(AGG_TIMESTAMP)
    targets = F.array(*[F.struct(F.lit(i).alias("level"), bucket_start(ts, g, layout.zone).alias("bucket"))
                        for i, g in levels.items()])
    level, bucket = F.col(f"{_TARGET}.level"), F.col(f"{_TARGET}.bucket")
    return _Rollup(targets, _grouped(bucket, layout, aggs, structs, F.col(REJECTED), sharded, level))


class Levels:
    """Every granularity's partial rows of a batch in one DataFrame, tagged by level index (0 = finest) and
    by ``_rejected`` (groups of rejected events, whose level-0 ``AGG_COUNT`` counts them; drop them all).

    Level 1 rolls up level 0 and the coarser levels roll up level 1 together (``_Rollup``), so Spark reuses
    the shared shuffles and one job of three shuffles computes all.  The level tag is added on the output
    side only: inside the chain it would make the finest shuffle of one branch differ from another's, and
    the events would be aggregated once per level.

    ``records`` (one struct column, ``RECORD``) rides along as level ``RECORD_LEVEL``, every other column
    null: the events a late-event policy moved or rejected come out of the same job, which shares the
    arrival-order shuffle with the aggregation instead of repeating it.

    ``row_writer`` (a pre-aggregated table's insert that bypasses pre-aggregation) keeps every event in a
    partial row of its own, under ``SHARD_ID`` ``<row_writer><n>``.

    The columns are built once and reused by every batch: building a column costs a Py4J round trip per
    function call.  They are unresolved expressions in the process's one JVM, so ``levels_for`` keeps one
    ``Levels`` per layout for every run and session of the process (building them took a run's first
    batch about 0.2 s), and per ANSI mode: long sums rely on ANSI arithmetic to fail on overflow where it
    is on, and check for it themselves where it is off (``tiltframe.engine.rollup.sum_overflow``).
    """

    def __init__(self, layout: AggregationLayout, ansi: bool = True) -> None:
        self.layout = layout
        self.ansi = ansi
        self._plans: dict[bool, _Aggregation] = {}
        self._levels: dict[bool, tuple[tuple[tuple[int, _Aggregation], ...], tuple[tuple[int, _Rollup], ...]]] = {}
        self._per_batch = _batch_dependent(layout)

    def _finest(self, sharded: bool) -> _Aggregation:
        if sharded not in self._plans:
            self._plans[sharded] = _finest(self.layout, F.col(_BATCH), sharded, self.ansi)
        return self._plans[sharded]

    def _coarser(
        self, sharded: bool
    ) -> tuple[tuple[tuple[int, _Aggregation], ...], tuple[tuple[int, _Rollup], ...]]:
        """Level 1 from level 0, then every coarser level from level 1 in one aggregation; each with the
        index of the level it rolls up from.

        Level 1 is the base because it is small (the finest level can hold nearly a row per event).  A
        combine fold collects a group's rows, so such layouts keep the level-by-level chain (at most a few
        dozen finer rows in a coarser bucket).  A level never rolls up from weeks unless it nests in them
        (``rollup_source``): months after ``day, week`` come from the days."""
        if sharded not in self._levels:
            layout = self.layout
            gs = layout.spec.granularities
            folds = any(g[0].function.combine is not None for g in layout.state_groups)
            chained = len(gs) if folds else 2
            chain = tuple((rollup_source(gs, i), _merged(layout, gs[i], sharded, self.ansi))
                          for i in range(1, min(chained, len(gs))))
            by_source: dict[int, dict[int, Granularity]] = {}
            for i in range(chained, len(gs)):
                source = chained - 1 if nests_in(gs[chained - 1], gs[i]) else rollup_source(gs, i)
                by_source.setdefault(source, {})[i] = gs[i]
            rollups = tuple((source, _rollup(layout, levels, sharded, self.ansi))
                            for source, levels in by_source.items())
            self._levels[sharded] = (chain, rollups)
        return self._levels[sharded]

    def __call__(
        self, events: DataFrame, batch_id: int, records: DataFrame | None = None, row_writer: str | None = None
    ) -> DataFrame:
        events = _sharded(events, self.layout, row_writer)
        sharded = SHARD_ID in events.columns
        if self._per_batch:  # one projection, where rebuilding the aggregation's columns took ~1,100 Py4J calls
            events = events.select("*", F.lit(batch_id).cast("long").alias(_BATCH))
        levels = [self._finest(sharded)(events)]
        no_record = F.lit(None).cast(records.schema[RECORD].dataType) if records is not None else None
        record = [no_record.alias(RECORD)] if no_record is not None else []

        def tag(i: int, df: DataFrame) -> DataFrame:
            return df.select(F.lit(i).alias(LEVEL), "*", *record)

        tagged = [tag(0, levels[0])]
        chain, rollups = self._coarser(sharded)
        for i, (source, merge) in enumerate(chain, start=1):
            levels.append(merge(levels[source]))
            tagged.append(tag(i, levels[i]))
        for source, rollup in rollups:
            rest = rollup(levels[source])
            tagged.append(rest.select("*", *record) if record else rest)
        if records is not None:
            nulls = [F.lit(None).cast(f.dataType).alias(f.name) for f in levels[-1].schema.fields]
            tagged.append(records.select(F.lit(RECORD_LEVEL).alias(LEVEL), *nulls, RECORD))
        return functools.reduce(DataFrame.union, tagged)


def level_from_events(events: DataFrame, layout: AggregationLayout, g: Granularity) -> DataFrame:
    """The partial rows of level ``g`` straight from typed events, not through the finer levels (what
    ``tiltframe verify`` holds the stored rows to); rejected events left out."""
    rows = _finest(layout, F.lit(0).cast("long"), False, ansi_enabled(), g)(events)
    return rows.where(~F.col(REJECTED)).drop(REJECTED, *_counting(layout))


def levels_for(layout: AggregationLayout) -> Levels:
    """The process's ``Levels`` of ``layout`` for the active session's ANSI mode."""
    return _levels_for(layout, ansi_enabled())


@functools.lru_cache(maxsize=64)
def _levels_for(layout: AggregationLayout, ansi: bool) -> Levels:
    return Levels(layout, ansi)
