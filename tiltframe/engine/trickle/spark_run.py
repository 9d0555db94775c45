"""A trickle query run on Spark Structured Streaming over a folder of JSON-lines files.

The plan of a micro-batch:

1. Spark reads the new files' lines with each file's path and modification time.  An event's ingest time
   (``system::ingest_ns``, and the clock of interval windows without a script) is its file's
   modification time: the time the file arrived in the folder, the same when a batch is replayed after a
   crash.  Events arrive by file modification time, then path, then line.
2. On the executors (``mapInPandas``, ``_Staging``), each line is parsed as JSON (any value) and each
   select reading ``in`` evaluates its ``where``, its groups and, per group, what the windows need of the
   event (``select.Input``: the aggregates' arguments and the windows' script values).  A select without
   windows makes its outputs there.  A line that is not JSON, or an event an expression fails on, becomes
   an error row with its file, line and reason; a select takes an event for all its groups or for none.
3. Spark shuffles the rows by a hash of the group (``bucket``) to ``transformWithStateInPandas``
   (``_Windows``): per bucket, in arrival order, each group's chain of windows takes its inputs
   (``SelectOperator.take``) and emits.  Each group's windows are one entry of map state (pickled; the HDR
   histograms in their own encoding), read and written only when the group has input.
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
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import threading
import zlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle, TimerValues

from tiltframe.engine.continuous.query import pinned_buckets, start_with_rocksdb
from tiltframe.engine.filesystems import local_path, open_folder
from tiltframe.engine.hadoop_paths import Location
from tiltframe.engine.sinks import BatchFileSink, JsonTextSink
from tiltframe.engine.sources import NO_MAX_FILE_AGE, FileInput, json_glob
from tiltframe.engine.trickle.replay import QueryGraph
from tiltframe.engine.trickle.select import Input, SelectOperator, group_key
from tiltframe.errors import UsageError, unknown
from tiltframe.functions.trickle_values import TrickleRuntimeError
from tiltframe.lang.checks.trickle import nodes_in
from tiltframe.model.expressions import Call
from tiltframe.model.trickle import INPUT_PORT, TrickleQuery

#: The order of outputs: the event that made them (by arrival), the select (readers of ``in`` in Tremor's
#: order), the group (in the event's order), then the output's place among that group's.
ORDER = ["ingest_ns", "file", "block", "line", "reader", "fork", "n"]
#: Rows between the executors' two steps: an input of a group's windows (``in``), a whole event for a
#: sequential run (``ev``), a made output (``out``), an event that could not be taken (``err``) or a
#: partition's count of events read (``read``).
_STAGED = ("bucket int, kind string, reader int, grp string, vals string, args string, times string, "
           "stream string, text string, reason string, ingest_ns long, file string, block long, line long, "
           "fork int, n int")
_OUTPUT = ("kind string, stream string, text string, reason string, ingest_ns long, file string, block long, "
           "line long, reader int, fork int, n int")
_OUTPUT_COLUMNS = [c.split()[0] for c in _OUTPUT.split(", ")]
_STAGED_COLUMNS = [c.split()[0] for c in _STAGED.split(", ")]
#: Errors are recorded under this name in the run's record (``<data_dir>/trickle/<id>/rejected``).
ERROR_STREAM = "err"


def needs_every_group(query: TrickleQuery) -> bool:
    """Whether a select reading ``in`` counts its groups (``max_groups``, ``win::cardinality``): each event
    then needs the state of every group of the select, so the run is sequential (the module's docstring)."""
    for select in query.selects:
        if select.source != INPUT_PORT:
            continue  # run on the driver, over the outputs of the selects before it: every group at hand
        if any(query.window(name).max_groups is not None for name in select.windows):
            return True
        for clause in (select.target, select.where, select.having):
            if clause is not None and any(isinstance(n, Call) and n.name == "win::cardinality"
                                          for n in nodes_in(clause)):
                return True
    return False


def readers(query: TrickleQuery) -> list[SelectOperator]:
    """The selects reading ``in``, in the order an event reaches them (the one written last first, as in
    Tremor and ``replay.QueryGraph``)."""
    return [SelectOperator(s, query) for s in reversed(query.selects) if s.source == INPUT_PORT]


def _bucket(text: str, buckets: int) -> int:
    return zlib.crc32(text.encode("utf-8")) % buckets


def shown_path(uri: str) -> str:
    """A file's URI as Spark gives it (``file:/a/b%20c``) as its path, for messages; other URIs as they are."""
    parts = urlsplit(uri)
    return unquote(parts.path) if parts.scheme == "file" else uri


def _where(file: str, block: int, line: int) -> str:
    return f"{file}, line {line}" if block == 0 else f"{file}, line {line} after byte {block}"


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


@dataclass
class _Staging:
    """Step 2, on the executors: every line of a partition (in file order) as rows for the windows."""

    query: TrickleQuery
    buckets: int
    sequential: bool = False

    def __call__(self, frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        ops = readers(self.query)
        lines: dict[tuple[str, int], int] = {}  # a partition may hold several files, or part of one
        read = 0
        for frame in frames:
            rows: list[tuple[Any, ...]] = []
            for text, file, mtime_us, block in zip(frame["value"], frame["file"], frame["mtime_us"], frame["block"],
                                                   strict=True):
                number = lines[(file, block)] = lines.get((file, block), 0) + 1
                if number == 1 and block == 0:
                    text = text.removeprefix("\ufeff")
                if not text.strip():
                    continue  # a blank line is no event
                read += 1
                self._stage(rows, ops, text, shown_path(file), int(block), number, int(mtime_us) * 1000)
            yield pd.DataFrame(rows, columns=_STAGED_COLUMNS)
        yield pd.DataFrame([(0, "read", 0, None, None, None, None, None, None, None, 0, "", 0, 0, 0, read)],
                           columns=_STAGED_COLUMNS)

    def _stage(self, rows: list[tuple[Any, ...]], ops: list[SelectOperator], text: str, file: str, block: int,
               line: int, ingest_ns: int) -> None:
        spot = (ingest_ns, file, block, line)
        where = _where(file, block, line)
        spread = _bucket(f"{file}:{block}:{line}", self.buckets)
        try:
            event = json.loads(text)
        except json.JSONDecodeError as exc:
            reason = f"{where}: not JSON ({exc.msg} at column {exc.colno})"
            rows.append((spread, "err", 0, None, None, None, None, ERROR_STREAM, text, reason, *spot, 0, 0))
            return
        if self.sequential:  # every select of the event in step 3, in one bucket
            rows.append((0, "ev", 0, None, None, None, None, None, text, None, *spot, 0, 0))
            return
        for rank, op in enumerate(ops):
            try:
                if not op.windows:
                    made = [(op.select.into, out) for out in op.on_event(event, ingest_ns)]
                    staged = []
                else:
                    made = []
                    staged = [(values, op.input_of(event, values, ingest_ns))
                              for values in op.groups_of(event, ingest_ns)]
            except TrickleRuntimeError as exc:
                rows.append((spread, "err", rank, None, None, None, None, ERROR_STREAM, text, f"{where}: {exc}",
                             *spot, 0, 0))
                return  # the selects after it do not see the event (Tremor's order)
            for n, (stream, out) in enumerate(made):
                rows.append((spread, "out", rank, None, None, None, None, stream, _dumps(out), None, *spot, 0, n))
            for fork, (values, item) in enumerate(staged):
                grp = group_key(values)  # records with their keys sorted: one group however they are written
                rows.append((_bucket(f"{rank}:{grp}", self.buckets), "in", rank, grp, _dumps(values),
                             _dumps(item.args), _dumps(item.times), None, None, None, *spot, fork, 0))


class _Windows(StatefulProcessor):
    """Step 3, per bucket: each group's chain of windows, kept in map state between micro-batches."""

    def __init__(self, query: TrickleQuery) -> None:
        self.query = query

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.groups = handle.getMapState("groups", "reader int, grp string", "data binary")

    def handleInputRows(self, key: Any, rows: Iterator[pd.DataFrame], timerValues: TimerValues
                        ) -> Iterator[pd.DataFrame]:
        frames = [f for f in rows if len(f)]
        if not frames:
            return
        batch = pd.concat(frames, ignore_index=True).sort_values(ORDER, kind="stable")
        ops = readers(self.query)
        touched: set[tuple[int, str]] = set()
        loaded: dict[tuple[int, str], bytes] | None = None  # a sequential run's groups, all of them
        out: list[tuple[Any, ...]] = []
        for row in batch.itertuples(index=False):
            spot = (row.ingest_ns, row.file, row.block, row.line, row.reader, row.fork)
            if row.kind == "ev":
                if loaded is None:
                    loaded = self._load_all(ops)
                _every_select(ops, row, out)
                continue
            if row.kind != "in":
                out.append((row.kind, row.stream, row.text, row.reason, *spot, row.n))
                continue
            op, entry = ops[row.reader], (int(row.reader), row.grp)
            if entry not in touched:
                touched.add(entry)
                if self.groups.containsKey(entry):
                    op.groups[row.grp] = pickle.loads(self.groups.getValue(entry)[0])
            item = Input(int(row.ingest_ns), tuple(json.loads(row.args)), tuple(json.loads(row.times)))
            made: list[Any] = []
            try:
                op.take(json.loads(row.vals), item, made)
            except TrickleRuntimeError as exc:
                reason = f"{_where(row.file, row.block, row.line)}: {exc} (group {row.grp})"
                out.append(("err", ERROR_STREAM, None, reason, *spot, len(made)))
            out.extend(("out", op.select.into, _dumps(value), None, *spot, n) for n, value in enumerate(made))
        for reader, grp in touched:
            group = ops[reader].groups.get(grp)
            if group is None:
                self.groups.removeKey((reader, grp))
            else:
                self.groups.updateValue((reader, grp), (pickle.dumps(group),))
        if loaded is not None:
            self._store_all(ops, loaded)
        yield pd.DataFrame(out, columns=_OUTPUT_COLUMNS)

    def _load_all(self, ops: list[SelectOperator]) -> dict[tuple[int, str], bytes]:
        """Every group of every select into ``ops``; what each was, to write back only the changed ones."""
        loaded = {}
        for (reader, grp), (data,) in self.groups.iterator():
            ops[reader].groups[grp] = pickle.loads(data)
            loaded[(reader, grp)] = bytes(data)
        return loaded

    def _store_all(self, ops: list[SelectOperator], loaded: dict[tuple[int, str], bytes]) -> None:
        for reader, op in enumerate(ops):
            for grp, group in op.groups.items():
                data = pickle.dumps(group)
                if loaded.pop((reader, grp), None) != data:
                    self.groups.updateValue((reader, grp), (data,))
        for entry in loaded:  # groups deleted in the batch
            self.groups.removeKey(entry)

    def close(self) -> None:
        pass


def _every_select(ops: list[SelectOperator], row: Any, out: list[tuple[Any, ...]]) -> None:
    """A sequential run's event through every select reading ``in``, as ``replay.QueryGraph`` pushes it: an
    error stops the event there (the outputs already made stay) and comes out on ``err``."""
    spot = (row.ingest_ns, row.file, row.block, row.line, 0, 0)
    event = json.loads(row.text)
    made: list[tuple[str, Any]] = []
    try:
        for op in ops:
            made.extend((op.select.into, value) for value in op.on_event(event, int(row.ingest_ns)))
    except TrickleRuntimeError as exc:
        reason = f"{_where(row.file, row.block, row.line)}: {exc}"
        out.append(("err", ERROR_STREAM, row.text, reason, *spot, len(made)))
    out.extend(("out", stream, _dumps(value), None, *spot, n) for n, (stream, value) in enumerate(made))


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
        self._query: StreamingQuery | None = None

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
        ).mapInPandas(_Staging(self.query, self.buckets, needs_every_group(self.query)), _STAGED)
        return staged.groupBy("bucket").transformWithStateInPandas(
            statefulProcessor=_Windows(self.query), outputStructType=_OUTPUT, outputMode="Append", timeMode="None")

    def start(self) -> TrickleRun:
        writer = self._plan().writeStream.queryName(f"tiltframe-{self.dir.name}").option(
            "checkpointLocation", str(self.checkpoint)).foreachBatch(self._batch)
        writer = (writer.trigger(processingTime=f"{max(1, int(self.trigger_seconds * 1000))} milliseconds")
                  if self.follow else writer.trigger(availableNow=True))
        self._query = start_with_rocksdb(writer, self.spark)
        return self

    def _batch(self, df: DataFrame, batch_id: int) -> None:
        rows = df.toPandas()
        read = int(rows.loc[rows["kind"] == "read", "n"].sum())
        rows = rows[rows["kind"] != "read"].sort_values(ORDER, kind="stable")
        made: dict[str, list[str]] = {}
        graph = self.after.before(batch_id)
        for kind, stream, text, reason, t in zip(rows["kind"], rows["stream"], rows["text"], rows["reason"],
                                                 rows["ingest_ns"], strict=True):
            if kind == "err":
                event = None if text is None else _event_or_text(text)
                made.setdefault(ERROR_STREAM, []).append(_dumps({"error": reason, "event": event}))
            elif graph is None or stream not in graph.readers:
                made.setdefault(stream, []).append(text)
            else:  # through the selects after the first, here
                for out in graph.deliver(stream, json.loads(text), int(t)):
                    line = _dumps({"error": out.error, "event": out.event}) if out.error else _dumps(out.event)
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
