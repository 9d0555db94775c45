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

import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from tiltframe.aggregates.layout import AggregationLayout
from tiltframe.engine.continuous import ContinuousRun, ContinuousTotals
from tiltframe.engine.continuous.query import checkpoint_location, query_dir
from tiltframe.engine.inputs.file_batches import FileBatches
from tiltframe.engine.inputs.file_manifest import ChangedFile
from tiltframe.engine.inputs.hadoop_paths import Location
from tiltframe.engine.inputs.sources import FileInput, list_stream, read_stream
from tiltframe.engine.retrieval_joins import RequestTotals, RetrievalJoin
from tiltframe.engine.rollup.reports import PipelineTotals
from tiltframe.engine.run_options import RunOptions
from tiltframe.engine.run_plan import InputLike, plan_run
from tiltframe.engine.sinks import ConsoleSink, Sink
from tiltframe.engine.spark.failures import BatchFailed, describe_failure, said_where
from tiltframe.engine.stream_queries import StreamRows, StreamTotals, apply_stream_query, consumed_streams
from tiltframe.model.app import AppSpec
from tiltframe.store.open_stores import StoreRegistry

logger = logging.getLogger(__name__)


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


class Run:
    """A started app; :meth:`wait` blocks until done (availableNow) or :meth:`stop` is called."""

    def __init__(self, app: AppSpec, inputs: Mapping[str, InputLike], options: RunOptions, *,
                 spark: SparkSession | None = None, stores: StoreRegistry | None = None) -> None:
        """Plan the run (``engine.run_plan``: inputs checked, stores and checkpoints opened), then make the
        handlers of its continuous and stream queries; :meth:`start` starts every query."""
        self.plan = plan_run(app, inputs, options, spark=spark, stores=stores)
        self.app = app
        self.options = options
        self.spark = self.plan.spark
        self.stores = self.plan.stores
        self.readers = self.plan.readers
        self.pipelines = self.plan.pipelines
        self.result = RunResult(aggregations={name: p.totals for name, p in self.pipelines.items()})
        self._queries: list[StreamingQuery] = []
        self._file_batches: dict[str, FileBatches] = {}
        self._lock = threading.Lock()
        self.continuous = self._continuous_runs()
        self.stream_rows = self._stream_rows()

    @property
    def follow(self) -> bool:
        return self.options.follow

    @property
    def outputs(self) -> Mapping[str, Sink]:
        return self.options.outputs

    def _continuous_runs(self) -> list[ContinuousRun]:
        """A handle per continuous query whose stream has an input (its events read, not yet started)."""
        plan = self.plan
        handles: list[ContinuousRun] = []
        for i, cq in enumerate(self.app.continuous):
            source = plan.source(cq.stream)
            if source is None:
                logger.info("stream %s has no input; continuous query %s receives no events", cq.stream, i)
                continue
            name = self.app.continuous_name(i)
            checkpoint = checkpoint_location(query_dir(self.app, cq, plan.data_dir), plan.checkpoint_root)
            events = plan.events(source, cq.stream, cq.window.time_attribute, checkpoint, f"continuous query {name}")
            handle = ContinuousRun(self.app, cq, events, self.outputs.get(name) or ConsoleSink(),
                                   data_dir=plan.data_dir, spark=self.spark, name=name, follow=self.follow,
                                   trigger_ms=self.options.trigger_ms, checkpoint_root=plan.checkpoint_root)
            handles.append(handle)
            self.result.continuous[name] = handle.totals
        return handles

    def _stream_rows(self) -> list[tuple[StreamRows, FileInput | DataFrame]]:
        """The writer of each stream query's output that goes to a sink (not only read by other queries, or
        asked for), with its input."""
        writers: list[tuple[StreamRows, FileInput | DataFrame]] = []
        consumed = consumed_streams(self.app)
        for q in self.app.stream_queries:
            source = self.plan.source(q.target)
            if source is not None and (q.target not in consumed or q.target in self.outputs):
                handler = StreamRows(self.app, q.target, self.outputs.get(q.target) or ConsoleSink(),
                                     self.plan.data_dir)
                writers.append((handler, source))
                self.result.streams[q.target] = handler.totals
        return writers

    def _start_aggregations(self) -> None:
        for agg in self.app.aggregations:
            source = self.plan.source(agg.source)
            if source is None:
                continue
            pipeline = self.pipelines[agg.name]
            stream = self.app.stream(self.app.root_stream(agg.source))
            checkpoint = self.plan.checkpoint_dir(pipeline.layout) / "spark"
            name = f"tiltframe-{agg.name}"
            if not isinstance(source, DataFrame):
                df, fmt = list_stream(self.spark, source, stream, checkpoint)
                batches = FileBatches(self.spark, fmt, stream, checkpoint, pipeline.process,
                                      on_bad_file=self.options.on_bad_file)
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
            checkpoint = self.plan.checkpoint_root / f"stream-{handler.target}-{digest}"
            events = source if isinstance(source, DataFrame) else read_stream(
                self.spark, source, self.app.stream(self.app.root_stream(handler.target)), checkpoint,
                f"the stream query writing {handler.target}")
            self._start(events, f"tiltframe-stream-{handler.target}", checkpoint, handler)

    def _start(self, df: DataFrame, name: str, checkpoint: Location, fn: Callable[[DataFrame, int], None]) -> None:
        writer = df.writeStream.queryName(name).option("checkpointLocation", str(checkpoint))
        writer = writer.foreachBatch(said_where(name, fn))  # a failure names the query and the batch
        if self.follow:
            writer = writer.trigger(processingTime=f"{self.options.trigger_ms} milliseconds")
        else:
            writer = writer.trigger(availableNow=True)
        self._queries.append(writer.start())

    def _start_retrievals(self) -> None:
        for i, query in enumerate(self.app.queries):
            if query.request_stream is None:
                continue
            source = self.plan.source(query.request_stream)
            if source is None:
                logger.info("stream %s has no input; query %s receives no requests", query.request_stream, i)
                continue
            name = query.name or f"query{i}"
            out = query.insert_into or name
            layout = AggregationLayout.of(self.app, query.aggregation)
            pipeline = self.pipelines.get(layout.name)
            store = pipeline.store if pipeline is not None else self.readers.for_aggregation(layout.spec)
            checkpoint = self.plan.checkpoint_root / f"query-{name}-{layout.spec_hash}"
            df = self.plan.events(source, query.request_stream, None, checkpoint, f"query {name}")
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
