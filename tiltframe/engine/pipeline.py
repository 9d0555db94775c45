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
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, Observation
from pyspark.sql import functions as F

from tiltframe.engine.events import EVENT_TS, FIELD, RAW, REASON, VALUE, type_events
from tiltframe.engine.partials import ARRIVAL_SEQ, LEVEL, all_levels
from tiltframe.errors import StoreError
from tiltframe.spec.durations import Granularity
from tiltframe.spec.expressions import attributes_of
from tiltframe.store.base import BatchStats, BatchWrite, Store
from tiltframe.store.layout import AggregationLayout

logger = logging.getLogger(__name__)

PIPELINE_FILE = "tiltframe-pipeline.json"


@dataclass
class BatchReport:
    """What one micro-batch did, for progress displays and benchmarks."""

    aggregation: str
    batch_id: int
    stats: BatchStats
    rows_written: int
    skipped: bool
    spark_seconds: float
    store_seconds: float

    @property
    def seconds(self) -> float:
        return self.spark_seconds + self.store_seconds


@dataclass
class PipelineTotals:
    batches: int = 0
    skipped: int = 0
    events_read: int = 0
    events_aggregated: int = 0
    events_rejected: int = 0
    rows_written: int = 0
    spark_seconds: float = 0.0
    store_seconds: float = 0.0
    max_event_ts: int | None = None
    reports: list[BatchReport] = field(default_factory=list)

    def add(self, r: BatchReport) -> None:
        self.reports.append(r)
        if r.skipped:
            self.skipped += 1
            return
        self.batches += 1
        self.events_read += r.stats.events_read
        self.events_aggregated += r.stats.events_aggregated
        self.events_rejected += r.stats.events_rejected
        self.rows_written += r.rows_written
        self.spark_seconds += r.spark_seconds
        self.store_seconds += r.store_seconds
        if r.stats.max_event_ts is not None:
            self.max_event_ts = max(self.max_event_ts or r.stats.max_event_ts, r.stats.max_event_ts)


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
        arrival_ms = int(time.time() * 1000)
        typed = self._typed(raw, arrival_ms)
        if layout.tracks_arrival:
            typed = typed.withColumn(ARRIVAL_SEQ, F.monotonically_increasing_id())
        ok = F.col(REASON).isNull()
        observation = Observation(f"tiltframe_{layout.name}_{batch_id}")
        typed = typed.observe(
            observation,
            F.count(F.lit(1)).alias("read"),
            F.count(F.col(REASON)).alias("rejected"),
            F.min(F.when(ok, F.col(EVENT_TS))).alias("min_ts"),
            F.max(F.when(ok, F.col(EVENT_TS))).alias("max_ts"),
        )
        levels = self._cascade(typed.filter(ok), batch_id)
        counts = observation.get
        read, rejected_n = int(counts["read"]), int(counts["rejected"])
        rejected = None
        if rejected_n:
            rejected = (
                self._typed(raw, arrival_ms)
                .filter(~ok)
                .select(
                    F.lit(layout.stream.name).alias("stream"),
                    F.col(REASON).alias("reason"),
                    F.col(FIELD).alias("field"),
                    F.col(VALUE).alias("value"),
                    F.col(RAW).alias("raw"),
                )
                .toArrow()
            )
        stats = BatchStats(read, read - rejected_n, rejected_n, counts["min_ts"], counts["max_ts"])
        t1 = time.perf_counter()
        rows = sum(t.num_rows for t in levels.values())
        if read:
            batch = BatchWrite(self.pipeline_id, batch_id, stats, levels, rejected)
            written = self.store.write_batch(layout, batch)
        else:
            written = False
        t2 = time.perf_counter()
        report = BatchReport(layout.name, batch_id, stats, rows if written else 0, not written and read > 0,
                             t1 - t0, t2 - t1)
        self._report(report)
        return report

    def _cascade(self, events: DataFrame, batch_id: int) -> dict[Granularity, pa.Table]:
        """All levels in one Spark job, split by level tag on the driver (Arrow, zero-copy filters)."""
        table = all_levels(events, self.layout, batch_id).toArrow()
        tags = table.column(LEVEL)
        data = table.drop_columns([LEVEL])
        return {g: data.filter(pc.equal(tags, i)) for i, g in enumerate(self.layout.spec.granularities)}

    def _report(self, report: BatchReport) -> None:
        self.totals.add(report)
        if self.on_batch is not None:
            self.on_batch(report)

    def foreach_batch(self, raw: DataFrame, batch_id: int) -> None:
        """The ``foreachBatch`` entry point of the streaming query."""
        self.process(raw, batch_id)
