"""The store interface: what the engine writes and retrieval reads, whatever the database.

A store keeps, per aggregation, one table of partial states per granularity (see ``layout``), a
commit record per micro-batch (which makes a replayed batch a no-op), and the rejected events.
Implementations: ``tiltframe.store.sql.SqlStore`` (SQLite now; PostgreSQL and MySQL share it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

    from tiltframe.spec.durations import Granularity
    from tiltframe.store.layout import AggregationLayout

#: Columns of the rejected-events table, in order (Arrow tables passed to ``write_batch`` use them).
REJECTED_COLUMNS = ("stream", "reason", "field", "value", "raw")


@dataclass(frozen=True, slots=True)
class Capabilities:
    supports_upsert: bool = True
    supports_transactions: bool = True
    max_identifier_length: int = 1024
    concurrent_readers: bool = True


@dataclass(frozen=True, slots=True)
class BatchStats:
    """Counts of one micro-batch; ``events_read == events_aggregated + events_rejected``.

    ``min_event_ts`` is the start of the earliest finest bucket the batch touched (a lower bound of its
    earliest event time); ``max_event_ts`` is its latest event time.
    """

    events_read: int
    events_aggregated: int
    events_rejected: int
    min_event_ts: int | None = None
    max_event_ts: int | None = None


@dataclass(frozen=True)
class BatchWrite:
    """Everything one micro-batch adds to the store, written in one transaction.

    ``levels`` maps each granularity to its partial rows (columns as in the layout); ``rejected`` has
    the columns of :data:`REJECTED_COLUMNS` (all strings, ``field``/``value`` may be null).
    """

    pipeline_id: str
    batch_id: int
    stats: BatchStats
    levels: Mapping[Granularity, pa.Table] = field(default_factory=dict)
    rejected: pa.Table | None = None


@dataclass(frozen=True, slots=True)
class TableInfo:
    table: str
    granularity: str
    rows: int
    first_bucket: int | None
    last_bucket: int | None


@dataclass(frozen=True, slots=True)
class AggregationInfo:
    """What ``inspect`` shows for one aggregation."""

    name: str
    spec_hash: str
    zone: str
    tables: tuple[TableInfo, ...]
    batches: int
    events_read: int
    events_aggregated: int
    events_rejected: int
    rejected_by_reason: tuple[tuple[str, int], ...]
    min_event_ts: int | None
    max_event_ts: int | None


class Store(Protocol):
    """A place to keep rollups.  All writes of a batch are atomic; reads see committed batches only."""

    url: str
    capabilities: Capabilities

    def ensure_schema(self, layout: AggregationLayout) -> None:
        """Create the tables of ``layout`` or check that existing ones were made for the same spec."""
        ...

    def is_committed(self, layout: AggregationLayout, pipeline_id: str, batch_id: int) -> bool: ...

    def write_batch(self, layout: AggregationLayout, batch: BatchWrite) -> bool:
        """Merge ``batch`` into the tables; False (and no change) if that batch was already committed."""
        ...

    def read(
        self,
        layout: AggregationLayout,
        granularity: Granularity,
        start_ms: int | None = None,
        end_ms: int | None = None,
    ) -> pd.DataFrame:
        """Stored partial rows whose bucket start lies in ``[start_ms, end_ms)``."""
        ...

    def rejected(self, layout: AggregationLayout, limit: int = 100) -> pd.DataFrame: ...

    def info(self, layout: AggregationLayout) -> AggregationInfo: ...

    def close(self) -> None: ...
