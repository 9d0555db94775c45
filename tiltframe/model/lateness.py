"""What an aggregation does with events older than the latest one seen (see ``docs/late-events.md``).

Three policies, chosen by annotations:

- **exact** (no annotation): every event goes into its own bucket at every granularity, however late;
- **buffer** (``@BufferSize(N)`` and/or ``@IgnoreEventsOlderThanBuffer``, seed 000): the ``N`` finest buckets
  before the latest stay open; an older event is moved into the oldest open bucket, or dropped;
- **bounded** (``@allowedLateness('10 min')``): events up to that far behind the latest event time go into
  their own bucket; later ones are rejected.

"Latest" is the greatest event time seen so far in arrival order, the event itself included.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tiltframe.model.aggregations import AggregationSpec


class LateMode(enum.Enum):
    EXACT = "exact"
    BUFFER = "buffer"
    BOUNDED = "bounded"


@dataclass(frozen=True, slots=True)
class Lateness:
    """The out-of-order policy of one aggregation."""

    mode: LateMode = LateMode.EXACT
    #: BUFFER: how many finest buckets before the latest stay open.
    buffer: int = 0
    #: BUFFER: drop events older than the buffer (True) or move them into its oldest bucket (False).
    drop: bool = False
    #: BOUNDED: how far (ms) behind the latest event time an event may be and still count.
    allowed_ms: int = 0

    @classmethod
    def of(cls, agg: AggregationSpec) -> Lateness:
        # Arrival time never runs backwards, so an aggregation without `aggregate by` is always exact.
        if agg.time_attribute is None:
            return cls()
        if agg.allowed_lateness_ms is not None:
            return cls(LateMode.BOUNDED, allowed_ms=agg.allowed_lateness_ms)
        if agg.buffer_size is not None or agg.ignore_events_older_than_buffer is not None:
            return cls(LateMode.BUFFER, buffer=agg.buffer_size or 0, drop=bool(agg.ignore_events_older_than_buffer))
        return cls()

    def describe(self) -> str:
        if self.mode is LateMode.BUFFER:
            older = "dropped" if self.drop else "moved into the oldest open bucket"
            return f"buffer of {self.buffer} finest bucket(s); older events are {older}"
        if self.mode is LateMode.BOUNDED:
            return f"allowed lateness {self.allowed_ms} ms; later events are rejected"
        return "exact: every event goes into its own bucket, however late"
