"""Where one micro-batch's time goes: Spark's jobs and stages, and the driver's work between them.

For a reference workload (``bench/workload.py``) it runs tiltframe's pipeline over every file in one
micro-batch, as ``tiltframe run`` reads a backlog: once untimed (the process's first run pays JIT and code
generation), then once profiled, into the embedded SQLite store or a fresh database on a test server
(``--store``).  It prints

- Spark's side, from Spark's own event log of the profiled run: each job with its stages, tasks, wall
  time, the executors' run and CPU time (summed over tasks), garbage collection, and shuffle bytes
  written and read;
- the driver's side, from a cProfile of the batch on the driver: building the plan (Py4J calls), waiting
  for the job's first Arrow batch (the job runs), receiving the rest, splitting the levels, and the store
  write (rows put in the store's order, the merge statements, sketches, recorded events, the commit);

- Spark's planning of each batch's job, from its query execution's own phase timings (optimisation and
  physical planning; analysis happens as the plan is built, within "building the plan").

With ``--files-per-batch`` the input goes in micro-batches of that many files and every figure is given
per micro-batch as well: the fixed cost a small batch pays whatever its size (``--events-per-file`` makes
small files).

It checks the totals first (events read = events in the input; stored yearly sum of quantity = the
input's), so a wrong run prints no profile.  docs/performance.md quotes its output.

    python bench/profile_pipeline.py W1                     # 10M events, the embedded store
    python bench/profile_pipeline.py W2 --events 1000000
    python bench/profile_pipeline.py W2 --events 2000 --events-per-file 100 --files-per-batch 1  # 20 small batches
    eval "$(bash scripts/services.sh)"; python bench/profile_pipeline.py W1 --store postgresql
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import bench_core  # noqa: E402  (bench/ on the path above)

#: Driver-side parts: (label, module path suffix, function name); cumulative seconds of each.
DRIVER_PARTS = (
    ("the batch on the driver", "engine/rollup/pipeline.py", "process"),
    ("  building the plan: events typed", "engine/events/typed.py", "type_events"),
    ("  building the plan: the levels", "engine/rollup/partials.py", "__call__"),
    ("  Spark job to Arrow (toArrow)", "pyspark/sql/pandas/conversion.py", "_collect_as_arrow"),
    ("    waiting for its first batch", "pyarrow/ipc.py", "open_stream"),
    ("  levels split on the driver (Arrow)", "engine/rollup/pipeline.py", "<dictcomp>"),
    ("  store: the whole write", "store/writes/sql_writes.py", "write_batch"),
    ("    rows in the store's order (cast, sort)", "store/writes/upserts.py", "prepare_rows"),
    ("    merge statements", "store/writes/upserts.py", "upsert_rows"),
    ("      Python values (flatten)", "store/writes/upserts.py", "_flatten"),
    ("    sketch states merged", "store/writes/upserts.py", "merge_sketches"),
    ("    recorded events", "store/writes/recorded.py", "insert_recorded"),
    ("    commit", "sqlalchemy/engine/base.py", "_commit_impl"),
)


@contextmanager
def profiled_batches() -> Iterator[list[pstats.Stats]]:
    """Profile every ``AggregationPipeline.process`` call (on Spark's callback thread) while active."""
    from tiltframe.engine.rollup import pipeline

    original = pipeline.AggregationPipeline.process
    stats: list[pstats.Stats] = []

    def process(self: Any, *args: Any, **kwargs: Any) -> Any:
        profile = cProfile.Profile()
        profile.enable()
        try:
            return original(self, *args, **kwargs)
        finally:
            profile.disable()
            stats.append(pstats.Stats(profile))

    pipeline.AggregationPipeline.process = process  # type: ignore[method-assign]
    try:
        yield stats
    finally:
        pipeline.AggregationPipeline.process = original  # type: ignore[method-assign]


@contextmanager
def planning_phases() -> Iterator[list[dict[str, float]]]:
    """Seconds of Spark's optimisation and physical planning of every ``toArrow`` while active (its query
    execution's ``QueryPlanningTracker``)."""
    from pyspark.sql.classic.dataframe import DataFrame

    original = DataFrame.toArrow
    phases: list[dict[str, float]] = []

    def to_arrow(self: Any) -> Any:
        try:
            return original(self)
        finally:
            tracked = self._jdf.queryExecution().tracker().phases()
            phases.append({name: tracked.apply(name).durationMs() / 1000 for name in ("optimization", "planning")
                           if tracked.contains(name)})

    DataFrame.toArrow = to_arrow  # type: ignore[method-assign]
    try:
        yield phases
    finally:
        DataFrame.toArrow = original  # type: ignore[method-assign]


def cumulative(stats: pstats.Stats, path: str, name: str) -> float:
    """Cumulative seconds of the functions called ``name`` in a file ending in ``path`` (nested calls of
    the same function counted once)."""
    total = 0.0
    for (file, _, function), (_, _, _, cum, callers) in stats.stats.items():  # type: ignore[attr-defined]
        # Calls from a function of the same name (recursion) are inside the outer call already.
        nested = any(c[2] == name and c[0].endswith(path) for c in callers)
        if function == name and file.endswith(path) and not nested:
            total += cum
    return total


def read_events(folder: Path) -> list[dict[str, Any]]:
    """The events of Spark's event logs in ``folder`` (zstd-compressed logs through the ``zstd`` tool)."""
    out = []
    for log in sorted(folder.rglob("events_*")):
        if log.suffix == ".zstd":
            text = subprocess.run(["zstd", "-dc", str(log)], check=True, capture_output=True).stdout.decode()
        else:
            text = log.read_text()
        out.extend(json.loads(line) for line in text.splitlines() if line.strip())
    return out


def spark_jobs(events: list[dict[str, Any]], since_ms: int) -> list[dict[str, Any]]:
    """The jobs submitted at or after ``since_ms`` with their completed stages' metrics."""
    stages: dict[int, dict[str, Any]] = {}
    jobs: dict[int, dict[str, Any]] = {}
    for e in events:
        kind = e["Event"]
        if kind == "SparkListenerStageCompleted":
            info = e["Stage Info"]
            acc = {a["Name"]: a.get("Value") or 0 for a in info.get("Accumulables", [])}
            stages[info["Stage ID"]] = {
                "tasks": info["Number of Tasks"],
                "wall": (info["Completion Time"] - info["Submission Time"]) / 1000,
                "run": float(acc.get("internal.metrics.executorRunTime", 0)) / 1000,
                "cpu": float(acc.get("internal.metrics.executorCpuTime", 0)) / 1e9,
                "gc": float(acc.get("internal.metrics.jvmGCTime", 0)) / 1000,
                "shuffle_write_mb": float(acc.get("internal.metrics.shuffle.write.bytesWritten", 0)) / 1e6,
                "shuffle_read_mb": (float(acc.get("internal.metrics.shuffle.read.localBytesRead", 0))
                                    + float(acc.get("internal.metrics.shuffle.read.remoteBytesRead", 0))) / 1e6,
                "records_out": float(acc.get("internal.metrics.shuffle.write.recordsWritten", 0)),
            }
        elif kind == "SparkListenerJobStart" and e["Submission Time"] >= since_ms:
            jobs[e["Job ID"]] = {"start": e["Submission Time"], "stages": e["Stage IDs"]}
        elif kind == "SparkListenerJobEnd" and e["Job ID"] in jobs:
            jobs[e["Job ID"]]["seconds"] = (e["Completion Time"] - jobs[e["Job ID"]]["start"]) / 1000
    return [{"job": j, **v, "stages": [(s, stages[s]) for s in v["stages"] if s in stages]}
            for j, v in sorted(jobs.items())]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("workload", choices=sorted(bench_core.WORKLOADS))
    parser.add_argument("--events", type=int, default=10_000_000)
    parser.add_argument("--store", choices=bench_core.STORES, default="sqlite")
    parser.add_argument("--cache", type=Path, default=ROOT / ".bench-data")
    parser.add_argument("--files-per-batch", type=int, default=None,
                        help="micro-batches of this many files (default: every file in one)")
    parser.add_argument("--events-per-file", type=int, default=None,
                        help="the workload's files hold this many events (default: the workload's 100k)")
    args = parser.parse_args()
    url_env = bench_core.SERVER_URL_ENV.get(args.store)
    server = os.environ.get(url_env) if url_env else None
    if args.store != "sqlite" and not server:
        parser.error(f"--store {args.store} needs ${url_env} (eval \"$(bash scripts/services.sh)\")")

    from pyspark.sql import SparkSession

    from tests.servers import database_beside
    from tiltframe.engine.spark.session import tiltframe_defaults

    options = None
    if args.events_per_file:
        options = [*bench_core.WORKLOADS[args.workload], "--events-per-file", str(args.events_per_file)]
    cache = args.cache / f"per-file-{args.events_per_file}" if args.events_per_file else args.cache
    folder = bench_core.generate(args.workload, args.events, cache, options)
    parquet = folder / "parquet"
    totals = bench_core.input_totals(parquet)
    log_dir = Path(tempfile.mkdtemp(prefix="tiltframe-eventlog-"))
    builder = SparkSession.builder.master("local[*]").appName("tiltframe-profile")
    for key, value in tiltframe_defaults("local[*]").items():
        builder = builder.config(key, value)
    spark = (builder.config("spark.eventLog.enabled", "true").config("spark.eventLog.dir", str(log_dir))
             .config("spark.eventLog.compress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    data_dir = args.cache / f"profile-{args.workload}-{args.events}-{args.store}"
    try:
        def fresh() -> Any:  # each run into an empty store, as bench_core's
            return nullcontext() if args.store == "sqlite" else database_beside(server, "tiltframe_profile_")

        with fresh() as url:  # untimed: JIT and code generation
            bench_core.checked_pipeline(spark, parquet, args.files_per_batch, totals=totals, store=args.store,
                                        url=url, data_dir=data_dir)
        since = int(spark.sparkContext._jvm.java.lang.System.currentTimeMillis())  # type: ignore[union-attr]
        with fresh() as url, profiled_batches() as batches, planning_phases() as planned:
            run = bench_core.checked_pipeline(spark, parquet, args.files_per_batch, totals=totals,
                                              store=args.store, url=url, data_dir=data_dir)
        spark.stop()  # flushes the event log
        jobs = spark_jobs(read_events(log_dir), since)
    finally:
        shutil.rmtree(log_dir, ignore_errors=True)
        shutil.rmtree(data_dir, ignore_errors=True)

    n = len(batches)
    cut = "one micro-batch" if args.files_per_batch is None else f"{n} micro-batches of {args.files_per_batch} files"
    print(f"\n{args.workload}: {totals[0]:,} events in {cut}, {args.store} store; totals checked: events "
          f"read = events in the input, stored sum(quantity) = the input's")
    print(f"pipeline {run['seconds']:.2f} s in all: {run['spark_seconds']:.2f} s until the batch's rows were on the "
          f"driver, {run['store_seconds']:.2f} s in the store, {run['rows_written']:,} rows written; "
          f"machine: {os.cpu_count()} cores, local[*]")
    print("\nSpark (its event log; run and CPU are summed over the tasks of a stage):")
    print(f"  {'job':>4} {'stage':>5} {'tasks':>5} {'wall s':>7} {'run s':>7} {'cpu s':>7} {'gc s':>6} "
          f"{'shuffle write MB':>17} {'shuffle read MB':>16} {'rows written':>13}")
    for job in jobs if n == 1 else jobs[:8]:  # many batches: the first jobs, then the sums
        for stage, m in job["stages"]:
            print(f"  {job['job']:>4} {stage:>5} {m['tasks']:>5} {m['wall']:7.2f} {m['run']:7.2f} {m['cpu']:7.2f} "
                  f"{m['gc']:6.2f} {m['shuffle_write_mb']:17.1f} {m['shuffle_read_mb']:16.1f} "
                  f"{m['records_out']:13,.0f}")
    wall = sum(j.get("seconds", 0.0) for j in jobs)
    stages = sum(len(j["stages"]) for j in jobs)
    tasks = sum(m["tasks"] for j in jobs for _, m in j["stages"])
    print(f"  jobs: {len(jobs)}, {stages} stages, {tasks} tasks, {wall:.2f} s of wall time "
          f"({wall / max(n, 1):.3f} s a batch)")
    for phase in ("optimization", "planning"):
        seconds = sum(p.get(phase, 0.0) for p in planned)
        print(f"  Spark's {phase} of the batches' plans: {seconds:.2f} s ({seconds / max(n, 1):.3f} s a batch)")
    print(f"\nthe driver (cProfile of the batch; each part's time includes the parts below it; {n} batches):")
    print(f"  {'':<45} {'in all':>9} {'a batch':>9}")
    for label, path, name in DRIVER_PARTS:
        seconds = sum(cumulative(s, path, name) for s in batches)
        print(f"  {label:<45} {seconds:7.2f} s {seconds / max(n, 1):7.3f} s")


if __name__ == "__main__":
    main()
