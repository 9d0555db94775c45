"""Run an app on Spark Structured Streaming: one query per aggregation, one per retrieval join, one per
continuous query (``tiltframe.engine.continuous``).

With ``follow=False`` every query uses the availableNow trigger: it processes everything present and
stops, aggregations first, then retrieval joins (so their answers see all the data).  With
``follow=True`` all queries keep watching for new files until :meth:`Run.stop` (or Ctrl-C in the CLI).
"""

from __future__ import annotations

import functools
import hashlib
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from tiltframe.aggregates.layout import AggregationLayout
from tiltframe.engine.continuous import ContinuousRun, ContinuousTotals
from tiltframe.engine.continuous.query import checkpoint_location, query_dir
from tiltframe.engine.events.derived import derive
from tiltframe.engine.inputs.file_batches import BAD_FILE_POLICIES, FileBatches
from tiltframe.engine.inputs.file_manifest import ChangedFile
from tiltframe.engine.inputs.filesystems import check_checkpoint_root, checkpoint_root
from tiltframe.engine.inputs.hadoop_paths import Location
from tiltframe.engine.inputs.sources import FileInput, list_stream, read_stream
from tiltframe.engine.retrieval_joins import RequestTotals, RetrievalJoin
from tiltframe.engine.rollup.identity import open_pipeline
from tiltframe.engine.rollup.markers import checkpoint_dir
from tiltframe.engine.rollup.pipeline import AggregationPipeline
from tiltframe.engine.rollup.reports import BatchReport, PipelineTotals
from tiltframe.engine.rollup.shards import Deployment, claim_shard
from tiltframe.engine.sinks import ConsoleSink, Sink
from tiltframe.engine.spark.failures import BatchFailed, describe_failure, said_where
from tiltframe.engine.spark.session import get_session
from tiltframe.engine.stream_queries import StreamRows, StreamTotals, apply_stream_query, consumed_streams
from tiltframe.errors import UsageError, unknown
from tiltframe.lang.checks.cross_references import check_runnable
from tiltframe.model.app import AppSpec
from tiltframe.store.lifecycle.compaction import Compactor
from tiltframe.store.lifecycle.purge import Purger
from tiltframe.store.open_stores import StoreRegistry

logger = logging.getLogger(__name__)

InputLike = FileInput | str | Path | DataFrame


@dataclass
class RunResult:
    """Totals per aggregation and rows emitted per output stream."""

    aggregations: dict[str, PipelineTotals] = field(default_factory=dict)
    outputs: dict[str, int] = field(default_factory=dict)
    #: Per retrieval join: its requests answered and rejected (``engine.retrieval_joins``).
    requests: dict[str, RequestTotals] = field(default_factory=dict)
    continuous: dict[str, ContinuousTotals] = field(default_factory=dict)
    #: The output of each stream query whose rows went to a sink (``engine.stream_queries``).
    streams: dict[str, StreamTotals] = field(default_factory=dict)
    #: Input files that grew or changed after a batch read them, per aggregation (docs/bad-input.md).
    files_changed: dict[str, list[ChangedFile]] = field(default_factory=dict)

    @property
    def requests_rejected(self) -> int:
        """Requests of every retrieval join that could not be answered (recorded with their reasons)."""
        return sum(t.rejected for t in self.requests.values())


def _as_input(value: InputLike, max_files: int | None, max_bytes: int | None) -> FileInput | DataFrame:
    if isinstance(value, DataFrame | FileInput):
        return value
    return FileInput(str(value), max_files_per_trigger=max_files, max_bytes_per_trigger=max_bytes)


class Run:
    """A started app; :meth:`wait` blocks until done (availableNow) or :meth:`stop` is called."""

    def __init__(
        self,
        app: AppSpec,
        inputs: Mapping[str, InputLike],
        *,
        data_dir: str | Path,
        spark: SparkSession | None = None,
        follow: bool = False,
        outputs: Mapping[str, Sink] | None = None,
        on_batch: Callable[[BatchReport], None] | None = None,
        max_files_per_trigger: int | None = None,
        max_bytes_per_trigger: int | None = None,
        trigger_ms: int = 1000,
        stores: StoreRegistry | None = None,
        deployment: Deployment | None = None,
        on_bad_file: str = "skip",
        rebuild: bool = False,
        checkpoint_dir: str | Path | None = None,
    ) -> None:
        check_runnable(app)
        if on_bad_file not in BAD_FILE_POLICIES:
            msg = f"on_bad_file: {unknown('policy', on_bad_file, BAD_FILE_POLICIES)}"
            raise UsageError(msg)
        self.on_bad_file = on_bad_file
        inputs = {app.input_stream(name): source for name, source in inputs.items()}  # a table: its rows' stream
        strangers = [name for name in inputs if name not in {s.name for s in app.streams}]
        if strangers:
            names = ", ".join(s.name for s in app.streams)
            msg = f"--input names stream(s) {', '.join(strangers)} not defined in the app (streams: {names})"
            raise UsageError(msg)
        made = [(name, writer) for name in inputs if (writer := app.writer_of(name)) is not None]
        if made:
            name, writer = made[0]
            line = f" (line {writer.pos.line})" if writer.pos else ""
            msg = (f"--input {name}: stream {name} is written by a stream query{line}; give the input to stream "
                   f"{app.root_stream(name)}, whose events it is made from")
            raise UsageError(msg)
        self.app = app
        # Absolute with Python's working directory: Spark would resolve a relative one against the JVM's,
        # which differs once the process has changed directory (a notebook's %cd).
        self.data_dir = Path(data_dir).absolute()
        #: Where the aggregations' and retrieval joins' checkpoints live (``--checkpoint-dir``).
        self.checkpoint_root = checkpoint_root(checkpoint_dir, self.data_dir)
        self.spark = spark or get_session()
        check_checkpoint_root(self.checkpoint_root)
        self.follow = follow
        self.trigger_ms = trigger_ms
        self.outputs = dict(outputs or {})
        self.on_batch = on_batch
        self.stores = stores or StoreRegistry(self.data_dir)
        #: Aggregations without input are only read (seed 001's read-only use): never written or purged.
        self.readers = StoreRegistry(self.data_dir, read_only=True)
        self.inputs = {k: _as_input(v, max_files_per_trigger, max_bytes_per_trigger) for k, v in inputs.items()}
        self.result = RunResult()
        self._queries: list[StreamingQuery] = []
        self._file_batches: dict[str, FileBatches] = {}
        self._lock = threading.Lock()
        self.pipelines: dict[str, AggregationPipeline] = {}
        self.deployment = deployment or Deployment()
        written = [agg for agg in app.aggregations if self._source(agg.source) is not None]
        layouts = {agg.name: AggregationLayout.of(app, agg.name, partition_by_default=self.deployment.partition_by_id)
                   for agg in written}
        # A pre-aggregated table's rows name their worker; other partitioned aggregations, the deployment.
        shards = {agg.name: self.deployment.shard_for(agg) for agg in written
                  if layouts[agg.name].partitioned and agg.workers is None}
        for shard in set(shards.values()):
            claim_shard(self.data_dir, shard)
        for agg in app.aggregations:
            if agg.name not in layouts:
                logger.info("stream %s has no input; aggregation %s is only read", agg.source, agg.name)
                continue
            layout = layouts[agg.name]
            # The store must hold what the checkpoint wrote to it (rebuild: neither holds anything any more).
            store, pipeline_id = open_pipeline(self.stores.for_aggregation(agg), layout, self.checkpoint_dir(layout),
                                               rebuild=rebuild, shard_id=shards.get(agg.name))
            pipeline = AggregationPipeline(layout, store, pipeline_id, on_batch=on_batch,
                                           purger=Purger(layout, store), shard_id=shards.get(agg.name),
                                           compactor=Compactor(layout, store) if agg.workers else None,
                                           derive=self._deriver(agg.source, agg.time_attribute))
            self.pipelines[agg.name] = pipeline
            self.result.aggregations[agg.name] = pipeline.totals
        self.continuous: list[ContinuousRun] = []
        for i, cq in enumerate(app.continuous):
            source = self._source(cq.stream)
            if source is None:
                logger.info("stream %s has no input; continuous query %s receives no events", cq.stream, i)
                continue
            name = app.continuous_name(i)
            checkpoint = checkpoint_location(query_dir(app, cq, self.data_dir), self.checkpoint_root)
            events = self._events(source, cq.stream, cq.window.time_attribute, checkpoint, f"continuous query {name}")
            handle = ContinuousRun(app, cq, events, self.outputs.get(name) or ConsoleSink(), data_dir=self.data_dir,
                                   spark=self.spark, name=name, follow=follow, trigger_ms=self.trigger_ms,
                                   checkpoint_root=self.checkpoint_root)
            self.continuous.append(handle)
            self.result.continuous[name] = handle.totals

        self.stream_rows: list[tuple[StreamRows, FileInput | DataFrame]] = []
        consumed = consumed_streams(app)
        for q in app.stream_queries:
            source = self._source(q.target)
            if source is not None and (q.target not in consumed or q.target in self.outputs):
                handler = StreamRows(app, q.target, self.outputs.get(q.target) or ConsoleSink(), self.data_dir)
                self.stream_rows.append((handler, source))
                self.result.streams[q.target] = handler.totals

    def _source(self, stream: str) -> FileInput | DataFrame | None:
        """The input ``stream``'s events come from: its own, or its input stream's (stream queries)."""
        return self.inputs.get(self.app.root_stream(stream))

    def _deriver(self, stream: str, time_attribute: str | None) -> Callable[[DataFrame], DataFrame] | None:
        """For a stream that stream queries write: its rows made from its input stream's (None otherwise)."""
        if self.app.writer_of(stream) is None:
            return None
        return functools.partial(derive, app=self.app, stream=stream, time_attribute=time_attribute)

    def _events(self, source: FileInput | DataFrame, stream: str, time_attribute: str | None, checkpoint: Location,
                what: str) -> DataFrame:
        """The rows of ``stream`` as a (streaming) DataFrame: read from its input, derived if queries write it;
        ``checkpoint``: the query's that reads them (``what``), which must have read the same folder."""
        root = self.app.stream(self.app.root_stream(stream))
        events = source if isinstance(source, DataFrame) else read_stream(self.spark, source, root, checkpoint, what)
        deriver = self._deriver(stream, time_attribute)
        return deriver(events) if deriver is not None else events

    def checkpoint_dir(self, layout: AggregationLayout) -> Location:
        return checkpoint_dir(self.data_dir, layout, self.checkpoint_root)

    def _start_aggregations(self) -> None:
        for agg in self.app.aggregations:
            source = self._source(agg.source)
            if source is None:
                continue
            pipeline = self.pipelines[agg.name]
            stream = self.app.stream(self.app.root_stream(agg.source))
            checkpoint = self.checkpoint_dir(pipeline.layout) / "spark"
            name = f"tiltframe-{agg.name}"
            if not isinstance(source, DataFrame):
                df, fmt = list_stream(self.spark, source, stream, checkpoint)
                batches = FileBatches(self.spark, fmt, stream, checkpoint, pipeline.process,
                                      on_bad_file=self.on_bad_file)
                self._file_batches[agg.name] = batches
                self._start(df, name, checkpoint, batches)
            elif source.isStreaming:
                self._start(source, name, checkpoint, pipeline.foreach_batch)
            else:  # a bounded backfill runs through the same per-batch code, as one batch
                pipeline.process(source, 0)

    def _start_stream_rows(self) -> None:
        for handler, source in self.stream_rows:
            if isinstance(source, DataFrame) and not source.isStreaming:
                handler(source, 0)
                continue
            digest = hashlib.sha256(repr(self.app.chain_key(handler.target)).encode()).hexdigest()[:12]
            checkpoint = self.checkpoint_root / f"stream-{handler.target}-{digest}"
            events = source if isinstance(source, DataFrame) else read_stream(
                self.spark, source, self.app.stream(self.app.root_stream(handler.target)), checkpoint,
                f"the stream query writing {handler.target}")
            self._start(events, f"tiltframe-stream-{handler.target}", checkpoint, handler)

    def _start(self, df: DataFrame, name: str, checkpoint: Location, fn: Callable[[DataFrame, int], None]) -> None:
        writer = df.writeStream.queryName(name).option("checkpointLocation", str(checkpoint))
        writer = writer.foreachBatch(said_where(name, fn))  # a failure names the query and the batch
        if self.follow:
            writer = writer.trigger(processingTime=f"{self.trigger_ms} milliseconds")
        else:
            writer = writer.trigger(availableNow=True)
        self._queries.append(writer.start())

    def _start_retrievals(self) -> None:
        for i, query in enumerate(self.app.queries):
            if query.request_stream is None:
                continue
            source = self._source(query.request_stream)
            if source is None:
                logger.info("stream %s has no input; query %s receives no requests", query.request_stream, i)
                continue
            name = query.name or f"query{i}"
            out = query.insert_into or name
            layout = AggregationLayout.of(self.app, query.aggregation)
            pipeline = self.pipelines.get(layout.name)
            store = pipeline.store if pipeline is not None else self.readers.for_aggregation(layout.spec)
            checkpoint = self.checkpoint_root / f"query-{name}-{layout.spec_hash}"
            df = self._events(source, query.request_stream, None, checkpoint, f"query {name}")
            handler = RetrievalJoin(self.app, query, layout, store, out, emit=self.emit, checkpoint=checkpoint,
                                    name=name, recorder=functools.partial(self.stores.for_aggregation, layout.spec))
            self.result.requests[name] = handler.totals
            self._start(df, f"tiltframe-query-{name}", checkpoint, handler)

    def start(self) -> Run:
        self._start_aggregations()
        self._start_stream_rows()
        for handle in self.continuous:
            handle.start()
        if self.follow:
            self._start_retrievals()
        return self

    def wait(self, poll_seconds: float = 0.5) -> RunResult:
        """Block until every query is done; raises the first query failure."""
        self._await_all(poll_seconds)
        if not self.follow:
            for handle in self.continuous:
                handle.finish()
            self._start_retrievals()
            self._await_all(poll_seconds)
        for name, batches in self._file_batches.items():
            self.result.files_changed[name] = batches.manifest.warn_changed()
        return self.result

    def _await_all(self, poll_seconds: float) -> None:
        while True:
            active = [q for q in self._queries if q.isActive]
            for q in self._queries:
                exc = q.exception()
                if exc is not None:
                    self.stop()
                    # One line that says where and why, the whole of Spark's report chained to it.
                    raise BatchFailed(describe_failure(exc)) from exc
            try:
                for h in self.continuous:
                    h.check()
            except BaseException:
                self.stop()
                raise
            following = self.follow and any(h.is_active for h in self.continuous)
            if not active and not following:
                break
            if active:
                try:
                    active[0].awaitTermination(poll_seconds)
                except Exception as exc:  # the query failed while waited for: said as above
                    self.stop()
                    raise BatchFailed(describe_failure(exc)) from exc
            else:
                time.sleep(poll_seconds)

    def stop(self) -> None:
        for q in self._queries:
            if q.isActive:
                q.stop()
        for h in self.continuous:
            h.stop()

    def emit(self, stream: str, batch_id: int, rows: pd.DataFrame) -> None:
        """Rows of ``stream`` made on the driver (a retrieval join's answers): to the stream's sink unless
        only stream queries read it (and the caller did not ask for it), and through those queries."""
        readers = [q for q in self.app.stream_queries if q.source == stream]
        if stream in self.outputs or not readers:
            (self.outputs.get(stream) or ConsoleSink()).write(stream, batch_id, rows)
            with self._lock:
                self.result.outputs[stream] = self.result.outputs.get(stream, 0) + len(rows)
        for query in readers:
            self.emit(query.target, batch_id, apply_stream_query(query, rows))

    def close(self) -> None:
        """Close the stores (after :meth:`wait` or :meth:`stop`)."""
        self.stores.close()
        self.readers.close()
