"""Arrival order, the latest event time seen, and the late-event policies, all inside Spark.

**Arrival order.** Micro-batches come in batch order.  Inside a batch, a file source delivers its files
in the order of (modification time, path), each file's rows in file order; Spark packs small files into
partitions by size, so the file of each row (``ARRIVAL_PART``, set by ``sources``) is what orders them,
not the partition.  A source that is not made of files has its partitions in index order (Kafka-like
sources: one partition per sub-stream) and each partition's rows in the order Spark reads them.

**Latest.** For each event, ``latest`` is the greatest valid event time so far in arrival order, the
event itself and all earlier batches included.  No event leaves the executors to compute it:

1. every arrival part gets its greatest event time; a window over the parts only (a handful of rows)
   ranks them and gives each the greatest time of the parts before it; the result is broadcast back;
2. inside a part, a window partitioned by part and ordered by row gives the running greatest time;
3. ``latest = greatest(earlier batches, earlier parts, running greatest in the part)``.

A small batch (``engine.inputs.batch_sessions``) is ordered in one window over all its events instead: the same
order and latest, its input read once and nothing broadcast (the broadcast is a job of its own).

**Policies** (``tiltframe.model.lateness``) then mark each event: aggregated into its own bucket, moved
into another bucket (Siddhi's buffer, its original time kept in ``ORIGINAL_TS``), or rejected with a
kind and a reason.  A new pipeline over a store that already holds data first ignores events up to the
latest stored finest bucket, until a newer one arrives (seed 000's recovery rule): a replayed source
is not counted twice.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from tiltframe.aggregates.layout import AggregationLayout
from tiltframe.engine.events.buckets import bucket_start
from tiltframe.engine.events.typed import ARRIVAL_PART, EVENT_TS, REASON
from tiltframe.model.lateness import LateMode, Lateness
from tiltframe.model.streams import AttrType
from tiltframe.store.base import PipelineState, RecordKind
from tiltframe.timeutil.parse import format_ts

#: The global arrival position of an event in its batch (rank of its part, then row in the part).
ARRIVAL_SEQ = "_arrival_seq"
#: The greatest event time seen up to and including the event.
LATEST = "_tiltframe_latest"
#: True for an event aggregated into a bucket other than its own.
MOVED = "_tiltframe_moved"
#: The event time as read (``EVENT_TS`` of a moved event is the start of the bucket it was moved to).
ORIGINAL_TS = "_tiltframe_original_ts"
#: Why an event is not in its own bucket (a ``RecordKind``); null for the others.
KIND = "_tiltframe_kind"
#: The struct column of ``policy_records``.
RECORD = "_tiltframe_record"


_PART, _ROW, _RANK, _PART_MAX, _BEFORE = (f"_tiltframe_{n}" for n in ("part", "row", "rank", "part_max", "before"))
_ROW_BITS = 33  # monotonically_increasing_id: partition index above bit 33, row inside the partition below


def needs_latest(layout: AggregationLayout, carry: PipelineState) -> bool:
    if layout.spec.time_attribute is None:
        return False
    return Lateness.of(layout.spec).mode is not LateMode.EXACT or carry.recovery_bucket is not None


def needs_order(layout: AggregationLayout, carry: PipelineState) -> bool:
    """Whether :func:`arrange` orders the batch's arrivals (else it returns the events as they are)."""
    return layout.orders_arrivals or needs_latest(layout, carry)


def arrange(events: DataFrame, layout: AggregationLayout, carry: PipelineState, *, small: bool = False) -> DataFrame:
    """Typed events with ``ARRIVAL_SEQ`` (when anything needs order) and the late-event policy applied:
    ``REASON``/``KIND`` set for rejected events, ``EVENT_TS`` moved and ``MOVED`` set for moved ones.
    ``small``: a batch small enough to be ordered in one partition (``engine.inputs.batch_sessions``)."""
    if not needs_order(layout, carry):
        return events
    with_latest = needs_latest(layout, carry)
    order = _in_one_partition if small else _with_arrival_order
    ordered = order(events, with_latest=with_latest, carry=carry)
    return _apply_policy(ordered, layout, carry) if with_latest else ordered


def _valid_ts() -> Column:
    return F.when(F.col(REASON).isNull(), F.col(EVENT_TS))


def _with_part_and_row(events: DataFrame) -> DataFrame:
    """``events`` with their arrival part (``_PART``: the file block, else the partition) and row (``_ROW``)."""
    part = F.col(ARRIVAL_PART) if ARRIVAL_PART in events.columns else F.spark_partition_id()
    return events.select("*", part.alias(_PART), F.monotonically_increasing_id().alias(_ROW))


def _earlier(carry: PipelineState) -> Column:
    """The greatest valid event time of the earlier batches: a null literal when there is none yet."""
    return F.lit(carry.latest_event_ts).cast("long")


def _with_arrival_order(events: DataFrame, *, with_latest: bool, carry: PipelineState) -> DataFrame:
    rows = _with_part_and_row(events)
    # One window over the parts (a few rows), not over events: `partitionBy(lit)` keeps Spark from
    # warning about a window without partitions.
    order = Window.partitionBy(F.lit(0)).orderBy(_PART)
    parts = (
        rows.groupBy(_PART)
        .agg(F.max(_valid_ts()).alias(_PART_MAX))
        .select(
            _PART,
            (F.row_number().over(order) - 1).cast("long").alias(_RANK),
            F.max(_PART_MAX).over(order.rowsBetween(Window.unboundedPreceding, -1)).alias(_BEFORE),
        )
    )
    row_in_part = F.col(_ROW).bitwiseAND(F.lit((1 << _ROW_BITS) - 1))
    seq = F.shiftleft(F.col(_RANK), _ROW_BITS) + row_in_part
    joined = rows.join(F.broadcast(parts), _PART).withColumn(ARRIVAL_SEQ, seq)
    added: list[Column] = []
    if with_latest:
        running = Window.partitionBy(_RANK).orderBy(ARRIVAL_SEQ).rowsBetween(Window.unboundedPreceding, 0)
        added.append(F.greatest(_earlier(carry), F.col(_BEFORE), F.max(_valid_ts()).over(running)).alias(LATEST))
    # One projection for what is added and what is left (each DataFrame operation analyses the whole plan
    # again).  The sequence stays a column of its own before it: ordered by its expression instead, the
    # window would make the policy's records and the aggregation read the input apart.
    kept = [F.col(f"`{c}`") for c in (*events.columns, ARRIVAL_SEQ)]
    return joined.select(*kept, *added)


def _in_one_partition(events: DataFrame, *, with_latest: bool, carry: PipelineState) -> DataFrame:
    """What :func:`_with_arrival_order` gives, for a small batch: one window over all its events in arrival
    order (part, then row) numbers them and carries the greatest time so far, where the general plan reads
    the input a second time for the parts' greatest times and joins them back through a broadcast (a job of
    its own).  The numbers differ from the general plan's; only their order counts (within a batch)."""
    rows = _with_part_and_row(events)
    order = Window.partitionBy(F.lit(0)).orderBy(_PART, _ROW)
    added = [(F.row_number().over(order) - 1).cast("long").alias(ARRIVAL_SEQ)]
    if with_latest:
        running = order.rowsBetween(Window.unboundedPreceding, 0)
        added.append(F.greatest(_earlier(carry), F.max(_valid_ts()).over(running)).alias(LATEST))
    return rows.select(*(F.col(f"`{c}`") for c in events.columns), *added)


def _apply_policy(events: DataFrame, layout: AggregationLayout, carry: PipelineState) -> DataFrame:
    spec, zone = layout.spec, layout.zone
    finest = spec.finest
    policy = Lateness.of(spec)
    valid = F.col(REASON).isNull()
    ts, latest = F.col(EVENT_TS), F.col(LATEST)
    rejections: list[tuple[Column, RecordKind, str]] = []  # (condition, kind, reason), first match wins
    if carry.recovery_bucket is not None:
        stored = format_ts(carry.recovery_bucket)
        reason = (f"at or before the latest stored {finest} bucket ({stored}) and no newer event since this "
                  f"pipeline started: taken as a replay of events the store already holds")
        replay = bucket_start(latest, finest, zone) <= carry.recovery_bucket
        rejections.append((replay, RecordKind.BEFORE_RECOVERY, reason))
    older: Column | None = None
    oldest_open: Column | None = None
    if policy.mode is LateMode.BOUNDED:
        reason = f"more than {policy.allowed_ms} ms behind the latest event time seen (allowed lateness)"
        rejections.append((ts < latest - F.lit(policy.allowed_ms), RecordKind.TOO_LATE, reason))
    elif policy.mode is LateMode.BUFFER:
        latest_bucket = bucket_start(latest, finest, zone)
        if policy.buffer == 0:
            oldest_open = latest_bucket
        else:
            # Step back N buckets; aiming at the middle of the target bucket absorbs 23- and 25-hour days.
            step = finest.unit.fixed_ms * finest.multiple  # validation allows seconds to days only
            oldest_open = bucket_start(latest_bucket - F.lit(policy.buffer * step - step // 2), finest, zone)
        older = bucket_start(ts, finest, zone) < oldest_open
        if policy.drop:
            reason = f"older than {_open_buckets(layout)}: dropped (@IgnoreEventsOlderThanBuffer)"
            rejections.append((older, RecordKind.OLDER_THAN_BUFFER, reason))
            older = None
    kind, why = F.when(valid, F.lit(None)).otherwise(F.lit(RecordKind.INVALID.value)), F.col(REASON)
    for cond, k, text in reversed(rejections):
        hit = valid & cond
        kind = F.when(hit, F.lit(k.value)).otherwise(kind)
        why = F.when(hit, F.lit(text)).otherwise(why)
    rejected_now = why.isNotNull()
    moved = ~rejected_now & older if older is not None else F.lit(False)
    new_ts = F.when(moved, oldest_open).otherwise(ts) if older is not None else ts
    return events.select(
        *(c for c in events.columns if c not in (EVENT_TS, REASON)),
        new_ts.alias(EVENT_TS),
        why.alias(REASON),
        kind.alias(KIND),
        moved.alias(MOVED),
        ts.alias(ORIGINAL_TS),
    )


def policy_records(events: DataFrame, layout: AggregationLayout) -> DataFrame:
    """The events the policy moved or rejected, as one struct column ``record`` (the fields of the
    rejected-events table; invalid events are recorded apart, from the raw rows).

    Only columns the aggregation also carries are used (the time attribute is rebuilt from
    ``ORIGINAL_TS``), so Spark can serve both from one arrival-order shuffle.
    """
    spec, stream = layout.spec, layout.stream
    time_attr = spec.time_attribute
    moved = F.col(MOVED)

    def attr(name: str) -> Column:
        if name == time_attr and stream.attribute(name).type is AttrType.LONG:
            return F.col(ORIGINAL_TS).alias(name)
        return F.col(name)

    record = F.struct(
        F.when(moved, F.lit(RecordKind.MOVED.value)).otherwise(F.col(KIND)).alias("kind"),
        # Written as a nullable column: Arrow refuses a non-null field inside the struct's null rows.
        F.when(moved, F.lit(moved_reason(layout))).otherwise(F.col(REASON)).alias("reason"),
        F.col(ORIGINAL_TS).alias("event_timestamp"),
        F.when(moved, F.col(EVENT_TS)).alias("adjusted_timestamp"),
        F.to_json(F.struct(*(attr(a.name) for a in stream.attributes))).alias("raw"),
    )
    policy = F.col(KIND).isNotNull() & (F.col(KIND) != F.lit(RecordKind.INVALID.value))
    return events.filter(moved | policy).select(record.alias(RECORD))


def _open_buckets(layout: AggregationLayout) -> str:
    """The finest buckets a buffer policy keeps open, as reasons name them."""
    buffer, finest = Lateness.of(layout.spec).buffer, layout.spec.finest
    return f"the buffer ({buffer} {finest} buckets before the latest)" if buffer else f"the latest {finest} bucket"


def moved_reason(layout: AggregationLayout) -> str:
    if Lateness.of(layout.spec).buffer:
        return f"older than {_open_buckets(layout)}: moved into the oldest bucket still open"
    return f"older than {_open_buckets(layout)}: moved into it (no @BufferSize)"
