"""Executor-side staging: each Spark task writes its partition's partial rows into the store's staging table
(``tiltframe.store.writes.staging``; how, per server: ``engine.rollup.staging_writers``), and only small summaries reach
the driver.

The driver then carries per batch a few rows per task (the tag of the attempt that copied, and per level
the rows copied, the events they count and their bucket and event-time bounds) plus the events a late-event
policy recorded, whatever the size of the batch; the server merges the staged rows in the batch's commit
transaction.  The tag names the task attempt, so the commit merges exactly the attempts whose output the
driver received: a failed attempt's copied rows are left out, and deleted before the pipeline stages again.

Used on a cluster's master (:func:`wanted_on`); ``$TILTFRAME_STAGED_WRITES`` on or off says otherwise (off: the
driver path of ``SqlStore.write_batch``).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql.pandas.types import to_arrow_type
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

from tiltframe.aggregates.layout import AGG_COUNT, AGG_EVENT_TIMESTAMP, AGG_TIMESTAMP
from tiltframe.engine.events.arrival import RECORD
from tiltframe.engine.rollup.partials import COUNTED, LEVEL, RECORD_LEVEL, REJECTED
from tiltframe.engine.rollup.staging_writers import writer
from tiltframe.env_values import env_switch
from tiltframe.store.base import StagedBatch, StagingTarget

STAGED_WRITES_ENV = "TILTFRAME_STAGED_WRITES"
#: Test only: the Spark partition whose first attempt fails after its copy committed (a retried task).
FAIL_FIRST_ATTEMPT_ENV = "TILTFRAME_TEST_STAGED_FAIL_PARTITION"

_TAG, _ROWS, _COUNT, _REJECTED = "_tag", "_rows", "_count", "_rejected_count"
_MIN_TS, _MAX_TS, _MAX_EVENT_TS = "_min_ts", "_max_ts", "_max_event_ts"
#: The summary row of a task (its tag and the events of rejected groups); level rows have their level.
_TASK_ROW = -2
_LONGS = (_ROWS, _COUNT, _REJECTED, _MIN_TS, _MAX_TS, _MAX_EVENT_TS)


def enabled() -> bool | None:
    """Whether staging is wanted: ``$TILTFRAME_STAGED_WRITES`` on or off (a value that is neither is a usage
    error); unset, None: the master decides (:func:`wanted_on`)."""
    return env_switch(STAGED_WRITES_ENV, None)


def wanted_on(master: str) -> bool:
    """Whether to stage when nobody said, on Spark's ``master``: on a cluster, yes (the executors' copies
    grow with them, and the driver carries no partial row); on a local master, no: the executors share the
    driver's cores, and the driver's bulk load of new buckets (``store.writes.appends``) writes a batch in less
    than half the time of a copy into the staging table and a merge out of it."""
    return not master.startswith("local")


@dataclass(frozen=True)
class Staged:
    """What the driver learns of a staged batch."""

    batch: StagedBatch
    #: Events in the finest level's rows, and in rejected groups.
    aggregated: int
    rejected: int
    #: Over the finest level: the earliest bucket, the latest bucket, the latest event time.
    min_ts: int | None
    max_ts: int | None
    max_event_ts: int | None
    #: The policy's RECORD column (struct), rows of level ``RECORD_LEVEL``.
    records: pa.ChunkedArray | None
    #: Over the finest level: the sum of each column counting an argument's values (``COUNTED``).
    counted: dict[str, int]


def stage(levels: DataFrame, target: StagingTarget, pipeline_id: str, batch_id: int, n_levels: int) -> Staged:
    """Copy ``levels`` (``Levels``' output) into the staging table from the executors, in one Spark job."""
    record_type = levels.schema[RECORD].dataType if RECORD in levels.columns else None
    fields = [StructField(LEVEL, IntegerType(), False), StructField(_TAG, StringType())]
    counted = tuple(c for c in levels.columns if c.startswith(COUNTED))
    fields += [StructField(c, LongType()) for c in (*_LONGS, *counted)]
    # Every task's summary has the RECORD column, also a task whose partition is empty (no batch to see
    # its type in): Spark expects the declared schema.
    record_arrow = None
    if record_type is not None:
        fields.append(StructField(RECORD, record_type))
        record_arrow = to_arrow_type(record_type)
    fail = os.environ.get(FAIL_FIRST_ATTEMPT_ENV)
    nonce = uuid.uuid4().hex[:12]

    def copy(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        return _copy_partition(batches, target, (pipeline_id, batch_id, nonce), record_arrow,
                               None if fail is None else int(fail), counted)

    table = levels.mapInArrow(copy, StructType(fields)).toArrow()
    return _summed(table, n_levels, counted)


def _summed(table: pa.Table, n_levels: int, counted: tuple[str, ...]) -> Staged:
    level = table.column(LEVEL)
    tasks = table.filter(pc.equal(level, _TASK_ROW))
    rows = table.filter(pc.greater_equal(level, 0))
    per_level = [rows.filter(pc.equal(rows.column(LEVEL), i)) for i in range(n_levels)]
    finest = per_level[0]
    records = table.column(RECORD).filter(pc.equal(level, RECORD_LEVEL)) if RECORD in table.column_names else None

    def total(t: pa.Table, column: str) -> int:
        return int(pc.sum(t.column(column)).as_py() or 0)

    batch = StagedBatch(tuple(str(t) for t in tasks.column(_TAG).to_pylist()),
                        tuple(total(t, _ROWS) for t in per_level))
    return Staged(batch, total(finest, _COUNT), total(tasks, _REJECTED), pc.min(finest.column(_MIN_TS)).as_py(),
                  pc.max(finest.column(_MAX_TS)).as_py(), pc.max(finest.column(_MAX_EVENT_TS)).as_py(), records,
                  {c: total(finest, c) for c in counted})


# --- on the executor -------------------------------------------------------------------------------------

def _copy_partition(batches: Iterator[pa.RecordBatch], target: StagingTarget, job: tuple[str, int, str],
                    record_type: pa.DataType | None, fail: int | None,
                    counted: tuple[str, ...] = ()) -> Iterator[pa.RecordBatch]:
    """Write the partition's data rows (level >= 0, not rejected) into the staging table and yield its
    summary rows; ``job``: pipeline id, batch id, the job's nonce; ``record_type``: the RECORD column's,
    if the levels have one; ``counted``: the columns counting arguments' values, summed per level."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    partition = ctx.partitionId() if ctx is not None else 0
    pipeline_id, batch_id, nonce = job
    tag = f"{nonce}/{partition}/{ctx.taskAttemptId() if ctx is not None else 0}"
    stats: list[pa.Table] = []
    records: list[pa.ChunkedArray] = []
    rejected = 0
    with writer(target) as write:
        for batch in batches:
            table = pa.Table.from_batches([batch])
            if record_type is not None:
                records.append(table.column(RECORD).filter(pc.equal(table.column(LEVEL), RECORD_LEVEL)))
            level, bad = table.column(LEVEL), table.column(REJECTED)
            rejected += int(pc.sum(table.column(AGG_COUNT).filter(pc.and_(pc.equal(level, 0), bad))).as_py() or 0)
            data = table.filter(pc.and_(pc.greater_equal(level, 0), pc.invert(bad)))
            if data.num_rows == 0:
                continue
            stats.append(data.group_by(LEVEL).aggregate([
                (AGG_COUNT, "sum"), (AGG_COUNT, "count"), (AGG_TIMESTAMP, "min"), (AGG_TIMESTAMP, "max"),
                (AGG_EVENT_TIMESTAMP, "max"), *((c, "sum") for c in counted)]))
            write(data, (pipeline_id, batch_id, tag))
    if fail is not None and fail == partition and ctx is not None and ctx.attemptNumber() == 0:
        msg = f"test: the first attempt of partition {partition} fails after its copy committed"
        raise RuntimeError(msg)
    yield _summary(tag, rejected, stats, records, record_type, counted)


def _summary(tag: str, rejected: int, stats: list[pa.Table], records: list[pa.ChunkedArray],
             record_type: pa.DataType | None, counted: tuple[str, ...] = ()) -> pa.RecordBatch:
    levels = pa.concat_tables(stats).group_by(LEVEL).aggregate([
        (f"{AGG_COUNT}_count", "sum"), (f"{AGG_COUNT}_sum", "sum"), (f"{AGG_TIMESTAMP}_min", "min"),
        (f"{AGG_TIMESTAMP}_max", "max"), (f"{AGG_EVENT_TIMESTAMP}_max", "max"),
        *((f"{c}_sum", "sum") for c in counted)]) if stats else None
    n_levels = 0 if levels is None else levels.num_rows
    level = [_TASK_ROW] + ([] if levels is None else levels.column(LEVEL).to_pylist())
    arrays: dict[str, pa.Array | pa.ChunkedArray] = {
        LEVEL: pa.array(level, pa.int32()), _TAG: pa.array([tag] + [None] * n_levels, pa.string())}
    sources = {_ROWS: f"{AGG_COUNT}_count_sum", _COUNT: f"{AGG_COUNT}_sum_sum", _MIN_TS: f"{AGG_TIMESTAMP}_min_min",
               _MAX_TS: f"{AGG_TIMESTAMP}_max_max", _MAX_EVENT_TS: f"{AGG_EVENT_TIMESTAMP}_max_max",
               **{c: f"{c}_sum_sum" for c in counted}}
    for name in (*_LONGS, *counted):
        head = [rejected] if name == _REJECTED else [None]
        rest = [None] * n_levels if levels is None or name == _REJECTED else levels.column(sources[name]).to_pylist()
        arrays[name] = pa.array(head + rest, pa.int64())
    table = pa.table(arrays)
    if record_type is not None:
        table = table.append_column(RECORD, pa.nulls(table.num_rows, record_type))
        chosen = pa.concat_arrays([c.combine_chunks() for c in records]) if records else pa.array([], record_type)
        if len(chosen):
            extra = pa.table({LEVEL: pa.array([RECORD_LEVEL] * len(chosen), pa.int32()),
                              _TAG: pa.nulls(len(chosen), pa.string()),
                              **{c: pa.nulls(len(chosen), pa.int64()) for c in (*_LONGS, *counted)},
                              RECORD: chosen})
            table = pa.concat_tables([table, extra])
    return table.combine_chunks().to_batches()[0]
