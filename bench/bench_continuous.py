"""Continuous-query benchmark: end-to-end latency and throughput of tiltframe's continuous queries under each
EMIT policy, next to the plain Spark Structured Streaming query that computes the same, measured in the same run.

Four cases over the trade stream of ``bench/workload.py`` (events in order), each ``count()`` and
``avg(price)`` per symbol:

- ``close``: ``FROM tumble(TradeStream, 1s) ... EMIT AFTER WINDOW CLOSE``; baseline ``withWatermark`` with a
  0 s delay, ``groupBy(window(1 s), symbol)``, append mode;
- ``update``: ``FROM tumble(TradeStream, 1s) ... EMIT ON UPDATE``; baseline the same in update mode;
- ``periodic``: ``FROM TradeStream GROUP BY symbol EMIT PERIODIC 1s``; baseline ``groupBy(symbol)`` in update
  mode with a 1 s processingTime trigger (``--periodic-trigger``), which emits every second;
- ``expire``: ``FROM TradeStream GROUP BY symbol EMIT AFTER KEY EXPIRE WITH MAXSPAN 2s AND TIMEOUT 2s`` over
  traces: each event's symbol becomes ``<symbol>#<second of its event time>``, so a key's events lie within
  one second (its span never reaches MAXSPAN) and the key is emitted once, 2 s of processing time after its
  last event.  Plain Spark has no key expiry; its nearest query is a session per key that closes 2 s of
  event time after the key's last event: ``withWatermark`` 0 s, ``groupBy(session_window(2 s), symbol)``,
  append mode.  Both emit each key once, with the same count and average.

tiltframe runs :class:`ContinuousRun` (``transformWithStateInPandas``) with a ``CallbackSink``; the baseline
writes through ``foreachBatch``.  Both read the same Parquet files from a watched folder, on one session
(the same shuffle partitions, and the RocksDB state store that tiltframe's session sets), one query at a
time, after an untimed warm-up of both sides.

**Latency** runs follow the folder (``ContinuousRun(follow=True)``: processing time is wall time) with the
same processingTime trigger on both sides (``--trigger``, except the baseline's PERIODIC trigger above).
A feeder thread moves pre-generated files into the empty folder at a steady rate (``--rate`` events/s,
one file every ``--file-interval-ms``, event time advancing as fast as wall time) and records each file's
arrival: the wall time right after its atomic rename.  Each side's callback records the wall time it
receives a batch of rows, in the driver, after the rows are collected (no sink work is timed).  Per row:

- AFTER WINDOW CLOSE: latency = emit time - arrival of the *closing event*, the first event in arrival
  order whose event time is at or past the window's end (then the watermark, the greatest event time minus
  a 0 s delay, reaches the end; both engines close a window when ``window_end <= watermark``);
- ON UPDATE, PERIODIC, AFTER KEY EXPIRE: latency = emit time - arrival of the *newest contributing event*: a row with
  ``count() = c`` covers its group's first ``c`` events in arrival order (both engines read whole files in
  order), so the c-th of them is the newest.

p50 / p95 / max are over the rows emitted (each row one sample), leaving out rows whose reference event
arrived in the first ``--warmup-seconds`` of the feed.  A last file holding one event of an extra symbol,
ten windows past the others, closes every window; its group is left out everywhere.  A run ends once each
side's latest row per group accounts for every event fed.  Before feeding, the bench checks that
tiltframe's processing time follows wall time (its clock ticker runs); a clock that stands still fails the run.

**Throughput** runs are bounded: ``--events`` events in files of ``--events-per-file`` (plus the closing
file) are in the folder before the query starts and both sides read ``--files-per-trigger`` files per
micro-batch, trigger ``--throughput-trigger``.  tiltframe's run ends with ``finish()`` (which moves the
clock once past the PERIODIC interval), the baseline's when ``processAllAvailable`` returns; events/s =
events / wall time from building the query to its stop.

A fast wrong run is no figure: every run, warm-ups included, is checked before anything is printed.  Each
side's final row per group (the only row under AFTER WINDOW CLOSE and AFTER KEY EXPIRE, the latest
otherwise) must hold the exact count and the average (to 1e-9) of the group's events, computed with pandas
from the files, and the counts must sum to the events fed; AFTER WINDOW CLOSE emits each window once and
AFTER KEY EXPIRE each key once; tiltframe records no late and no rejected event; and in the bounded runs,
whose micro-batches are the same on both sides, every policy but PERIODIC emits the same rows on both sides.

    python bench/bench_continuous.py                         # about 8 minutes on 2 cores
    python bench/bench_continuous.py --events 1000000 --rate 4000 --duration 30
    python bench/bench_continuous.py --cases close --parts latency --duration 8     # a quick look
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from bench_core import ROOT, generate

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

STREAM = "TradeStream"
SCHEMA = "symbol string, price double, quantity long, timestamp long"
APP = f"@eventTime('timestamp')\ndefine stream {STREAM} (symbol string, price double, quantity long, timestamp long);\n"
WINDOW_MS = 1000
#: The symbol of the closing file's one event (the generator's symbols are upper-case letters only).
END_SYMBOL = "~end"
#: The ``expire`` case's key: ``<symbol>#<second of event time>``, a trace lasting under one second.
TRACE_MS = 1000
SELECT = "count() AS n, avg(price) AS a"


@dataclass(frozen=True)
class Case:
    name: str
    label: str
    sql: str
    windowed: bool
    spark_mode: str  # Spark's output mode
    reference: str  # "closing" or "newest": which event a row's latency is measured from
    traces: bool = False  # keys are traces (TRACE_MS of one symbol), which expire
    once: bool = False  # each group is emitted once, with its final values

    @property
    def groups(self) -> list[str]:
        return ["window_start", "symbol"] if self.windowed else ["symbol"]


CASES = {
    "close": Case("close", "tumble 1s, AFTER WINDOW CLOSE",
                  f"SELECT window_start, symbol, {SELECT} FROM tumble({STREAM}, 1s) GROUP BY window_start, symbol "
                  "EMIT AFTER WINDOW CLOSE", True, "append", "closing", once=True),
    "update": Case("update", "tumble 1s, ON UPDATE",
                   f"SELECT window_start, symbol, {SELECT} FROM tumble({STREAM}, 1s) GROUP BY window_start, symbol "
                   "EMIT ON UPDATE", True, "update", "newest"),
    "periodic": Case("periodic", "global, PERIODIC 1s",
                     f"SELECT symbol, {SELECT} FROM {STREAM} GROUP BY symbol EMIT PERIODIC 1s",
                     False, "update", "newest"),
    "expire": Case("expire", "traces, AFTER KEY EXPIRE",
                   f"SELECT symbol, {SELECT} FROM {STREAM} GROUP BY symbol "
                   "EMIT AFTER KEY EXPIRE WITH MAXSPAN 2s AND TIMEOUT 2s", False, "append", "newest",
                   traces=True, once=True),
}
#: The ``expire`` baseline's session gap: the event-time twin of the query's TIMEOUT.
SESSION_GAP = "2 seconds"
SIDES = ("tiltframe", "spark")


# --- input -----------------------------------------------------------------------------------------------


@dataclass
class Workload:
    """Numbered Parquet files in arrival order (the last one the closing file) and their events."""

    files: list[Path]
    events: pd.DataFrame  # file (index into files), symbol, price, timestamp; the closing event left out
    meta: dict[str, Any]

    @property
    def n(self) -> int:
        return len(self.events)


def workload(cache: Path, name: str, events: int, keys: int, span_seconds: int, per_file: int) -> Workload:
    """The generator's files (cached) plus a closing file: one event of ``END_SYMBOL``, 10 windows past the
    last event, so that every window of the input closes."""
    folder = generate(f"continuous-{name}-k{keys}-s{span_seconds}-f{per_file}", events, cache,
                      ["--keys", str(keys), "--span-seconds", str(span_seconds), "--events-per-file", str(per_file)])
    meta = json.loads((folder / "meta.json").read_text())
    files = sorted((folder / "parquet").glob("part-*.parquet"))
    assert len(files) == meta["files"], (len(files), meta["files"])
    frames = [pq.read_table(f, columns=["symbol", "price", "timestamp"]).to_pandas().assign(file=i)
              for i, f in enumerate(files)]
    table = pd.concat(frames, ignore_index=True)
    assert len(table) == meta["events"] == events, (len(table), meta["events"], events)
    closing = folder / "closing" / "part-99999.parquet"
    if not closing.exists():
        closing.parent.mkdir(exist_ok=True)
        end = pa.table({"symbol": [END_SYMBOL], "price": [1.0], "quantity": [1],
                        "timestamp": [int(table["timestamp"].max()) + 10 * WINDOW_MS]})
        pq.write_table(end, closing)
    return Workload([*files, closing], table, meta)


def as_traces(wl: Workload) -> Workload:
    """The same events with each symbol turned into ``<symbol>#<second>``: keys that end (the closing file's
    symbol is kept, so it stays out of the results)."""
    folder = wl.files[0].parent.parent / "traces"
    files = [folder / f.name for f in wl.files]
    if not all(f.exists() for f in files):
        folder.mkdir(exist_ok=True)
        for source, target in zip(wl.files, files, strict=True):
            table = pq.read_table(source)
            if source != wl.files[-1]:
                table = table.set_column(0, "symbol", pa.array(_traced(table.column("symbol").to_pandas(),
                                                                      table.column("timestamp").to_pandas())))
            pq.write_table(table, target.with_suffix(".tmp"))
            target.with_suffix(".tmp").rename(target)
    for source, target in zip(wl.files, files, strict=True):
        os.utime(target, (source.stat().st_atime, source.stat().st_mtime))  # the file source's arrival order
    events = wl.events.assign(symbol=_traced(wl.events["symbol"], wl.events["timestamp"]))
    return Workload(files, events, wl.meta)


def _traced(symbol: pd.Series, timestamp: pd.Series) -> pd.Series:
    return symbol.astype(str) + "#" + (timestamp // TRACE_MS).astype(str)


def for_case(wl: Workload, case: Case) -> Workload:
    return as_traces(wl) if case.traces else wl


def expected(events: pd.DataFrame, case: Case) -> pd.DataFrame:
    """Exact count and average of each group, from the raw events."""
    frame = events.assign(window_start=events["timestamp"] - events["timestamp"] % WINDOW_MS)
    return (frame.groupby(case.groups).agg(n=("price", "size"), a=("price", "mean")).reset_index()
            .sort_values(case.groups, ignore_index=True))


# --- the rows each side emits ------------------------------------------------------------------------------


class Collector:
    """The rows a side emitted, each with the wall time (epoch s) its batch reached the callback."""

    def __init__(self, case: Case) -> None:
        self.columns = [*case.groups, "n", "a"]
        self.parts: list[pd.DataFrame] = []
        self.lock = threading.Lock()
        self.batches = 0

    def add(self, rows: pd.DataFrame) -> None:
        now = time.time()
        with self.lock:
            self.batches += 1
            if len(rows):
                self.parts.append(rows[self.columns].assign(emit=now))

    def frame(self) -> pd.DataFrame:
        with self.lock:
            parts = list(self.parts)
        if not parts:
            return pd.DataFrame({c: [] for c in [*self.columns, "emit"]})
        rows = pd.concat(parts, ignore_index=True)
        rows = rows[rows["symbol"] != END_SYMBOL].reset_index(drop=True)
        for col in ("window_start", "n"):
            if col in rows:
                rows[col] = rows[col].astype("int64")
        rows["a"] = rows["a"].astype("float64")
        return rows

    def accounted(self) -> int:
        """Events covered by the latest row of each group (every count only grows)."""
        rows = self.frame()
        return int(rows.groupby(self.columns[:-2])["n"].max().sum()) if len(rows) else 0


def final_rows(rows: pd.DataFrame, case: Case) -> pd.DataFrame:
    """The last row of each group (the one with the greatest count)."""
    last = rows.sort_values([*case.groups, "n"]).drop_duplicates(case.groups, keep="last")
    return last[[*case.groups, "n", "a"]].reset_index(drop=True)


def check_rows(label: str, rows: pd.DataFrame, truth: pd.DataFrame, case: Case) -> None:
    """Each group's final row holds the exact count and average of its events; nothing else is emitted."""
    final = final_rows(rows, case)
    assert len(final) == len(truth), (label, "groups", len(final), len(truth))
    got, want = int(final["n"].sum()), int(truth["n"].sum())
    assert got == want, (label, "events counted", got, want)
    for col in case.groups:
        assert (final[col].to_numpy() == truth[col].to_numpy()).all(), (label, col)
    assert (final["n"].to_numpy() == truth["n"].to_numpy()).all(), (label, "counts differ")
    np.testing.assert_allclose(final["a"].to_numpy(float), truth["a"].to_numpy(float), rtol=1e-9, err_msg=label)
    if case.once:
        assert len(rows) == len(truth), (label, "a group emitted more than once", len(rows), len(truth))


# --- the two sides ---------------------------------------------------------------------------------------


class TiltframeSide:
    """A case's continuous query on tiltframe, rows handed over by a ``CallbackSink``."""

    def __init__(self, spark: SparkSession, case: Case, folder: Path, work: Path, *, follow: bool, trigger: str,
                 files_per_trigger: int | None) -> None:
        import tiltframe as tf
        from tiltframe.engine.continuous import ContinuousRun
        from tiltframe.engine.inputs.sources import FileInput, read_stream
        from tiltframe.engine.sinks import CallbackSink

        app = tf.load_app(f"{APP}@info(name='{case.name}')\n{case.sql};\n")
        events = read_stream(spark, FileInput(str(folder), "parquet", files_per_trigger), app.stream(STREAM))
        self.rows = Collector(case)
        self.run = ContinuousRun(app, app.continuous_query(case.name), events,
                                 CallbackSink(lambda _stream, rows: self.rows.add(rows)), data_dir=work, spark=spark,
                                 name=case.name, follow=follow,
                                 trigger_ms=round(_seconds(trigger) * 1000))

    def start(self) -> None:
        self.run.start()

    def ready(self) -> bool:
        return self.run.totals.batches > 0  # the first tick of the clock went through the processor

    def check_clock(self, trigger: str) -> None:
        """In a follow run processing time follows wall time: the clock must move within two triggers."""
        from tiltframe.engine.continuous.clock import read_clock

        first = read_clock(self.run.clock)["now"]
        time.sleep(max(0.3, 2 * _seconds(trigger)))
        assert read_clock(self.run.clock)["now"] != first, "tiltframe's processing time stands still"

    def finish(self) -> None:
        self.run.finish()

    def check(self) -> None:
        self.run.check()

    def stop(self) -> None:
        self.run.stop()

    @property
    def batches(self) -> int:
        return self.run.totals.batches  # micro-batches through foreachBatch, with or without rows

    def verify(self, label: str) -> None:
        totals = self.run.totals
        assert totals.events_late == 0 == totals.events_rejected, (label, totals)


def _seconds(interval: str) -> float:
    number, unit = interval.split()
    return float(number) * {"millisecond": 0.001, "second": 1.0, "minute": 60.0}[unit.rstrip("s")]


class SparkSide:
    """The plain Structured Streaming query of a case, rows handed over by ``foreachBatch``."""

    def __init__(self, spark: SparkSession, case: Case, folder: Path, work: Path, *, trigger: str,
                 files_per_trigger: int | None) -> None:
        self.case, self.work, self.trigger = case, work, trigger
        self.rows = Collector(case)
        self.plan = spark_plan(spark, case, folder, files_per_trigger)
        self.query: StreamingQuery | None = None

    def _batch(self, df: DataFrame, _batch_id: int) -> None:
        self.rows.add(df.toPandas())

    def start(self) -> None:
        self.query = (self.plan.writeStream.outputMode(self.case.spark_mode).foreachBatch(self._batch)
                      .option("checkpointLocation", str(self.work / "checkpoint"))
                      .trigger(processingTime=self.trigger).start())

    def ready(self) -> bool:
        return self.query is not None and self.query.isActive

    def finish(self) -> None:
        assert self.query is not None
        self.query.processAllAvailable()
        self.check()
        self.stop()

    def check(self) -> None:
        if self.query is not None and self.query.exception() is not None:
            raise self.query.exception()  # type: ignore[misc]

    def stop(self) -> None:
        if self.query is not None and self.query.isActive:
            self.query.stop()

    @property
    def batches(self) -> int:
        return self.rows.batches  # micro-batches through foreachBatch, with or without rows

    def verify(self, label: str) -> None:
        pass


def spark_plan(spark: SparkSession, case: Case, folder: Path, files_per_trigger: int | None) -> DataFrame:
    from pyspark.sql import functions as F

    reader = spark.readStream.schema(SCHEMA)
    if files_per_trigger:
        reader = reader.option("maxFilesPerTrigger", files_per_trigger)
    events = reader.parquet(str(folder)).withColumn("et", F.timestamp_millis("timestamp"))
    aggregates = [F.count(F.lit(1)).alias("n"), F.avg("price").alias("a")]
    if case.traces:
        sessions = events.withWatermark("et", "0 seconds").groupBy(F.session_window("et", SESSION_GAP), "symbol")
        return sessions.agg(*aggregates).select("symbol", "n", "a")
    if not case.windowed:
        return events.groupBy("symbol").agg(*aggregates)
    windows = events.withWatermark("et", "0 seconds").groupBy(F.window("et", f"{WINDOW_MS} milliseconds"), "symbol")
    return windows.agg(*aggregates).select(F.unix_millis("window.start").alias("window_start"), "symbol", "n", "a")


def make_side(side: str, spark: SparkSession, case: Case, folder: Path, work: Path, *, follow: bool, trigger: str,
              spark_trigger: str, files_per_trigger: int | None) -> TiltframeSide | SparkSide:
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    if side == "tiltframe":
        return TiltframeSide(spark, case, folder, work, follow=follow, trigger=trigger,
                             files_per_trigger=files_per_trigger)
    return SparkSide(spark, case, folder, work, trigger=spark_trigger, files_per_trigger=files_per_trigger)


# --- throughput: a bounded run ---------------------------------------------------------------------------


@dataclass
class Bounded:
    seconds: float
    rows: pd.DataFrame
    batches: int


def bounded(side: str, spark: SparkSession, case: Case, wl: Workload, work: Path, *, trigger: str,
            files_per_trigger: int) -> Bounded:
    """Every file in the folder before the start; wall time from building the query to its stop."""
    folder = work / "input"
    shutil.rmtree(work, ignore_errors=True)
    folder.mkdir(parents=True)
    for f in wl.files:
        shutil.copy2(f, folder / f.name)  # the generator's modification times: increasing, in file order
    t0 = time.perf_counter()
    runner = make_side(side, spark, case, folder, work / "run", follow=False, trigger=trigger, spark_trigger=trigger,
                       files_per_trigger=files_per_trigger)
    runner.start()
    runner.finish()
    seconds = time.perf_counter() - t0
    runner.verify(f"{case.name}/{side}/bounded")
    return Bounded(seconds, runner.rows.frame(), runner.batches)


# --- latency: a follow run fed at a steady rate ------------------------------------------------------------


class Feeder(threading.Thread):
    """Moves the staged files into the watched folder, one every ``interval`` seconds, and records when each
    arrived (wall time after the rename)."""

    def __init__(self, staged: list[Path], folder: Path, interval: float) -> None:
        super().__init__(name="feeder", daemon=True)
        self.staged, self.folder, self.interval = staged, folder, interval
        self.arrivals = np.full(len(staged), np.nan)
        self.started = 0.0
        self.stop_event = threading.Event()

    def run(self) -> None:
        start = time.monotonic()
        self.started = time.time()
        for i, path in enumerate(self.staged):
            if self.stop_event.wait(max(0.0, start + i * self.interval - time.monotonic())):
                return
            now = time.time()
            os.utime(path, (now, now))  # the file source orders files by modification time
            os.replace(path, self.folder / path.name)
            self.arrivals[i] = time.time()


@dataclass
class Followed:
    rows: pd.DataFrame
    arrivals: np.ndarray
    started: float
    batches: int


def follow(side: str, spark: SparkSession, case: Case, wl: Workload, work: Path, *, trigger: str,
           spark_trigger: str, interval: float, drain_timeout: float) -> Followed:
    folder, staging = work / "input", work / "staging"
    shutil.rmtree(work, ignore_errors=True)
    folder.mkdir(parents=True)
    staging.mkdir()
    staged = [Path(shutil.copy2(f, staging / f.name)) for f in wl.files]
    runner = make_side(side, spark, case, folder, work / "run", follow=True, trigger=trigger,
                       spark_trigger=spark_trigger, files_per_trigger=None)
    runner.start()
    feeder = Feeder(staged, folder, interval)
    try:
        deadline = time.monotonic() + 120
        while not runner.ready():
            runner.check()
            assert time.monotonic() < deadline, f"{case.name}/{side}: the query did not start"
            time.sleep(0.05)
        if isinstance(runner, TiltframeSide):
            runner.check_clock(trigger)
        time.sleep(1.0)  # let the query settle into its triggers
        feeder.start()
        feeder.join()
        deadline = time.monotonic() + drain_timeout
        while runner.rows.accounted() < wl.n:
            runner.check()
            if time.monotonic() > deadline:
                msg = (f"{case.name}/{side}: after {drain_timeout:.0f} s rows account for {runner.rows.accounted():,}"
                       f" of {wl.n:,} events")
                raise AssertionError(msg)
            time.sleep(0.1)
    finally:
        feeder.stop_event.set()
        runner.stop()
    runner.verify(f"{case.name}/{side}/follow")
    assert not np.isnan(feeder.arrivals).any()
    return Followed(runner.rows.frame(), feeder.arrivals, feeder.started, runner.batches)


def reference_files(rows: pd.DataFrame, events: pd.DataFrame, case: Case, n_files: int) -> np.ndarray:
    """For each emitted row, the file (index) of the event its latency is measured from."""
    if case.reference == "closing":
        last_ts = events.groupby("file")["timestamp"].max().reindex(range(n_files - 1)).to_numpy(np.int64)
        # the closing file (not among the events) is past every window
        running = np.maximum.accumulate(np.append(last_ts, np.iinfo(np.int64).max))
        # the first file holding an event at or past the window's end
        return np.searchsorted(running, rows["window_start"].to_numpy(np.int64) + WINDOW_MS, side="left")
    frame = events.assign(window_start=events["timestamp"] - events["timestamp"] % WINDOW_MS)
    per_file = frame.groupby([*case.groups, "file"]).size().rename("k").reset_index()
    per_file["cum"] = per_file.groupby(case.groups)["k"].cumsum()
    wanted = rows[[*case.groups, "n"]].reset_index(drop=True).assign(row=lambda r: np.arange(len(r)))
    joined = wanted.merge(per_file, on=case.groups, how="left")
    # the file of the c-th event of the group, c the row's count: the first file where the running count reaches c
    files = joined[joined["cum"] >= joined["n"]].groupby("row")["file"].min()
    assert len(files) == len(rows), (case.name, "rows whose count exceeds their group's events")
    return files.sort_index().to_numpy()


def latencies(run: Followed, wl: Workload, case: Case, warmup: float) -> np.ndarray:
    files = reference_files(run.rows, wl.events, case, len(wl.files))
    arrived = run.arrivals[files]
    keep = arrived >= run.started + warmup
    lat = run.rows["emit"].to_numpy() - arrived
    assert (lat > 0).all(), (case.name, "a row emitted before its event arrived", lat.min())
    return lat[keep]


# --- report ----------------------------------------------------------------------------------------------


def stats(lat: np.ndarray) -> dict[str, float]:
    if not len(lat):
        return {"rows": 0, "p50": float("nan"), "p95": float("nan"), "max": float("nan")}
    return {"rows": len(lat), "p50": float(np.percentile(lat, 50)), "p95": float(np.percentile(lat, 95)),
            "max": float(lat.max())}


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}" if b and not (np.isnan(a) or np.isnan(b)) else "-"


def report(args: argparse.Namespace, lat_wl: Workload | None, tput_wl: Workload | None,
           results: dict[str, dict[str, dict[str, Any]]]) -> None:
    """The figures of both sides, and the ratios tiltframe / plain Spark of this run."""
    print(f"\nlocal Spark on {os.cpu_count()} cores (load average {os.getloadavg()[0]:.1f}); tiltframe = "
          "ContinuousRun (transformWithStateInPandas), Spark = plain Structured Streaming; RocksDB state store")
    if lat_wl is not None:
        print(f"latency: {args.rate:,} events/s over {args.keys} symbols for {args.duration} s ({lat_wl.n:,} events, "
              f"one file every {args.file_interval_ms} ms); trigger {args.trigger} on both sides (Spark's PERIODIC "
              f"baseline: {args.periodic_trigger}); rows whose reference event arrived in the first "
              f"{args.warmup_seconds:g} s left out")
    if tput_wl is not None:
        print(f"throughput: {tput_wl.n:,} events over {args.keys} symbols and {args.span_seconds} s of event time, "
              f"{len(tput_wl.files) - 1} files of {args.events_per_file:,} + the closing file, "
              f"{args.files_per_trigger} per micro-batch, trigger {args.throughput_trigger}; wall time from "
              "building the query to its stop")
    print("totals checked: each side's final row of every group holds the exact count and avg of its events, "
          "the counts summing to the events fed" + ("; the bounded runs of both sides emit the same rows"
                                                    if tput_wl is not None else ""))
    print("latency: emit time - arrival of the closing event (AFTER WINDOW CLOSE) or of the newest contributing "
          "event (ON UPDATE, PERIODIC, AFTER KEY EXPIRE: the trace's last); rows = rows measured, batches = "
          "micro-batches run")
    head = f"  {'query':30} {'side':10} {'rows':>6} {'batches':>7} {'p50 s':>7} {'p95 s':>7} {'max s':>7} |"
    print(f"\n{'':{len(head) - 36}}{'latency (follow run)':^36}| throughput (bounded run)")
    print(f"{head} {'wall s':>7} {'events/s':>9} {'batches':>7}")
    blank = f"{'':6} {'':7} {'':7} {'':7} {'':7}"
    for name, by_side in results.items():
        label = CASES[name].label
        for side in SIDES:
            lat, tp = by_side[side].get("latency"), by_side[side].get("throughput")
            cells = (f"{lat['rows']:6,} {lat['batches']:7} {lat['p50']:7.2f} {lat['p95']:7.2f} {lat['max']:7.2f}"
                     if lat else blank)
            tcells = f" {tp['seconds']:7.1f} {tp['events_per_s']:9,.0f} {tp['batches']:7}" if tp else ""
            print(f"  {label:30} {side:10} {cells} |{tcells}")
            label = ""
        t, s = by_side["tiltframe"], by_side["spark"]
        cells = (f"{'':6} {'':7} " + " ".join(f"{ratio(t['latency'][k], s['latency'][k]):>7}"
                                             for k in ("p50", "p95", "max"))) if "latency" in t else blank
        tcell = (f" {ratio(t['throughput']['seconds'], s['throughput']['seconds']):>7} "
                 f"{ratio(t['throughput']['events_per_s'], s['throughput']['events_per_s']):>9}"
                 if "throughput" in t else "")
        print(f"  {'':30} {'tilt/Spark':10} {cells} |{tcell}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    parser.add_argument("--parts", nargs="+", default=["latency", "throughput"], choices=["latency", "throughput"])
    parser.add_argument("--keys", type=int, default=100, help="symbols (groups per window)")
    parser.add_argument("--rate", type=int, default=1000, help="latency: events per second fed")
    parser.add_argument("--duration", type=int, default=12, help="latency: seconds of feed per run")
    parser.add_argument("--file-interval-ms", type=int, default=250, help="latency: one file every so many ms")
    parser.add_argument("--warmup-seconds", type=float, default=3.0,
                        help="latency: rows whose reference event arrived this early in the feed are left out")
    parser.add_argument("--trigger", default="500 milliseconds", help="latency: processingTime trigger of both sides")
    parser.add_argument("--periodic-trigger", default="1 second",
                        help="latency: trigger of Spark's PERIODIC baseline (its emit interval)")
    parser.add_argument("--drain-timeout", type=float, default=90.0,
                        help="latency: seconds to wait after the last file for the rows of every event")
    parser.add_argument("--events", type=int, default=200_000, help="throughput: events of the bounded run")
    parser.add_argument("--events-per-file", type=int, default=20_000)
    parser.add_argument("--files-per-trigger", type=int, default=1)
    parser.add_argument("--span-seconds", type=int, default=100, help="throughput: event-time span of the events")
    parser.add_argument("--throughput-trigger", default="0 seconds", help="throughput: trigger of both sides")
    parser.add_argument("--cache", type=Path, default=ROOT / ".bench-data")
    parser.add_argument("--json", action="store_true", help="also print the figures as one JSON line")
    args = parser.parse_args()
    per_file = args.rate * args.file_interval_ms // 1000
    if per_file * 1000 != args.rate * args.file_interval_ms or per_file <= 0:
        parser.error("--rate x --file-interval-ms must be a whole number of events per file (x 1000)")
    if (args.duration * 1000) % args.file_interval_ms:
        parser.error("--duration must be a whole number of --file-interval-ms")

    from tiltframe.engine.spark.session import get_session

    spark = get_session(app_name="bench_continuous")
    work = args.cache / "continuous-run"
    cases = [CASES[c] for c in args.cases]

    lat_wl = tput_wl = None
    if "latency" in args.parts:
        lat_wl = workload(args.cache, "latency", args.rate * args.duration, args.keys, args.duration, per_file)
    if "throughput" in args.parts:
        tput_wl = workload(args.cache, "bounded", args.events, args.keys, args.span_seconds, args.events_per_file)

    # The first queries of a process pay for JIT, code generation and starting Python workers: a small bounded
    # run of the first case on both sides, untimed.
    warm = workload(args.cache, "warmup", 4000, args.keys, 4, 2000)
    t0 = time.perf_counter()
    for case in cases[:1]:
        case_warm = for_case(warm, case)
        for side in SIDES:
            warm_run = bounded(side, spark, case, case_warm, work / "warmup", trigger="0 seconds",
                               files_per_trigger=1)
            check_rows(f"{case.name}/{side}/warm-up", warm_run.rows, expected(case_warm.events, case), case)
            print(f"  warm-up {case.name} {side}: {warm_run.seconds:.1f} s", flush=True)
    print(f"warm-up: {time.perf_counter() - t0:.0f} s", flush=True)

    results: dict[str, dict[str, dict[str, Any]]] = {c.name: {s: {} for s in SIDES} for c in cases}
    for case in cases:
        if lat_wl is not None:
            case_wl = for_case(lat_wl, case)
            truth = expected(case_wl.events, case)
            for side in SIDES:
                spark_trigger = args.periodic_trigger if case.name == "periodic" else args.trigger
                run = follow(side, spark, case, case_wl, work / f"{case.name}-{side}-follow", trigger=args.trigger,
                             spark_trigger=spark_trigger, interval=args.file_interval_ms / 1000,
                             drain_timeout=args.drain_timeout)
                check_rows(f"{case.name}/{side}/follow", run.rows, truth, case)
                lat = latencies(run, case_wl, case, args.warmup_seconds)
                results[case.name][side]["latency"] = {**stats(lat), "batches": run.batches}
                print(f"{case.name:8} {side:9} latency: {len(run.rows):,} rows, {run.batches} batches, "
                      f"p50 {results[case.name][side]['latency']['p50']:.2f} s", flush=True)
        if tput_wl is not None:
            case_wl = for_case(tput_wl, case)
            truth = expected(case_wl.events, case)
            runs = {}
            for side in SIDES:
                runs[side] = bounded(side, spark, case, case_wl, work / f"{case.name}-{side}-bounded",
                                     trigger=args.throughput_trigger, files_per_trigger=args.files_per_trigger)
                check_rows(f"{case.name}/{side}/bounded", runs[side].rows, truth, case)
                results[case.name][side]["throughput"] = {
                    "seconds": runs[side].seconds, "events_per_s": tput_wl.n / runs[side].seconds,
                    "batches": runs[side].batches}
                print(f"{case.name:8} {side:9} throughput: {runs[side].seconds:.1f} s, {len(runs[side].rows):,} rows",
                      flush=True)
            if case.name != "periodic":  # same micro-batches: the same rows (PERIODIC emits on time, not batches)
                a, b = (r.rows.drop(columns="emit").sort_values([*case.groups, "n"], ignore_index=True)
                        for r in runs.values())
                assert len(a) == len(b), (case.name, "rows emitted", len(a), len(b))
                assert a[[*case.groups, "n"]].equals(b[[*case.groups, "n"]]), (case.name, "rows differ")
                np.testing.assert_allclose(a["a"], b["a"], rtol=1e-9, err_msg=case.name)
    shutil.rmtree(work, ignore_errors=True)
    report(args, lat_wl, tput_wl, results)
    if args.json:
        print(json.dumps({"cores": os.cpu_count(), "args": {k: str(v) for k, v in vars(args).items()},
                          "results": results}))


if __name__ == "__main__":
    main()
