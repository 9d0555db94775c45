"""The store interface: what the engine writes and retrieval reads, whatever the database.

A store keeps, per aggregation, one table of partial states per granularity (see ``layout``), a
commit record per micro-batch (which makes a replayed batch a no-op), the rejected events, and where
each table was purged.  Implementation: ``tiltframe.store.sql.SqlStore`` (SQLite, PostgreSQL, MySQL).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from tiltframe.errors import StoreError

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

    from tiltframe.aggregates.layout import AggregationLayout
    from tiltframe.model.durations import Granularity
    from tiltframe.store.lifecycle.definitions import Definition, DefinitionPlan

class StoreChanged(StoreError):
    """A batch committed between a read and the write that depended on it; nothing was written."""


class RecordKind(enum.StrEnum):
    """Why an event is in the rejected-events table (its ``kind`` column)."""

    INVALID = "invalid"  # its attributes cannot be typed
    TOO_LATE = "too_late"  # beyond @allowedLateness
    OLDER_THAN_BUFFER = "older_than_buffer"  # dropped by @IgnoreEventsOlderThanBuffer('true')
    BEFORE_RECOVERY = "before_recovery"  # a new pipeline's replay of what the store holds
    MOVED = "moved"  # aggregated, but into another bucket than its own (Siddhi's buffer)
    FILE = "file"  # a whole input file that cannot be read (its events are not counted: they are unknown)
    REQUEST = "request"  # a retrieval join's request that cannot be answered (not one of the aggregation's events)


#: Text columns of the rejected-events table, in order (Arrow tables passed to ``write_batch`` use them).
REJECTED_COLUMNS = ("stream", "kind", "reason", "field", "value", "raw")
#: Epoch-ms columns of that table: the event time as read, and the bucket a moved event went into.
REJECTED_TIMES = ("event_timestamp", "adjusted_timestamp")


@dataclass(frozen=True, slots=True)
class Capabilities:
    supports_upsert: bool = True
    supports_transactions: bool = True
    max_identifier_length: int = 1024
    concurrent_readers: bool = True
    #: Executors can copy a batch's partial rows into the store themselves (``store.writes.staging``).
    staged_writes: bool = False


@dataclass(frozen=True, slots=True)
class BatchStats:
    """Counts of one micro-batch: ``events_read == events_aggregated + events_moved + events_rejected``.

    ``events_aggregated`` went into their own buckets, ``events_moved`` into another (Siddhi's buffer).
    ``min_event_ts`` is the start of the earliest finest bucket the batch touched (a lower bound of its
    earliest event time); ``max_event_ts`` is its latest event time.  ``values_skipped``: per measure that
    takes an argument, the events aggregated or moved whose argument was null or NaN, which that measure
    skipped (None: not counted).
    """

    events_read: int
    events_aggregated: int
    events_rejected: int
    min_event_ts: int | None = None
    max_event_ts: int | None = None
    events_moved: int = 0
    values_skipped: Mapping[str, int] | None = None


@dataclass(frozen=True, slots=True)
class PipelineState:
    """What a micro-batch inherits from the committed batches of its pipeline (``engine.events.arrival``)."""

    #: Greatest event time aggregated so far (None before the first event).
    latest_event_ts: int | None = None
    #: A new pipeline over a store with data: the latest stored finest bucket, before which events are
    #: taken as replays until a newer one arrives.  None otherwise, and once a newer event has arrived.
    recovery_bucket: int | None = None


@dataclass(frozen=True, slots=True)
class StagedBatch:
    """A batch whose partial rows executors copied into the store's staging table (``store.writes.staging``):
    the tags of the task attempts whose output the driver received (only those are merged), and the rows
    each level holds, finest first."""

    tags: tuple[str, ...]
    rows: tuple[int, ...]


@dataclass(frozen=True)
class StagingTarget:
    """What an executor needs to copy rows into a store's staging table (``store.writes.staging``; pickled into
    the Spark job).

    ``conninfo`` carries the password: the executors connect themselves.  ``kind``: ``copy`` (PostgreSQL's
    ``COPY ... FROM STDIN``, ``copy_sql``) or ``load`` (``LOAD DATA LOCAL INFILE`` on MariaDB and MySQL,
    ``copy_sql`` with a mark where the file's name goes)."""

    conninfo: str
    copy_sql: str
    #: The level tables' stored columns in order, with their Arrow types.
    columns: tuple[tuple[str, pa.DataType], ...]
    keys: tuple[str, ...]
    kind: str = "copy"


@dataclass(frozen=True)
class BatchWrite:
    """Everything one micro-batch adds to the store, written in one transaction.

    ``levels`` maps each granularity to its partial rows (columns as in the layout); ``rejected`` has
    the columns of :data:`REJECTED_COLUMNS` (strings) and :data:`REJECTED_TIMES` (longs), any may be
    null.  ``state`` is the pipeline's state after this batch.  ``shard_id`` is the writing deployment's,
    required when the layout is partitioned.  ``staged``: the partial rows wait in the store's staging
    table instead (``levels`` is then empty).
    """

    pipeline_id: str
    batch_id: int
    stats: BatchStats
    levels: Mapping[Granularity, pa.Table] = field(default_factory=dict)
    rejected: pa.Table | None = None
    state: PipelineState = field(default_factory=PipelineState)
    shard_id: str | None = None
    staged: StagedBatch | None = None


@dataclass(frozen=True, slots=True)
class KeyTerm:
    """``column op value``: a condition on one key column of a level table (``AGG_TIMESTAMP`` or a group-by
    key) that a store applies in SQL (:meth:`Store.read_merged`).  ``op`` is one of ``==``, ``!=``, ``<``,
    ``<=``, ``>``, ``>=``; ``value`` a Python value of the column's own type (str, int or bool), which the
    store compares exactly, byte for byte for text."""

    column: str
    op: str
    value: Any


@dataclass(frozen=True, slots=True)
class TableInfo:
    table: str
    granularity: str
    rows: int
    first_bucket: int | None
    last_bucket: int | None


@dataclass(frozen=True, slots=True)
class PurgeInfo:
    """The purges of one table: buckets starting before ``purged_before`` are gone for good."""

    table: str
    purged_before: int
    rows_purged: int
    purged_at: int


@dataclass(frozen=True, slots=True)
class SkippedValues:
    """Of one measure that takes an argument: the events aggregated whose argument was null or NaN, which it
    skipped, in the committed batches that counted them (all but batches committed by a version of tiltframe
    that did not count, or before the measure was added)."""

    measure: str
    #: None when no committed batch counted them (but some batch was committed): unknown.
    skipped: int | None
    #: The events aggregated (into their own bucket or another) in the batches counted.
    events: int
    batches_counted: int
    batches_not_counted: int


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
    events_moved: int = 0
    #: Recorded events by kind (``moved`` included), most frequent first.
    recorded_by_kind: tuple[tuple[str, int], ...] = ()
    purges: tuple[PurgeInfo, ...] = ()
    #: The shards whose rows the tables hold (empty when they are not partitioned).
    shards: tuple[str, ...] = ()
    #: Measures added to the stored rollup, each with the instant before which its buckets read NULL.
    complete_from: tuple[tuple[str, int], ...] = ()
    #: The app that defined the aggregation (``@app:name``), as the store recorded it.
    app: str | None = None
    #: Per measure that takes an argument, in select order: the null or NaN values it skipped.
    values_skipped: tuple[SkippedValues, ...] = ()


class BatchStore(Protocol):
    """What a rollup's micro-batches need of a place to keep them: its tables, exactly-once commits of
    whole batches, and reads of committed batches only.  A new kind of store starts here
    (tests/store/contract/)."""

    url: str
    capabilities: Capabilities

    def ensure_schema(self, layout: AggregationLayout) -> None:
        """Create the tables of ``layout`` or check that existing ones were made for the same spec."""
        ...

    def is_committed(self, layout: AggregationLayout, pipeline_id: str, batch_id: int) -> bool: ...

    def last_committed_batch(self, layout: AggregationLayout, pipeline_id: str) -> int | None:
        """The greatest batch id of ``pipeline_id`` the store holds a commit record of (None: none, or
        no store at all); the checkpoint's record of what it wrote is compared with it at start."""
        ...

    def pipeline_state(
        self, layout: AggregationLayout, pipeline_id: str, shard_id: str | None = None
    ) -> PipelineState:
        """The state left by the last committed batch of ``pipeline_id``; for a pipeline without one,
        the recovery point of the tables (their latest finest bucket, of ``shard_id``'s rows when
        partitioned), if they hold data."""
        ...

    def prepare_staging(self, layout: AggregationLayout, pipeline_id: str) -> StagingTarget | None:
        """Where executors copy the next batch's partial rows (after deleting what ``pipeline_id`` left
        there uncommitted), or None when this store cannot stage ``layout``'s rows
        (``capabilities.staged_writes`` says whether it ever can)."""
        ...

    def write_batch(self, layout: AggregationLayout, batch: BatchWrite) -> bool:
        """Merge ``batch`` into the tables; False (and no change) if that batch was already committed."""
        ...

    def latest_event_ts(self, layout: AggregationLayout) -> int | None:
        """The greatest event time aggregated so far (by any pipeline); retention is measured from it."""
        ...

    def earliest_event_ts(self, layout: AggregationLayout) -> int | None:
        """The least event time aggregated so far (by any pipeline); None before the first event."""
        ...

    def purged_before(self, layout: AggregationLayout) -> dict[Granularity, int]:
        """Per level, the instant before which its buckets were purged (a level never purged is absent)."""
        ...

    def read(
        self,
        layout: AggregationLayout,
        granularity: Granularity,
        start_ms: int | None = None,
        end_ms: int | None = None,
        *,
        with_shards: bool = False,
        keys: Mapping[str, Sequence[Any]] | None = None,
    ) -> pd.DataFrame:
        """Stored partial rows whose bucket start lies in ``[start_ms, end_ms)`` and whose group-by keys
        take one of the values ``keys`` gives (with ``SHARD_ID`` if asked: the writer of each partial row).
        A store may return more rows than ``keys`` allows (a case-insensitive collation), never fewer."""
        ...

    def read_merged(
        self,
        layout: AggregationLayout,
        granularity: Granularity,
        by: Sequence[str],
        states: Sequence[str],
        start_ms: int | None = None,
        end_ms: int | None = None,
        *,
        by_interval: bool = True,
        where: Sequence[KeyTerm] = (),
    ) -> pd.DataFrame | None:
        """The stored partial rows whose bucket lies in ``[start_ms, end_ms)`` and for which every term of
        ``where`` holds, merged by the database per bucket and value of the group-by keys ``by`` (every
        bucket into one, ``AGG_TIMESTAMP`` 0, without ``by_interval``), so that only the merged rows leave
        it.  Columns ``AGG_TIMESTAMP``, ``by``, ``AGG_EVENT_TIMESTAMP`` and ``states``, rows in no order:
        the rows ``retrieval.merge.merge_rows`` makes of those partial rows for a layout grouped by ``by``.
        Every state must merge by SUM, MIN or MAX without a combine function
        (``store.reads.merged_reads.merges_in_sql``).  None when the store cannot give exactly those rows (a long
        sum beyond 64 bits, a double sum near its range or over an infinity, text keys in a collation that
        folds case): the caller then merges the partial rows itself."""
        ...

    def change_token(self) -> object | None:
        """A value that changes whenever anything is committed to the store (None: the store cannot tell,
        and readers must not keep answers)."""
        ...

    def close(self) -> None: ...


class RollupLifecycle(Protocol):
    """A stored rollup's later life: rebuilds and swaps, definitions and their migrations, retention,
    compaction, recorded events and what ``inspect`` shows."""

    def reset(self, layout: AggregationLayout, shard_id: str | None = None) -> None:
        """Drop the aggregation's tables, commit records, recorded events and purge marks (a rebuild, which
        then reads every input again); refused when the tables hold another shard's rows."""
        ...

    def add_shards(self, layout: AggregationLayout, shard_id: str) -> list[str]:
        """Give tables made before ``layout`` was partitioned a ``SHARD_ID`` key column, their rows
        becoming ``shard_id``'s; returns the tables changed."""
        ...

    def rewrite_older_states(self, layout: AggregationLayout) -> dict[str, int]:
        """Rewrite the sketch states stored in an older format in the current one; returns the rows
        rewritten per table."""
        ...

    def compact(self, layout: AggregationLayout, before_ms: int) -> int:
        """Merge the writers' partial rows of each bucket starting before ``before_ms`` and key into one
        row, atomically; returns the rows removed (0 when there is nothing to merge)."""
        ...

    def last_purged_at(self, layout: AggregationLayout) -> int:
        """Epoch ms of the last purge, or of the aggregation's registration if never purged."""
        ...

    def recorded_events(self, layout: AggregationLayout, kinds: Sequence[str]) -> pd.DataFrame:
        """Every recorded event of ``layout`` of the given kinds (``kind``, ``raw``, ``event_timestamp``,
        ``adjusted_timestamp``)."""
        ...

    def commit_mark(self, layout: AggregationLayout) -> tuple[int, int | None]:
        """What the aggregation's commit records are now, for :meth:`replace_buckets`."""
        ...

    def replace_buckets(self, layout: AggregationLayout, levels: Mapping[Granularity, tuple[int, int, pa.Table]],
                        mark: tuple[int, int | None]) -> dict[Granularity, int]:
        """Replace each level's stored rows in ``[start, end)`` by the rows given, atomically; ``StoreChanged``
        (nothing written) when a batch committed since ``mark``."""
        ...

    def swap_rollup(self, layout: AggregationLayout, levels: Mapping[Granularity, pa.Table], events: int,
                    mark: tuple[int, int | None]) -> tuple[DefinitionPlan, dict[Granularity, int]]:
        """Put every level of ``layout``, rebuilt from ``events`` of the inputs, in place of an earlier
        definition's rollup, atomically; ``StoreChanged`` (nothing changed) when a batch committed since
        ``mark``, ``StoreError`` when the store aggregated more events than that."""
        ...

    def mark_complete(self, layout: AggregationLayout, measures: Sequence[str]) -> None:
        """Record that measures a migration added now hold their whole history (backfilled)."""
        ...

    def complete_from(self, layout: AggregationLayout) -> dict[str, int]:
        """Per measure added to a stored rollup: the instant before which its buckets read NULL."""
        ...

    def recorded_definition(self, layout: AggregationLayout) -> Definition | None:
        """The definition of ``layout``'s aggregation the store recorded (``store.lifecycle.definitions``)."""
        ...

    def definition_plan(self, layout: AggregationLayout) -> DefinitionPlan | None:
        """The plan from the stored definition of ``layout``'s aggregation to ``layout`` (None: not stored)."""
        ...

    def purge(
        self, layout: AggregationLayout, before: Mapping[Granularity, int], latest_event_ts: int
    ) -> dict[Granularity, int]:
        """Delete, per granularity, the buckets starting before the given instant, atomically with respect
        to batch writes (which never write those buckets again); returns rows deleted per granularity."""
        ...

    def rejected(self, layout: AggregationLayout, limit: int = 100) -> pd.DataFrame:
        """The latest ``limit`` recorded events (rejected or moved), newest first."""
        ...

    def info(self, layout: AggregationLayout) -> AggregationInfo: ...


class Store(BatchStore, RollupLifecycle, Protocol):
    """A place to keep rollups: a batch's needs and its later life.  All writes of a batch are atomic;
    reads see committed batches only."""
