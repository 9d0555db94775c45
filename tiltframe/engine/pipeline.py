"""One aggregation's per-batch work: type events, build partial states, cascade, commit to the store.

Exactly-once: Spark's checkpoint replays a failed micro-batch with the same batch id and the same input,
and the store commits each batch's rows together with a ``(pipeline, batch)`` record in one
transaction; a batch whose record exists is skipped.  The pipeline id lives in the checkpoint directory,
so a new checkpoint (a new pipeline) never collides with the batch ids of an old one.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from tiltframe.engine.arrival import MOVED, ORIGINAL_TS, arrange, moved_reason
from tiltframe.engine.events import EVENT_TS, FIELD, KIND, RAW, REASON, VALUE, type_events
from tiltframe.engine.partials import LEVEL, REJECTED, all_levels
from tiltframe.engine.reports import BatchReport, PipelineTotals
from tiltframe.errors import StoreError
from tiltframe.spec.durations import Granularity
from tiltframe.spec.expressions import attributes_of
from tiltframe.store.base import BatchStats, BatchWrite, PipelineState, RecordKind, Store
from tiltframe.store.layout import AGG_COUNT, AGG_EVENT_TIMESTAMP, AGG_TIMESTAMP, AggregationLayout

logger = logging.getLogger(__name__)

PIPELINE_FILE = "tiltframe-pipeline.json"


def pipeline_id_for(checkpoint_dir: str | Path, layout: AggregationLayout) -> str:
    """The stable id of the pipeline that owns ``checkpoint_dir`` (created on first use)."""
    path = Path(checkpoint_dir)
    marker = path / PIPELINE_FILE
    if marker.exists():
        meta = json.loads(marker.read_text())
        if meta.get("spec_hash") != layout.spec_hash:
            msg = (
                f"checkpoint {path} belongs to another definition of aggregation {layout.name} "
                f"(spec {meta.get('spec_hash')}, now {layout.spec_hash}); move that directory away "
                f"to start a new pipeline"
            )
            raise StoreError(msg)
        return str(meta["pipeline_id"])
    path.mkdir(parents=True, exist_ok=True)
    pid = uuid.uuid4().hex
    marker.write_text(json.dumps({"pipeline_id": pid, "aggregation": layout.name, "spec_hash": layout.spec_hash}))
    return pid


class AggregationPipeline:
    """Turns micro-batches of one stream into committed rollups of one aggregation."""

    def __init__(
        self,
        layout: AggregationLayout,
        store: Store,
        pipeline_id: str,
        *,
        on_batch: Callable[[BatchReport], None] | None = None,
    ) -> None:
        self.layout = layout
        self.store = store
        self.pipeline_id = pipeline_id
        self.on_batch = on_batch
        self.totals = PipelineTotals()
        spec = layout.spec
        used = set(spec.group_by)
        for item in spec.aggregates:
            if item.arg is not None:
                used.update(a.name for a in attributes_of(item.arg))
        for v in layout.values:
            used.update(a.name for a in attributes_of(v.expr))
        if spec.time_attribute:
            used.add(spec.time_attribute)
        self._required = frozenset(used)

    def _typed(self, raw: DataFrame, arrival_ms: int) -> DataFrame:
        return type_events(
            raw,
            self.layout.stream,
            required=self._required,
            time_attribute=self.layout.spec.time_attribute,
            arrival_ms=arrival_ms,
        )

    def process(self, raw: DataFrame, batch_id: int) -> BatchReport:
        """Aggregate one batch of raw stream rows and commit it (a no-op if already committed)."""
        layout = self.layout
        if self.store.is_committed(layout, self.pipeline_id, batch_id):
            report = BatchReport(layout.name, batch_id, BatchStats(0, 0, 0), 0, True, 0.0, 0.0)
            logger.info("batch %s of %s was already committed; skipped", batch_id, layout.name)
            self._report(report)
            return report
        t0 = time.perf_counter()
        state = self.store.pipeline_state(layout, self.pipeline_id)
        events = arrange(self._typed(raw, int(time.time() * 1000)), layout, state)
        levels, stats = self._cascade(events, batch_id)
        recorded = None
        if stats.events_rejected or stats.events_moved:
            recorded = self._recorded(events)
            expected = stats.events_rejected + stats.events_moved
            if recorded.num_rows != expected:  # the input changed under a replay
                msg = f"batch {batch_id}: {expected} rejected or moved events counted, {recorded.num_rows} read"
                raise StoreError(msg)
        t1 = time.perf_counter()
        rows = sum(t.num_rows for t in levels.values())
        if stats.events_read:
            after = self._state_after(state, stats, levels[layout.spec.finest])
            batch = BatchWrite(self.pipeline_id, batch_id, stats, levels, recorded, after)
            written = self.store.write_batch(layout, batch)
        else:
            written = False
        t2 = time.perf_counter()
        skipped = not written and stats.events_read > 0
        report = BatchReport(layout.name, batch_id, stats, rows if written else 0, skipped, t1 - t0, t2 - t1)
        self._report(report)
        return report

    def _cascade(self, events: DataFrame, batch_id: int) -> tuple[dict[Granularity, pa.Table], BatchStats]:
        """All levels in one Spark job, split on the driver (Arrow filters), and the batch's counts."""
        table = all_levels(events, self.layout, batch_id).toArrow()
        level = table.column(LEVEL)
        bad = table.column(REJECTED)
        finest = pc.equal(level, 0)
        moved = 0
        if MOVED in table.column_names:
            moved = int(pc.sum(table.column(MOVED).filter(finest)).as_py() or 0)
            table = table.drop_columns([MOVED])
        data = table.drop_columns([LEVEL, REJECTED])
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
        )
        return levels, stats

    def _recorded(self, events: DataFrame) -> pa.Table:
        """The batch's rejected and moved events, as rows of the rejected-events table (a second job, run
        only when the first counted some)."""
        moved = F.col(MOVED) if MOVED in events.columns else F.lit(False)
        original = F.col(ORIGINAL_TS) if ORIGINAL_TS in events.columns else F.col(EVENT_TS)
        return (
            events.filter(F.col(REASON).isNotNull() | moved)
            .select(
                F.lit(self.layout.stream.name).alias("stream"),
                F.when(moved, F.lit(RecordKind.MOVED.value)).otherwise(F.col(KIND)).alias("kind"),
                F.coalesce(F.col(REASON), F.lit(moved_reason(self.layout))).alias("reason"),
                F.col(FIELD).alias("field"),
                F.col(VALUE).alias("value"),
                F.col(RAW).alias("raw"),
                original.alias("event_timestamp"),
                F.when(moved, F.col(EVENT_TS)).alias("adjusted_timestamp"),
            )
            .toArrow()
        )

    @staticmethod
    def _state_after(state: PipelineState, stats: BatchStats, finest: pa.Table) -> PipelineState:
        latest = max((t for t in (state.latest_event_ts, stats.max_event_ts) if t is not None), default=None)
        recovery = state.recovery_bucket
        newest = pc.max(finest.column(AGG_TIMESTAMP)).as_py()
        # The first event newer than the recovery point ends recovery, and it is always aggregated.
        if recovery is not None and newest is not None and newest > recovery:
            recovery = None
        return PipelineState(latest, recovery)

    def _report(self, report: BatchReport) -> None:
        self.totals.add(report)
        if self.on_batch is not None:
            self.on_batch(report)

    def foreach_batch(self, raw: DataFrame, batch_id: int) -> None:
        """The ``foreachBatch`` entry point of the streaming query."""
        self.process(raw, batch_id)
