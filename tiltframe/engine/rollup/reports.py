"""What micro-batches did, for progress displays, run results and benchmarks.

Kept free of PySpark so that the CLI can show progress types without starting the JVM machinery.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from tiltframe.store.base import BatchStats

logger = logging.getLogger(__name__)


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
    #: Per measure that takes an argument, the values it skipped (null or NaN) in the batches counted.
    values_skipped: dict[str, int] = field(default_factory=dict)
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
        for measure, n in (r.stats.values_skipped or {}).items():
            self.values_skipped[measure] = self.values_skipped.get(measure, 0) + n
        if r.stats.max_event_ts is not None:
            self.max_event_ts = max(self.max_event_ts or r.stats.max_event_ts, r.stats.max_event_ts)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _iso(ms: int | None) -> str | None:
    """Epoch ms as ISO-8601 in UTC, for any year an event may have (0001-9999)."""
    return None if ms is None else (_EPOCH + timedelta(milliseconds=ms)).isoformat(timespec="milliseconds")


def batch_fields(report: BatchReport) -> dict[str, Any]:
    """A batch report as flat fields (the JSON log's, and a monitoring system's)."""
    s = report.stats
    return {
        "aggregation": report.aggregation, "batch_id": report.batch_id, "skipped": report.skipped,
        "events_read": s.events_read, "events_aggregated": s.events_aggregated, "events_moved": s.events_moved,
        "events_rejected": s.events_rejected, "files_rejected": report.files_rejected,
        "rows_written": report.rows_written, "rows_purged": report.rows_purged,
        "seconds": round(report.seconds, 3), "latest_event_time": _iso(s.max_event_ts),
        "values_skipped": None if s.values_skipped is None else dict(s.values_skipped),
    }


def log_batch(report: BatchReport) -> None:
    """One INFO line per micro-batch of an aggregation (shown with ``--verbose``; ``--log-format json`` adds
    its figures as fields)."""
    fields = {"batch": batch_fields(report)}
    if report.skipped:
        logger.info("batch %d of %s was already committed; skipped", report.batch_id, report.aggregation,
                    extra=fields)
        return
    s = report.stats
    skipped = ", ".join(f"{m} {n}" for m, n in (s.values_skipped or {}).items() if n)
    logger.info(
        "batch %d of %s: %d events read, %d aggregated, %d moved, %d rejected, %d files rejected; %d rows "
        "written in %.2f s; latest event time %s%s", report.batch_id, report.aggregation, s.events_read,
        s.events_aggregated, s.events_moved, s.events_rejected, report.files_rejected, report.rows_written,
        report.seconds, _iso(s.max_event_ts) or "none",
        f"; null or NaN values skipped: {skipped}" if skipped else "", extra=fields,
    )
