"""Compaction of pre-aggregated tables (EventQL): the N x C partial rows of each closed interval become C.

Workers and bypassed inserts each store their own partial rows, merged on every read.  Once an interval
is over, nothing gains from keeping them apart: compaction merges them into one row per interval and
dimension values, in one transaction, so readers get the same answers before, during and after.  It runs
on demand (``tiltframe compact``) and on a schedule while a pipeline writes the table.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from tiltframe.aggregates.layout import AggregationLayout
from tiltframe.model.durations import Granularity, Unit
from tiltframe.store.base import Store

#: How often a running pipeline compacts its table (seconds between compactions).
COMPACT_EVERY_S = 60.0
#: The longest bucket of a calendar unit: a day, week, month or year that gains a daylight-saving hour.
_LONGEST_MS = {Unit.DAYS: 25 * 3_600_000, Unit.WEEKS: 169 * 3_600_000, Unit.MONTHS: 745 * 3_600_000,
               Unit.YEARS: 8785 * 3_600_000}


def closed_before(g: Granularity, latest_event_ts: int) -> int:
    """Buckets starting before this instant ended no later than the latest event: closed intervals."""
    length = _LONGEST_MS.get(g.unit, g.unit.fixed_ms or 0) * g.multiple
    return latest_event_ts - length + 1


class Compactor:
    """Compacts one table's closed intervals now, or when the schedule says so."""

    def __init__(
        self, layout: AggregationLayout, store: Store, *, every_s: float = COMPACT_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.layout = layout
        self.store = store
        self.every_s = every_s
        self._clock = clock
        self._next = clock() + every_s

    def compact(self) -> int:
        """Rows removed by merging the partial rows of every closed interval."""
        latest = self.store.latest_event_ts(self.layout)
        if latest is None:
            return 0
        return self.store.compact(self.layout, closed_before(self.layout.spec.finest, latest))

    def maybe_compact(self) -> int | None:
        """:meth:`compact` when the interval has passed since the last one, else None."""
        if self._clock() < self._next:
            return None
        self._next = self._clock() + self.every_s
        return self.compact()
