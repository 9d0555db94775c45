"""Purging by retention: when it is due, and what it deletes (policy in ``tiltframe.model.retention``).

The pipeline asks :meth:`Purger.maybe_purge` after each committed batch, and ``tiltframe purge APP`` calls
:meth:`Purger.purge` at once.  The interval runs on the wall clock from the last purge recorded in the
store (or the aggregation's registration), so a pipeline restarted every few minutes still purges on
time; the cut-off of each duration is measured from the latest event time in the store.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from tiltframe.aggregates.layout import AggregationLayout
from tiltframe.model.durations import Granularity
from tiltframe.model.retention import Retention
from tiltframe.store.base import Store

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class PurgeResult:
    """What one purge did: the latest event time it measured from, and per duration the instant before
    which buckets are gone and how many rows it deleted."""

    latest_event_ts: int | None
    before: dict[Granularity, int] = field(default_factory=dict)
    deleted: dict[Granularity, int] = field(default_factory=dict)

    @property
    def rows(self) -> int:
        return sum(self.deleted.values())


class Purger:
    """Purges one aggregation's store by its retention policy."""

    def __init__(self, layout: AggregationLayout, store: Store, *, clock: Callable[[], float] = time.time) -> None:
        self.layout = layout
        self.store = store
        self.retention = Retention.of(layout.spec)
        self.clock = clock
        self._next_ms: int | None = None

    def purge(self) -> PurgeResult:
        """Purge now (even when purging is off: this is what an operator asked for)."""
        latest = self.store.latest_event_ts(self.layout)
        if latest is None:
            return PurgeResult(None)
        before = self.retention.purge_before(self.layout.spec, latest, self.layout.zone)
        deleted = self.store.purge(self.layout, before, latest) if before else {}
        self._next_ms = self._now_ms() + self.retention.interval_ms
        result = PurgeResult(latest, before, deleted)
        logger.info("purged %s rows of %s (latest event time %s)", result.rows, self.layout.name, latest)
        return result

    def maybe_purge(self) -> PurgeResult | None:
        """Purge if purging is on and the interval has passed since the last purge; else None."""
        if not self.retention.enabled:
            return None
        if self._next_ms is None:
            self._next_ms = self.store.last_purged_at(self.layout) + self.retention.interval_ms
        if self._now_ms() < self._next_ms:
            return None
        return self.purge()

    def _now_ms(self) -> int:
        return int(self.clock() * 1000)
