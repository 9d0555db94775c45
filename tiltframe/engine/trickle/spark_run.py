"""A trickle query run on Spark Structured Streaming over a folder of JSON-lines files.

The plan of a micro-batch:

1. Spark reads the new files' lines with each file's path and modification time.  An event's ingest time
   (``system::ingest_ns``, and the clock of interval windows without a script) is its file's
   modification time: the time the file arrived in the folder, the same when a batch is replayed after a
   crash.  Events arrive by file modification time, then path, then line.
2. On the executors (``mapInPandas``, ``steps.Staging``), each line is parsed as JSON (any value) and each
   select reading ``in`` evaluates its ``where``, its groups and, per group, what the windows need of the
   event (``select.Input``: the aggregates' arguments and the windows' script values).  A select without
   windows makes its outputs there.  A line that is not JSON, or an event an expression fails on, becomes
   an error row with its file, line and reason; a select takes an event for all its groups or for none.
3. Spark shuffles the rows by a hash of the group (``bucket``) to ``transformWithStateInPandas``
   (``steps.Windows``): per bucket, in arrival order, each group's chain of windows takes its inputs
   (``SelectOperator.take``) and emits.  Each group's windows are one entry of map state (pickled; the HDR
   histograms in their own encoding), read and written only when the group has input or a tick is due.
4. ``foreachBatch`` on the driver: the batch's outputs (windowed, so few) sorted into emission order, passed
   through the selects that read another select's stream (``Downstream``), and written, one JSON-lines file
   per stream and batch id, replacing what an earlier attempt of the batch wrote; errors go to the run's
   record (and to ``err`` when it has an output).  Spark's checkpoint holds the files read and the windows'
   state, ``Downstream`` the later selects' state with the batch id: a run stopped at any point and started
   again gives each output once.

A select reading ``in`` that needs all its groups at once (``max_groups``, ``win::cardinality``) makes the run
*sequential* (``needs_every_group``): step 2 only parses each line, every event goes to one bucket, and step 3
runs the selects reading ``in`` on each event in arrival order, every group of theirs loaded, as
``replay.QueryGraph`` does (Tremor runs a select on one thread too).  The run then has one partition's
parallelism between its two steps.

Timer ticks (``steps.ticks_reach``: a select's first window is an interval window on ingest time) come from a
clock file (``engine.continuous.clock``) that a follow run moves to wall time every trigger interval; each
move is a tick for every bucket, in Spark's offset log like the files read.  A bounded run moves no clock:
as in Tremor's harness without ticks, a window still open at the end stays open.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from tiltframe.engine.continuous.clock import clock_stream, follow_wall_time, wall_ms, write_clock
from tiltframe.engine.continuous.query import pinned_buckets, start_with_rocksdb
from tiltframe.engine.inputs.filesystems import local_path, open_folder
from tiltframe.engine.inputs.hadoop_paths import Location
from tiltframe.engine.inputs.sources import NO_MAX_FILE_AGE, FileInput, json_glob
from tiltframe.engine.sinks import BatchFileSink, JsonTextSink
from tiltframe.engine.trickle.graph_replay import QueryGraph
from tiltframe.engine.trickle.steps import (
    ERROR_STREAM,
    ORDER,
    OUTPUT,
    STAGED,
    Staging,
    Windows,
    dumps,
    staged_ticks,
    ticks_reach,
)
from tiltframe.errors import UsageError, unknown
from tiltframe.model.trickle import INPUT_PORT, TrickleQuery


class Downstream:
    """The selects that read another select's stream, run on the driver over the outputs of a micro-batch in
    emission order (``replay.QueryGraph``).  Their state is kept in ``path`` with the batch it was made by and
    the state before it, so a micro-batch Spark replays after a crash starts from the same state again."""

    def __init__(self, query: TrickleQuery, path: Path) -> None:
        self.query, self.path = query, path
        self.runs = any(s.source != INPUT_PORT for s in query.selects)

    def before(self, batch_id: int) -> QueryGraph | None:
        """The graph in the state it had before ``batch_id`` (None: no select reads another's stream)."""
        if not self.runs:
            return None
        graph = QueryGraph(self.query)
        kept = pickle.loads(self.path.read_bytes()) if self.path.exists() else {"batch": None}
        # The batch again (Spark replays it after a crash), or the next one; anything else is a new checkpoint
        # (its files are all read again), which starts from nothing.
        which = {batch_id: "before", batch_id - 1: "after"}.get(kept["batch"])
        if which is not None:
            for op, held in zip(graph.operators, pickle.loads(kept[which]), strict=True):
                op.groups = held
        self._before = pickle.dumps([op.groups for op in graph.operators])
        return graph

    def done(self, batch_id: int, graph: QueryGraph | None) -> None:
        """Keep the state ``batch_id`` left, and the one before it (written whole, then renamed over the last)."""
        if graph is None:
            return
        after = pickle.dumps([op.groups for op in graph.operators])
        tmp = self.path.with_name(f".{self.path.name}.tmp")
        tmp.write_bytes(pickle.dumps({"batch": batch_id, "before": self._before, "after": after}))
        os.replace(tmp, self.path)


@dataclass
class TrickleTotals:
    """What a run did: events read, outputs per stream, errors (events not taken, failed emissions)."""

    events_read: int = 0
    outputs: dict[str, int] = field(default_factory=dict)
    errors: int = 0
    batches: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)


def run_id(query: TrickleQuery, source: str) -> str:
    """The stable name of a query's checkpoint: a digest of the query's text and its input folder."""
    return "trickle-" + hashlib.sha256(f"{query.text}\0{source}".encode()).hexdigest()[:12]


class TrickleRun:
    """A trickle query started on Spark over ``source``'s folder of JSON-lines files; each output stream's
    events go to its sink in ``sinks`` (JSON lines), or to ``on_output`` when it has none."""

    def __init__(
        self,
        query: TrickleQuery,
        source: FileInput,
        sinks: Mapping[str, BatchFileSink],
        *,
        data_dir: str | Path,
        spark: SparkSession,
        follow: bool = False,
        trigger_seconds: float = 1.0,
        checkpoint_root: Location | None = None,
        on_output: Callable[[str, list[str]], None] | None = None,
    ) -> None:
        self.query, self.source, self.spark = query, source, spark
        self.sinks = dict(sinks)
        self.follow, self.trigger_seconds, self.on_output = follow, trigger_seconds, on_output
        self.dir = Path(data_dir).absolute() / "trickle" / run_id(query, source.path)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.checkpoint = (checkpoint_root or Path(data_dir).absolute() / "checkpoints") / self.dir.name
        self.record = JsonTextSink(self.dir / "rejected")
        self.after = Downstream(query, self.dir / "downstream.pickle")
        self.totals = TrickleTotals()
        self.buckets = pinned_buckets(self.dir, int(spark.conf.get("spark.sql.shuffle.partitions") or "8"))
        self.ticking, self.clock = ticks_reach(query), self.dir / "clock.json"
        self._query: StreamingQuery | None = None
        self._ticker: threading.Thread | None = None
        self._stop = threading.Event()

    def _plan(self) -> DataFrame:
        reader = self.spark.readStream.format("text").option("maxFileAge", NO_MAX_FILE_AGE)
        if (bound := self.source.batch_bound()) is not None:
            reader = reader.option(*bound)
        lines = reader.option("pathGlobFilter", self.source.glob or json_glob()).load(self.source.path)
        staged = lines.select(
            "value",
            F.col("_metadata.file_path").alias("file"),
            F.unix_micros(F.col("_metadata.file_modification_time")).alias("mtime_us"),
            F.col("_metadata.file_block_start").alias("block"),
        ).mapInPandas(Staging(self.query, self.buckets), STAGED)
        if self.ticking:
            staged = staged.unionByName(staged_ticks(clock_stream(self.spark, self.clock, self.buckets)))
        return staged.groupBy("bucket").transformWithStateInPandas(
            statefulProcessor=Windows(self.query), outputStructType=OUTPUT, outputMode="Append", timeMode="None")

    def start(self) -> TrickleRun:
        writer = self._plan().writeStream.queryName(f"tiltframe-{self.dir.name}").option(
            "checkpointLocation", str(self.checkpoint)).foreachBatch(self._batch)
        writer = (writer.trigger(processingTime=f"{max(1, int(self.trigger_seconds * 1000))} milliseconds")
                  if self.follow else writer.trigger(availableNow=True))
        if self.ticking and self.follow:
            write_clock(self.clock, now=wall_ms())
        self._query = start_with_rocksdb(writer, self.spark)
        if self.ticking and self.follow:  # a tick every trigger interval
            self._ticker = follow_wall_time(self.clock, max(0.1, self.trigger_seconds), self._stop,
                                            f"clock-{self.dir.name}")
        return self

    def _batch(self, df: DataFrame, batch_id: int) -> None:
        rows = df.toPandas()
        read = int(rows.loc[rows["kind"] == "read", "n"].sum())
        rows = rows[rows["kind"] != "read"].sort_values(ORDER, kind="stable")
        made: dict[str, list[str]] = {}
        graph = self.after.before(batch_id)
        for kind, stream, text, reason, t in zip(rows["kind"], rows["stream"], rows["text"], rows["reason"],
                                                 rows["ingest_ns"], strict=True):
            if kind == "tick":  # the selects after the first see it here, after the first ones did
                for out in graph.tick_later_selects(int(t)) if graph is not None else ():
                    line = dumps({"error": out.error, "event": out.event}) if out.error else dumps(out.event)
                    made.setdefault(out.stream, []).append(line)
            elif kind == "err":
                event = None if text is None else _event_or_text(text)
                made.setdefault(ERROR_STREAM, []).append(dumps({"error": reason, "event": event}))
            elif graph is None or stream not in graph.readers:
                made.setdefault(stream, []).append(text)
            else:  # through the selects after the first, here
                for out in graph.deliver(stream, json.loads(text), int(t)):
                    line = dumps({"error": out.error, "event": out.event}) if out.error else dumps(out.event)
                    made.setdefault(out.stream, []).append(line)
        self.after.done(batch_id, graph)
        if made.get(ERROR_STREAM):
            self.record.write(ERROR_STREAM, batch_id, pd.DataFrame({"json": made[ERROR_STREAM]}))
        for stream, lines in made.items():
            sink = self.sinks.get(stream)
            if sink is not None:
                sink.write(stream, batch_id, pd.DataFrame({"json": lines}))
            elif self.on_output is not None and stream != ERROR_STREAM:
                self.on_output(stream, lines)
        with self.totals.lock:
            self.totals.batches += 1
            self.totals.events_read += read
            self.totals.errors += len(made.get(ERROR_STREAM, ()))
            for stream, lines in made.items():
                if stream != ERROR_STREAM:
                    self.totals.outputs[stream] = self.totals.outputs.get(stream, 0) + len(lines)

    def wait(self, timeout: float | None = None) -> TrickleTotals:
        """Block until a bounded run has read everything, a follow run is stopped, or ``timeout`` seconds
        pass; raise the run's failure; the totals so far."""
        assert self._query is not None
        self._query.awaitTermination(timeout)
        if self._query.exception() is not None:
            raise self._query.exception()  # type: ignore[misc]
        return self.totals

    @property
    def result(self) -> TrickleTotals:
        return self.totals

    def process(self) -> None:
        """Block until everything available is processed (a follow run goes on)."""
        assert self._query is not None
        self._query.processAllAvailable()

    @property
    def is_active(self) -> bool:
        return self._query is not None and self._query.isActive

    def stop(self) -> None:
        self._stop.set()
        if self._query is not None and self._query.isActive:
            self._query.stop()


def _event_or_text(text: str) -> Any:
    """The event of an error row as JSON when it parses, else its line as read."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def start_trickle_run(
    query: TrickleQuery,
    source: str | Path,
    *,
    data_dir: Path,
    spark: SparkSession,
    outputs: Mapping[str, str | Path] | None = None,
    follow: bool = False,
    max_files_per_trigger: int | None = None,
    max_bytes_per_trigger: int | None = None,
    checkpoint_root: Location | None = None,
    trigger_seconds: float = 1.0,
    on_output: Callable[[str, list[str]], None] | None = None,
) -> TrickleRun:
    """Check what the run is given (before Spark reads anything) and start it."""
    streams = sorted({s.into for s in query.selects} | {ERROR_STREAM})
    for stream in outputs or {}:
        if stream not in streams:
            raise UsageError(f"--output: {unknown('stream the query writes', stream, streams)}")
    folder = open_folder(spark, str(source), f"input of stream {INPUT_PORT}")
    file_input = FileInput(folder.path, "json", max_files_per_trigger, max_bytes_per_trigger=max_bytes_per_trigger)
    sinks = {}
    for stream, path in (outputs or {}).items():
        local = local_path(str(path))
        if local is None:
            raise UsageError(f"--output {stream}={path}: outputs are written to a folder on this machine")
        sinks[stream] = JsonTextSink(local)
    return TrickleRun(query, file_input, sinks, data_dir=data_dir, spark=spark, follow=follow,
                      trigger_seconds=trigger_seconds, checkpoint_root=checkpoint_root, on_output=on_output).start()
