"""What the pipeline running in this process has done, for ``GET /api/status`` and the page's panel.

Fed by the run's ``on_batch`` callback (Spark's listener thread) and read by request threads, so every
access holds one lock.  The figures are this process's; the store's committed totals (which survive a
restart) are the catalog's (:mod:`tiltframe.http.catalog`).
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tiltframe.engine.rollup.reports import BatchReport, PipelineTotals

if TYPE_CHECKING:
    from tiltframe.store.base import SkippedValues

#: Batches kept per aggregation for the events/s figure (the rate over the latest ones).
RATE_WINDOW = 10


@dataclass
class _AggStatus(PipelineTotals):
    """Run totals (without the reports themselves: a server runs for months) plus the latest batch and the
    rate over the latest ones."""

    last_batch_at: int | None = None
    last_batch_id: int | None = None
    last_batch_seconds: float | None = None
    #: (events, seconds) of the latest batches.
    recent: deque[tuple[int, float]] = field(default_factory=lambda: deque(maxlen=RATE_WINDOW))

    def add(self, r: BatchReport) -> None:
        super().add(r)
        self.reports.clear()
        self.last_batch_at = int(time.time() * 1000)
        self.last_batch_id = r.batch_id
        self.last_batch_seconds = r.seconds
        if not r.skipped:
            self.recent.append((r.stats.events_read, r.seconds))

    def document(self) -> dict[str, Any]:
        events = sum(n for n, _ in self.recent)
        seconds = sum(t for _, t in self.recent)
        doc = {k: v for k, v in vars(self).items() if k not in ("recent", "reports", "max_event_ts")}
        doc["watermark"] = self.max_event_ts
        doc["events_per_second"] = round(events / seconds, 1) if seconds > 0 else None
        return doc


def skipped_document(values: Sequence[SkippedValues]) -> list[dict[str, Any]]:
    """Per measure that takes an argument, the null or NaN values it skipped as the store totals them
    (``skipped`` null: no committed batch counted them)."""
    return [dataclasses.asdict(v) for v in values]


class PipelineStatus:
    """The running pipeline's micro-batches per aggregation; :meth:`on_batch` is the run's callback."""

    def __init__(self, aggregations: list[str]) -> None:
        self._lock = threading.Lock()
        self._aggs = {name: _AggStatus() for name in aggregations}
        self.started_at = int(time.time() * 1000)
        self._started = time.monotonic()
        self.running = True
        #: Also called with each report (the server's metrics).
        self.listeners: list[Callable[[BatchReport], None]] = []

    def on_batch(self, report: BatchReport) -> None:
        with self._lock:
            self._aggs.setdefault(report.aggregation, _AggStatus()).add(report)
        for listener in self.listeners:
            listener(report)

    def stopped(self) -> None:
        with self._lock:
            self.running = False

    def document(self) -> dict[str, Any]:
        with self._lock:
            return {
                "running": self.running,
                "started_at": self.started_at,
                "uptime_seconds": round(time.monotonic() - self._started, 3),
                "aggregations": {name: a.document() for name, a in self._aggs.items()},
            }
