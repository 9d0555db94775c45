"""One aggregation's per-batch work: type events, build partial states, cascade, commit to the store.

Exactly-once: Spark's checkpoint replays a failed micro-batch with the same batch id and the same input,
and the store commits each batch's rows together with a ``(pipeline, batch)`` record in one
transaction; a batch whose record exists is skipped.  The pipeline id lives in the checkpoint directory,
so a new checkpoint (a new pipeline) never collides with the batch ids of an old one.
"""

from __future__ import annotations

import functools
import json
import logging
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from tiltframe.aggregates.layout import AGG_COUNT, AGG_EVENT_TIMESTAMP, AGG_TIMESTAMP, AggregationLayout
from tiltframe.engine.events.arrival import RECORD, arrange, needs_latest, needs_order, policy_records
from tiltframe.engine.events.typed import EVENT_TS, FIELD, RAW, REASON, VALUE, type_events
from tiltframe.engine.inputs.batch_sessions import estimated_small
from tiltframe.engine.inputs.file_reads import FileProblem
from tiltframe.engine.inputs.hadoop_paths import HadoopPath, as_location
from tiltframe.engine.rollup import staged_writes
from tiltframe.engine.rollup.markers import write_marker
from tiltframe.engine.rollup.partials import LEVEL, RECORD_LEVEL, REJECTED, counted_columns, levels_for
from tiltframe.engine.rollup.reports import BatchReport, PipelineTotals, log_batch
from tiltframe.engine.rollup.staged_writes import stage
from tiltframe.engine.rollup.sum_overflow import explain_overflow, is_overflow
from tiltframe.engine.spark import py4j_cycles
from tiltframe.errors import DataError, StoreError
from tiltframe.model.durations import Granularity
from tiltframe.store.base import (
    REJECTED_COLUMNS,
    REJECTED_TIMES,
    BatchStats,
    BatchWrite,
    PipelineState,
    RecordKind,
    StagedBatch,
    Store,
)
from tiltframe.store.lifecycle.compaction import Compactor
from tiltframe.store.lifecycle.purge import Purger
from tiltframe.store.writes.staging import StagedRowsLost, StagingTarget

logger = logging.getLogger(__name__)

PIPELINE_FILE = "tiltframe-pipeline.json"

#: The recorded events of a batch as the store takes them (``stream`` is added last, from the layout).
_RECORD_SCHEMA = pa.schema(
    [(c, pa.string()) for c in REJECTED_COLUMNS if c != "stream"] + [(c, pa.int64()) for c in REJECTED_TIMES]
)
_EMPTY_RECORDS = _RECORD_SCHEMA.empty_table()


def _record_table(data: pa.Table | pa.ChunkedArray) -> pa.Table:
    """Recorded events in ``_RECORD_SCHEMA`` from a table or a struct column holding some of its fields."""
    if isinstance(data, pa.ChunkedArray):
        data = pa.Table.from_struct_array(data)
    columns = [data.column(f.name).cast(f.type) if f.name in data.column_names else pa.nulls(data.num_rows, f.type)
               for f in _RECORD_SCHEMA]
    return pa.Table.from_arrays(columns, schema=_RECORD_SCHEMA)


def _storable(text: Column) -> Column:
    """Text of a rejected event as every store takes it: a NUL character (PostgreSQL's text cannot hold
    one) written as the escape ``\\u0000``."""
    return F.regexp_replace(text, "\u0000", "\\\\u0000")


def invalid_records(typed: DataFrame) -> pa.Table:
    """The events of ``typed`` (``type_events``' output) that cannot be typed, with field, value and the row
    as read."""
    return _record_table(
        typed.filter(F.col(REASON).isNotNull())
        .select(
            F.lit(RecordKind.INVALID.value).alias("kind"),
            _storable(F.col(REASON)).alias("reason"),
            F.col(FIELD).alias("field"),
            _storable(F.col(VALUE)).alias("value"),
            _storable(F.col(RAW)).alias("raw"),
            F.col(EVENT_TS).alias("event_timestamp"),
        )
        .toArrow()
    )


def file_records(files: Sequence[FileProblem]) -> pa.Table:
    """Files that could not be read, as recorded rows (the file's path as the value)."""
    return _record_table(pa.table({
        "kind": [RecordKind.FILE.value] * len(files),
        "reason": [f.reason for f in files],
        "value": [f.path for f in files],
    }))


def pipeline_id_for(checkpoint_dir: str | Path | HadoopPath, layout: AggregationLayout) -> str:
    """The stable id of the pipeline that owns ``checkpoint_dir`` (created on first use)."""
    path = as_location(checkpoint_dir)
    marker = path / PIPELINE_FILE
    if marker.exists():
        meta = json.loads(marker.read_text(encoding="utf-8"))
        if meta.get("spec_hash") != layout.spec_hash:
            msg = (
                f"checkpoint {path} belongs to another definition of aggregation {layout.name} "
                f"(spec {meta.get('spec_hash')}, now {layout.spec_hash}); move that directory away "
                f"to start a new pipeline"
            )
            raise StoreError(msg)
        return str(meta["pipeline_id"])
    pid = uuid.uuid4().hex
    write_marker(marker, {"pipeline_id": pid, "aggregation": layout.name, "spec_hash": layout.spec_hash})
    return pid


@dataclass(frozen=True)
class _Partials:
    """A batch's partial rows: on the driver (``levels``) or in the store's staging table (``staged``);
    ``newest``: its latest finest bucket."""

    levels: dict[Granularity, pa.Table]
    staged: StagedBatch | None
    newest: int | None

    @property
    def rows(self) -> int:
        return sum(self.staged.rows) if self.staged is not None else sum(t.num_rows for t in self.levels.values())


class AggregationPipeline:
    """Turns micro-batches of one stream into committed rollups of one aggregation."""

    def __init__(
        self,
        layout: AggregationLayout,
        store: Store,
        pipeline_id: str,
        *,
        on_batch: Callable[[BatchReport], None] | None = None,
        purger: Purger | None = None,
        shard_id: str | None = None,
        row_writer: str | None = None,
        compactor: Compactor | None = None,
        derive: Callable[[DataFrame], DataFrame] | None = None,
    ) -> None:
        self.layout = layout
        #: The rows of a stream that stream queries write are made from their input stream's rows first.
        self.derive = derive
        self.store = store
        self.pipeline_id = pipeline_id
        #: The ``SHARD_ID`` this pipeline writes under (partitioned layouts only).
        self.shard_id = shard_id
        #: Rows bypass pre-aggregation: each event is stored alone, under ``<row_writer><n>``.
        self.row_writer = row_writer
        self.compactor = compactor
        self.on_batch = on_batch
        self.purger = purger
        self.totals = PipelineTotals()
        self._levels = levels_for(layout)
        self._counted = counted_columns(layout)
        #: The counts of a batch without events (only files that could not be read): no value skipped.
        self._nothing = BatchStats(0, 0, 0, values_skipped=self._skipped(0, {}))
        #: Read once, so that a misspelt ``$TILTFRAME_STAGED_WRITES`` stops the run before its first batch;
        #: None until the first batch when it is unset (``staged_writes.wanted_on``).
        self._staging = staged_writes.enabled()
        spec = layout.spec
        # A missing value of an aggregated attribute is skipped by the aggregates; only a missing key or
        # event time leaves an event nowhere to go.
        used = set(spec.group_by)
        if spec.time_attribute:
            used.add(spec.time_attribute)
        self._required = frozenset(used)

    def process(
        self, raw: DataFrame | Sequence[DataFrame], batch_id: int, files: Sequence[FileProblem] = (), *,
        small: bool | None = None,
    ) -> BatchReport:
        """Aggregate one batch of raw stream rows and commit it (a no-op if already committed).

        ``raw``: the batch's rows, in one DataFrame or in several (files read with different schemas);
        ``files``: files of the batch that could not be read, recorded with the batch; ``small``: whether it
        is a small batch (``engine.inputs.batch_sessions``; None: by Spark's estimate of its size), whose partial
        rows go through the driver rather than staged."""
        layout = self.layout
        frames = [raw] if isinstance(raw, DataFrame) else list(raw)
        if self.store.is_committed(layout, self.pipeline_id, batch_id):
            report = BatchReport(layout.name, batch_id, BatchStats(0, 0, 0), 0, True, 0.0, 0.0)
            self._report(report)
            return report
        t0 = time.perf_counter()
        state = self.store.pipeline_state(layout, self.pipeline_id, self.shard_id)
        if small is None:  # judged only where it changes the plan: staging, ordering arrivals
            small = (self._may_stage() or needs_order(layout, state)) and estimated_small(frames)
        try:
            stats, rows_out, aggregating, written = self._compute_and_write(frames, batch_id, state, files,
                                                                             small=small, staged=not small)
        except StagedRowsLost as lost:  # nothing was written: compute the batch again, through the driver
            logger.warning("batch %d of %s: %s; computing it again without staging", batch_id, layout.name, lost)
            stats, rows_out, aggregating, written = self._compute_and_write(frames, batch_id, state, files,
                                                                             small=small, staged=False)
        # Between batches, so a purge never interleaves with this pipeline's writes (nor, through the
        # store's lock, with anyone else's).
        purged = self.purger.maybe_purge() if self.purger is not None else None
        if self.compactor is not None:
            self.compactor.maybe_compact()
        t2 = time.perf_counter()
        py4j_cycles.after_batch()  # the JVM lets go of finished batches' plans (py4j_cycles.py)
        t1 = t0 + aggregating
        skipped = not written and stats.events_read > 0
        report = BatchReport(layout.name, batch_id, stats, rows_out if written else 0, skipped, t1 - t0, t2 - t1,
                             purged.rows if purged is not None else 0, len(files) if written else 0)
        self._report(report)
        return report

    def _compute_and_write(self, frames: list[DataFrame], batch_id: int, state: PipelineState,
                           files: Sequence[FileProblem], *, small: bool,
                           staged: bool) -> tuple[BatchStats, int, float, bool]:
        """Aggregate the batch and write it; returns its counts, the partial rows made, the seconds spent
        aggregating, and whether it was written."""
        layout = self.layout
        t0 = time.perf_counter()
        if frames:
            partials, stats, recorded = self._aggregate(frames, batch_id, state, small=small, staged=staged)
        else:
            partials, stats, recorded = _Partials({}, None, None), self._nothing, _EMPTY_RECORDS
        if files:
            recorded = pa.concat_tables([recorded, file_records(files)])
        aggregating = time.perf_counter() - t0
        if not (stats.events_read or recorded.num_rows):
            return stats, partials.rows, aggregating, False
        after = self._state_after(state, stats, partials.newest)
        stream = pa.array([layout.stream.name] * recorded.num_rows, pa.string())
        batch = BatchWrite(self.pipeline_id, batch_id, stats, partials.levels,
                           recorded.append_column("stream", stream), after, self.shard_id, partials.staged)
        return stats, partials.rows, aggregating, self.store.write_batch(layout, batch)

    def _aggregate(
        self, frames: list[DataFrame], batch_id: int, state: PipelineState, *, small: bool = False, staged: bool = True
    ) -> tuple[_Partials, BatchStats, pa.Table]:
        """The batch's levels, counts and recorded events (moved, rejected by the late-event policy, or
        invalid)."""
        layout = self.layout
        arrival_ms = int(time.time() * 1000)
        if self.derive is not None:
            frames = [self.derive(raw) for raw in frames]
        typed = functools.reduce(DataFrame.union, [
            type_events(raw, layout.stream, required=self._required, time_attribute=layout.spec.time_attribute,
                        arrival_ms=arrival_ms)
            for raw in frames
        ])
        events = arrange(typed, layout, state, small=small)
        records = policy_records(events, layout) if needs_latest(layout, state) else None
        try:
            levels, stats, by_policy = self._cascade(events, batch_id, records, staged=staged)
        except Exception as exc:
            said = explain_overflow(typed, layout) if is_overflow(exc) else None
            if said is not None:
                raise DataError(said) from None
            raise
        recorded = by_policy
        invalid = stats.events_rejected - (by_policy.num_rows - stats.events_moved)
        if invalid:
            rows = invalid_records(typed)
            if rows.num_rows != invalid:  # the input changed under a replay
                msg = f"batch {batch_id}: {invalid} invalid events counted, {rows.num_rows} read"
                raise StoreError(msg)
            recorded = pa.concat_tables([rows, by_policy])
        return levels, stats, recorded

    def _staging_target(self) -> StagingTarget | None:
        """Where executors copy this batch's rows, or None: staging is off, or the store cannot stage."""
        if not self._may_stage():
            return None
        return self.store.prepare_staging(self.layout, self.pipeline_id)

    def _may_stage(self) -> bool:
        if self._staging is None:  # nobody said: the master decides
            self._staging = staged_writes.wanted_on(SparkSession.active().sparkContext.master)
        return self._staging and self.store.capabilities.staged_writes

    def _cascade(
        self, events: DataFrame, batch_id: int, records: DataFrame | None, *, staged: bool = True
    ) -> tuple[_Partials, BatchStats, pa.Table]:
        """All levels (and the events the policy moved or rejected) in one Spark job, and the batch's
        counts: staged by the executors when the store can take them, else split on the driver with
        Arrow filters."""
        levels_df = self._levels(events, batch_id, records, self.row_writer)
        target = self._staging_target() if staged else None
        if target is not None:
            try:
                return self._cascade_staged(levels_df, batch_id, target)
            except Exception as exc:
                if is_overflow(exc):
                    raise
                logger.warning("batch %d of %s: the executors could not stage its rows (%s); it goes through the "
                               "driver", batch_id, self.layout.name, str(exc).splitlines()[0] if str(exc) else exc)
        table = levels_df.toArrow()
        level = table.column(LEVEL)
        by_policy = _EMPTY_RECORDS
        if records is not None:
            chosen = pc.equal(level, RECORD_LEVEL)
            by_policy = _record_table(table.column(RECORD).filter(chosen))
            table = table.filter(pc.invert(chosen)).drop_columns([RECORD])
            level = table.column(LEVEL)
        moved = int(pc.sum(pc.equal(by_policy.column("kind"), RecordKind.MOVED.value)).as_py() or 0)
        bad = table.column(REJECTED)
        finest = pc.equal(level, 0)
        counting = sorted(set(self._counted.values()))
        counted = {c: table.column(c).filter(pc.and_(finest, pc.invert(bad))) for c in counting}
        data = table.drop_columns([LEVEL, REJECTED, *counting])
        counts = data.column(AGG_COUNT)
        rejected = int(pc.sum(counts.filter(pc.and_(finest, bad))).as_py() or 0)
        levels = {g: data.filter(pc.and_(pc.equal(level, i), pc.invert(bad)))
                  for i, g in enumerate(self.layout.spec.granularities)}
        first = levels[self.layout.spec.finest]
        aggregated = int(pc.sum(first.column(AGG_COUNT)).as_py() or 0)
        stats = BatchStats(
            aggregated + rejected,
            aggregated - moved,
            rejected,
            pc.min(first.column(AGG_TIMESTAMP)).as_py(),
            pc.max(first.column(AGG_EVENT_TIMESTAMP)).as_py(),
            moved,
            self._skipped(aggregated, {c: int(pc.sum(v).as_py() or 0) for c, v in counted.items()}),
        )
        newest = pc.max(first.column(AGG_TIMESTAMP)).as_py()
        return _Partials(levels, None, newest), stats, by_policy

    def _cascade_staged(
        self, levels_df: DataFrame, batch_id: int, target: StagingTarget
    ) -> tuple[_Partials, BatchStats, pa.Table]:
        """The levels copied into the store's staging table by the executors (``engine.rollup.staged_writes``):
        only per-task summaries and the policy's records reach the driver."""
        staged = stage(levels_df, target, self.pipeline_id, batch_id, len(self.layout.spec.granularities))
        by_policy = _record_table(staged.records) if staged.records is not None else _EMPTY_RECORDS
        moved = int(pc.sum(pc.equal(by_policy.column("kind"), RecordKind.MOVED.value)).as_py() or 0)
        stats = BatchStats(staged.aggregated + staged.rejected, staged.aggregated - moved, staged.rejected,
                           staged.min_ts, staged.max_event_ts, moved,
                           self._skipped(staged.aggregated, staged.counted))
        return _Partials({}, staged.batch, staged.max_ts), stats, by_policy

    def _skipped(self, aggregated: int, counted: Mapping[str, int]) -> dict[str, int]:
        """Per measure that takes an argument, the batch's events aggregated (into any bucket) whose argument
        was null or NaN: ``aggregated`` less the values its counting column (``counted_columns``) found."""
        return {measure: aggregated - counted.get(c, 0) for measure, c in self._counted.items()}

    @staticmethod
    def _state_after(state: PipelineState, stats: BatchStats, newest: int | None) -> PipelineState:
        latest = max((t for t in (state.latest_event_ts, stats.max_event_ts) if t is not None), default=None)
        recovery = state.recovery_bucket
        # The first event newer than the recovery point ends recovery, and it is always aggregated.
        if recovery is not None and newest is not None and newest > recovery:
            recovery = None
        return PipelineState(latest, recovery)

    def _report(self, report: BatchReport) -> None:
        self.totals.add(report)
        log_batch(report)
        if self.on_batch is not None:
            self.on_batch(report)

    def foreach_batch(self, raw: DataFrame, batch_id: int) -> None:
        """The ``foreachBatch`` entry point of the streaming query."""
        self.process(raw, batch_id)
