"""Run one continuous query on Spark Structured Streaming.

The plan: typed events (rejections kept) -> WHERE -> group keys and aggregate arguments as columns, in
Spark -> union with the clock's ticks -> ``groupBy(bucket).transformWithStateInPandas`` (``processor.py``, ``step.py``)
-> ``foreachBatch``: emitted rows to the sink, late and rejected events to the record, the greatest event
time back into the clock.

A bounded run (``follow=False``) freezes processing time at its start, runs until the input and the
watermark's consequences are processed, then moves the clock once past the policy's intervals
(:meth:`ContinuousRun.finish`); a follow run moves the clock with wall time.  Tests drive the
clock by hand (:meth:`ContinuousRun.advance`).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.streaming import DataStreamWriter, StreamingQuery

from tiltframe.engine.continuous.clock import clock_stream, follow_wall_time, read_clock, wall_ms, write_clock
from tiltframe.engine.continuous.columns import (
    CHANGELOG_DELTA,
    DELTA,
    EMITTED_AT,
    KIND,
    MAX_TS,
    NOW,
    OUT_KIND,
    PERIOD,
    PERIOD_IF,
    RAW,
    REASON,
    ROW_KINDS,
    ProcessorConfig,
    extra_columns,
    version_outputs,
)
from tiltframe.engine.continuous.processor import ContinuousProcessor
from tiltframe.engine.continuous.windows import step_class
from tiltframe.engine.events.spark_expressions import to_column
from tiltframe.engine.events.typed import EVENT_TS, SPARK_TYPES, type_events
from tiltframe.engine.events.typed import RAW as TYPED_RAW
from tiltframe.engine.events.typed import REASON as TYPED_REASON
from tiltframe.engine.inputs.hadoop_paths import Location
from tiltframe.engine.rollup.markers import write_marker
from tiltframe.engine.sinks import JsonLinesSink, Sink, readable_times
from tiltframe.model.app import AppSpec
from tiltframe.model.continuous import WINDOW_COLUMNS, ContinuousQuery
from tiltframe.model.expressions import Attr
from tiltframe.model.streams import AttrType
from tiltframe.retrieval.pandas_states import TS, arg_column, array_elements, layout_for, output_types

BUCKET = "tf_bucket"
ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
STATE_STORE_PROVIDER = "spark.sql.streaming.stateStore.providerClass"
_PANDAS_DTYPES = {
    AttrType.INT: "Int32",
    AttrType.LONG: "Int64",
    AttrType.FLOAT: "float32",
    AttrType.DOUBLE: "float64",
    AttrType.BOOL: "boolean",
    AttrType.STRING: "object",
    AttrType.BINARY: "object",
    AttrType.ARRAY: "object",
}


@dataclass
class ContinuousTotals:
    """What a continuous query did: rows emitted, events late, events rejected (bad values) and events between
    a sampling hop's windows."""

    rows_emitted: int = 0
    events_late: int = 0
    events_rejected: int = 0
    #: Events between the windows of a hop whose slide is longer than its size (it samples), recorded.
    events_unwindowed: int = 0
    batches: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)


def checkpoint_location(query_dir: Path, root: Location | None) -> Location:
    """Spark's checkpoint of a continuous query (its window state, written by the executors): under the
    checkpoint root (``--checkpoint-dir``), so that a root on HDFS or an object store serves a cluster;
    in the query's own directory when an earlier version put it there, or without a root."""
    legacy = query_dir / "spark"
    if root is None or legacy.exists():
        return legacy
    return root / f"continuous-{query_dir.name}"


def query_dir(app: AppSpec, query: ContinuousQuery, data_dir: str | Path) -> Path:
    """The folder of a continuous query's own files (clock, records, emit numbers) under the data directory."""
    return Path(data_dir).absolute() / "continuous" / query_id(app, query)


def query_id(app: AppSpec, query: ContinuousQuery) -> str:
    """Stable name of a query's checkpoint: its name and a digest of what shapes its state."""
    shape = repr((query, app.stream(query.stream)))
    return f"{query.name or 'query'}-{hashlib.sha256(shape.encode()).hexdigest()[:12]}"


def window_outputs(app: AppSpec, query: ContinuousQuery) -> tuple[str, ...]:
    """The outputs of ``query`` that are its window's ``window_start``/``window_end`` (epoch ms), whose
    readable twins the sinks add (``readable_times``); a stream attribute of that name is not one."""
    if not query.window.is_windowed:
        return ()
    stream = app.stream(query.stream)
    return tuple(name for name, expr in query.outputs
                 if isinstance(expr, Attr) and expr.name in WINDOW_COLUMNS and not stream.has(expr.name))


class ContinuousRun:
    """One continuous query started on Spark; rows go to ``sink`` under the query's name."""

    def __init__(
        self,
        app: AppSpec,
        query: ContinuousQuery,
        events: DataFrame,
        sink: Sink,
        *,
        data_dir: str | Path,
        spark: SparkSession,
        name: str,
        follow: bool = False,
        trigger_ms: int = 1000,
        buckets: int | None = None,
        manual_clock: bool = False,
        checkpoint_root: Location | None = None,
    ) -> None:
        self.app, self.query, self.name, self.spark = app, query, name, spark
        self.sink = readable_times(sink, window_outputs(app, query), app.timezone or "UTC")
        self.follow, self.manual_clock = follow, manual_clock
        self.trigger_ms = trigger_ms
        self.dir = query_dir(app, query, data_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.clock = self.dir / "clock.json"
        self.checkpoint = checkpoint_location(self.dir, checkpoint_root)
        self.records = JsonLinesSink(self.dir / "rejected")
        self.versions = EmitVersions(self.dir / "emit_version.json")
        self.totals = ContinuousTotals()
        self.buckets = pinned_buckets(self.dir, buckets or int(spark.conf.get("spark.sql.shuffle.partitions") or "8"))
        config = processor_config(app, query)
        self.layout = config.layout
        self.output_names = query.output_names
        types = output_types(app, query)
        elements = array_elements(app, query)
        self.output_schema = {
            n: T.ArrayType(SPARK_TYPES[elements[n]]) if t is AttrType.ARRAY else SPARK_TYPES[t]
            for n, t in types.items()
        }
        self._plan = self._build(events, config)
        self._query: StreamingQuery | None = None
        self._ticker: threading.Thread | None = None
        self._stop = threading.Event()

    # --- plan -------------------------------------------------------------------------------------------

    def _build(self, raw: DataFrame, config: ProcessorConfig) -> DataFrame:
        events = query_events(self.app, self.query, raw, self.buckets)
        ticks = clock_stream(self.spark, self.clock, self.buckets)
        fields = {f.name: f.dataType for f in events.schema.fields}
        ticks = ticks.select(
            *(
                F.col("bucket").alias(BUCKET),
                F.lit("t").alias(KIND),
                F.col("now").alias(NOW),
                F.col("max_event_ts").alias(MAX_TS),
            ),
            *(F.lit(None).cast(t).alias(n) for n, t in fields.items() if n not in (BUCKET, KIND, NOW, MAX_TS)),
        )
        schema = T.StructType(
            [
                T.StructField(OUT_KIND, T.StringType()),
                T.StructField(EMITTED_AT, T.LongType()),
                T.StructField(DELTA, T.IntegerType()),
                T.StructField(TS, T.LongType()),
                T.StructField(RAW, T.StringType()),
                T.StructField(REASON, T.StringType()),
                *(T.StructField(n, t) for n, t in self.output_schema.items()),
            ]
        )
        return (
            events.unionByName(ticks)
            .groupBy(BUCKET)
            .transformWithStateInPandas(
                statefulProcessor=ContinuousProcessor(config),
                outputStructType=schema,
                outputMode="Append",
                timeMode="None",
            )
        )

    # --- running ----------------------------------------------------------------------------------------

    def start(self) -> ContinuousRun:
        if not self.manual_clock:
            write_clock(self.clock, now=wall_ms())
        writer = (
            self._plan.writeStream.queryName(f"tiltframe-continuous-{self.name}")
            .option("checkpointLocation", str(self.checkpoint))
            .foreachBatch(self._batch)
            .trigger(processingTime=self._trigger())
        )
        self._query = start_with_rocksdb(writer, self.spark)
        if self.follow and not self.manual_clock:
            # The clock moves at least as often as the trigger; a policy without intervals has none to add.
            step = max(0.1, min([self.trigger_ms, *self._intervals()]) / 1000)
            self._ticker = follow_wall_time(self.clock, step, self._stop, f"clock-{self.name}")
        return self

    def _trigger(self) -> str:
        """The run's trigger interval, shortened to the query's shortest EMIT interval (PERIODIC, WITH BATCH,
        TIMEOUT) when that is longer than a second: its rows would otherwise wait for the next micro-batch."""
        ms = self.trigger_ms
        intervals = self._intervals()
        if intervals:
            ms = min(ms, max(1000, min(intervals)))
        return f"{max(1, ms)} milliseconds"

    def _intervals(self) -> list[int]:
        emit = self.query.emit
        return [ms for ms in (emit.interval_ms, emit.batch_ms, emit.timeout_ms) if ms]

    def advance(self, now_ms: int) -> None:
        """Set processing time (a manual clock, for tests and replays)."""
        write_clock(self.clock, now=now_ms)

    def process(self) -> None:
        """Block until everything available (events, clock moves, watermark consequences) is processed."""
        assert self._query is not None
        self._query.processAllAvailable()
        self.check()

    def finish(self) -> None:
        """End a bounded run: process the input, then move processing time past the query's longest
        interval or timeout so that what the policy emits once time passes (the pending periodic rows,
        windows whose TIMEOUT would run out) is emitted before the run ends.  Windows only the watermark
        can close stay open, as they would in a follow run that receives no more events."""
        self.process()
        intervals = self._intervals()
        if intervals:
            now = read_clock(self.clock)["now"] or wall_ms()
            write_clock(self.clock, now=int(now) + 2 * max(intervals))
            self.process()
        self.stop()

    def check(self) -> None:
        """Raise the failure of the streaming query, if it failed."""
        if self._query is not None and self._query.exception() is not None:
            raise self._query.exception()  # type: ignore[misc]

    @property
    def is_active(self) -> bool:
        return self._query is not None and self._query.isActive

    def await_termination(self, timeout: float) -> None:
        if self._query is not None:
            self._query.awaitTermination(timeout)
        self.check()

    def stop(self) -> None:
        self._stop.set()
        if self._query is not None and self._query.isActive:
            self._query.stop()

    def _batch(self, df: DataFrame, batch_id: int) -> None:
        out = df.toPandas()  # emitted rows and records: small, already aggregated
        with self.totals.lock:
            self.totals.batches += 1
        if out.empty:
            return
        made = batch_outputs(out, self.query, lambda: self.versions.of(batch_id))
        if not made.rows.empty:
            self.sink.write(self.name, batch_id, made.rows)
        if not made.records.empty:
            self.records.write(self.name, batch_id, made.records)
        with self.totals.lock:
            self.totals.rows_emitted += len(made.rows)
            self.totals.events_late += int((made.records["kind"] == "late").sum())
            self.totals.events_rejected += int((made.records["kind"] == "rejected").sum())
            self.totals.events_unwindowed += int((made.records["kind"] == "unwindowed").sum())
        if made.max_ts is not None:
            write_clock(self.clock, max_event_ts=made.max_ts)


def pinned_buckets(folder: Path, wanted: int) -> int:
    """The number of state buckets of the query kept in ``folder``: ``wanted`` the first time, then what it
    was then (``buckets.json``).  A group's state lives in the bucket its hash picks, so a later run with
    another count (other shuffle partitions) would look for it in another bucket and not find it."""
    path = folder / "buckets.json"
    if path.exists():
        return int(json.loads(path.read_text(encoding="utf-8"))["buckets"])
    write_marker(path, {"buckets": wanted})
    return wanted


def start_with_rocksdb(writer: DataStreamWriter, spark: SparkSession) -> StreamingQuery:
    """Start a query that uses ``transformWithState``, which needs RocksDB state: set for this query only, as
    a query keeps the settings of its start (and its checkpoint records them), and the session's own
    setting comes back at once."""
    before = spark.conf.get(STATE_STORE_PROVIDER, None)
    spark.conf.set(STATE_STORE_PROVIDER, ROCKSDB)
    try:
        return writer.start()
    finally:
        if before is None:
            spark.conf.unset(STATE_STORE_PROVIDER)
        else:
            spark.conf.set(STATE_STORE_PROVIDER, before)


def processor_config(app: AppSpec, query: ContinuousQuery) -> ProcessorConfig:
    """What the processor of ``query`` needs: its state layout, outputs and their pandas types."""
    types = output_types(app, query)
    return ProcessorConfig(query, layout_for(app, query), query.output_names,
                           {n: _PANDAS_DTYPES[t] for n, t in types.items()})


#: With ``query_events(..., filtered=False)``: whether the row passes WHERE (rejected rows always do).
PASSES = "tf_passes"


def query_events(app: AppSpec, query: ContinuousQuery, raw: DataFrame, buckets: int, *,
                 filtered: bool = True, carry: Sequence[str] = ()) -> DataFrame:
    """The processor's event rows of ``raw`` (the stream's rows as read): typed (rejected ones kept with their
    reason), in WHERE, with their bucket, time, group keys, aggregate arguments and the columns the EMIT
    policy needs.  ``filtered=False`` keeps every row, one per row of ``raw`` in its order, with ``PASSES``;
    ``carry``: columns of ``raw`` kept as they are (those typing keeps: ``ARRIVAL_PART``)."""
    stream = app.stream(query.stream)
    # Rejected when missing: the group keys and the column AFTER KEY EXPIRE measures spans by.  A null
    # elsewhere is SQL's NULL: aggregates skip it, WHERE does not pass it, json_encode writes null.
    required = {*query.keys, *([query.emit.identified_by] if query.emit.identified_by else [])}
    time_attr = query.window.time_attribute
    typed = type_events(raw, stream, required=required, time_attribute=time_attr, arrival_ms=0)
    passes = F.col(TYPED_REASON).isNotNull()
    if query.where is not None:
        passes = passes | F.coalesce(to_column(query.where, stream), F.lit(False))
    if filtered:
        typed = typed.where(passes) if query.where is not None else typed
    keys = [F.col(k) for k in query.keys]
    # A substream (PARTITION BY) is in one bucket whole, where its watermark is kept.
    spread = [F.col(k) for k in query.partitions] or keys
    bucket = F.pmod(F.xxhash64(*spread), F.lit(buckets)).cast("int") if spread else F.lit(0)
    return typed.select(
        bucket.alias(BUCKET),
        F.lit("e").alias(KIND),
        F.lit(None).cast("long").alias(NOW),
        F.lit(None).cast("long").alias(MAX_TS),
        (F.col(EVENT_TS) if time_attr else F.lit(None).cast("long")).alias(TS),
        F.col(TYPED_RAW).alias(RAW),
        F.col(TYPED_REASON).alias(REASON),
        *keys,
        *(to_column(i.arg, stream).alias(arg_column(i.alias)) for i in query.aggregates if i.arg is not None),
        *extra_columns(query, stream),
        *([] if filtered else [(passes if query.where is not None else F.lit(True)).alias(PASSES)]),
        *carry,
    )


@dataclass(frozen=True)
class BatchOutputs:
    """What one micro-batch of a query's processor gives the driver: the rows for the sink (in emission order,
    as the sink takes them), the late and rejected events for the record, and the greatest event time
    aggregated (None: none), which moves the clock's watermark."""

    rows: pd.DataFrame
    records: pd.DataFrame
    max_ts: int | None


def batch_outputs(out: pd.DataFrame, query: ContinuousQuery, version: Callable[[], int]) -> BatchOutputs:
    """The processor's output rows of one micro-batch, sorted and split; ``version()`` numbers the emit
    (``emit_version()``), asked only when the batch emits rows and the query outputs the number."""
    reports = out[out[OUT_KIND] == "max_ts"][TS].dropna()
    rows = emitted_rows(out)
    records = out[out[OUT_KIND].isin(["late", "rejected", "unwindowed"])]
    if not rows.empty:
        columns = [*query.output_names, *([DELTA] if query.emit.changelog else [])]
        rows = rows.sort_values(row_order(query), kind="stable")[columns].reset_index(drop=True)
        rows = rows.rename(columns={DELTA: CHANGELOG_DELTA})
        if version_outputs(query):
            rows = stamp_emit_version(rows, query, version())
    frame = pd.DataFrame({
        "kind": records[OUT_KIND].to_numpy(),
        "reason": records[REASON].to_numpy(),
        "event_time": records[TS].to_numpy(),
        "event": records[RAW].to_numpy(),
    })
    return BatchOutputs(rows, frame, int(reports.max()) if not reports.empty else None)


class EmitVersions:
    """The number of each emit of a query (``emit_version()``): 0 for the first micro-batch that emits rows,
    one more for each one after it.  Kept in a small file beside the query's state, with the batch id it
    was given to, so a micro-batch replayed after a failure gets its number again."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def of(self, batch_id: int) -> int:
        state = json.loads(self.path.read_text(encoding="utf-8")) if self.path.exists() else {}
        if state.get("batch") == batch_id:
            return int(state["version"])
        version = int(state.get("next", 0))
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"batch": batch_id, "version": version, "next": version + 1}), encoding="utf-8")
        tmp.replace(self.path)
        return version


def stamp_emit_version(rows: pd.DataFrame, query: ContinuousQuery, version: int) -> pd.DataFrame:
    """Every ``emit_version()`` output of one emit's rows (retractions of a changelog included) set to its
    number."""
    for name in version_outputs(query):
        rows[name] = pd.array([version] * len(rows), dtype="Int64")
    return rows


def emitted_rows(out: pd.DataFrame) -> pd.DataFrame:
    """The rows of one micro-batch's output that reach the sink: a periodic row of a group without news
    only when the batch also has one of a group with news (PERIODIC emits every open group at a period
    where anything arrived in the query; each bucket knows only its own groups)."""
    kinds = out[OUT_KIND]
    rows = out[kinds.isin(ROW_KINDS)]
    if not (kinds == PERIOD).any():
        rows = rows[rows[OUT_KIND] != PERIOD_IF]
    return rows


def row_order(query: ContinuousQuery) -> list[str]:
    """The order of the rows a micro-batch emits: by emission time; in a changelog, the retractions before
    the insertions (a consumer applying rows in order never holds a moved session's old and new row at
    once); then by window and key, except for a tilt frame.  A stable sort keeps the processor's order for the rest."""
    if step_class(query.window).in_emission_order:
        return [EMITTED_AT]  # a tilt frame's rows in the order its windows emitted them, as in Tremor
    keys = set(query.keys) | set(WINDOW_COLUMNS)
    order = [n for n, e in query.outputs if isinstance(e, Attr) and e.name in keys]
    return [EMITTED_AT, *([DELTA] if query.emit.changelog else []), *order]


