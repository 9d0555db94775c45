"""What micro-batches did, for progress displays, run results and benchmarks.

Kept free of PySpark so that the CLI can show progress types without starting the JVM machinery.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tiltframe.store.base import BatchStats


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
    #: Rows the retention purge after this batch deleted (purges run between batches).
    rows_purged: int = 0
    #: Input files of the batch that could not be read (recorded with their reason, events unknown).
    files_rejected: int = 0

    @property
    def seconds(self) -> float:
        return self.spark_seconds + self.store_seconds


@dataclass
class PipelineTotals:
    batches: int = 0
    skipped: int = 0
    events_read: int = 0
    events_aggregated: int = 0
    events_moved: int = 0
    events_rejected: int = 0
    rows_written: int = 0
    rows_purged: int = 0
    files_rejected: int = 0
    spark_seconds: float = 0.0
    store_seconds: float = 0.0
    max_event_ts: int | None = None
    reports: list[BatchReport] = field(default_factory=list)

    def add(self, r: BatchReport) -> None:
        self.reports.append(r)
        self.rows_purged += r.rows_purged
        if r.skipped:
            self.skipped += 1
            return
        self.batches += 1
        self.events_read += r.stats.events_read
        self.events_aggregated += r.stats.events_aggregated
        self.events_moved += r.stats.events_moved
        self.events_rejected += r.stats.events_rejected
        self.rows_written += r.rows_written
        self.files_rejected += r.files_rejected
        self.spark_seconds += r.spark_seconds
        self.store_seconds += r.store_seconds
        if r.stats.max_event_ts is not None:
            self.max_event_ts = max(self.max_event_ts or r.stats.max_event_ts, r.stats.max_event_ts)
