"""The performance table in one run: every figure as a ratio or a time measured in this run, each benchmark
checking its totals before it prints one (``scripts/bench.sh`` sets up and calls this).

Rows, each against its target:

- W1 and W2 (``bench/workload.py``): tiltframe's streaming pipeline (embedded SQLite store, all files in one
  micro-batch) / the plain Spark six-level cascade, from ``bench/bench_core.py``;
- a real export's shape (``bench/exports.py``: CSV from pandas with ISO time text, twenty attributes, nulls,
  sketches, a zone): ISO text against epoch ms, and ``tiltframe run`` against the plain Spark job over the
  CSV and the Parquet files, each a new process (``bench/bench_exports.py``);
- the PostgreSQL and MariaDB stores / the SQLite store on W1 (when the test servers are up:
  ``$TILTFRAME_TEST_POSTGRES_URL`` / ``$TILTFRAME_TEST_MYSQL_URL``), from the same run;
- each continuous query's throughput and p50 latency / the same plain Spark streaming query
  (``bench/bench_continuous.py``);
- one key's per-day rows over a year of second data, in process (``bench/bench_serve.py``'s reader and
  ``tf.query``), and ``tiltframe query`` of the same rows as a new process;
- ``tiltframe run``'s fixed cost: a new process aggregating one small file, from start to exit;
- the driver's memory over a stream ten times as long as W2 (``bench/bench_memory.py``): its growth
  between the first tenth and the end.

    bash scripts/bench.sh                                  # the reference sizes: 10M events per workload
    bash scripts/bench.sh --events 1000000 --repeat 1      # a quicker look
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
PYTHON = sys.executable
TILTFRAME = [PYTHON, "-m", "tiltframe"]
SMALL_APP = """define stream S (symbol string, price double, quantity long, timestamp long);
define aggregation A from S select symbol, sum(quantity) as total group by symbol
aggregate by timestamp every sec ... year;
"""


def figures(cmd: list[str], log: Path) -> list[dict[str, Any]]:
    """Run a benchmark, its output shown and kept in ``log``; the JSON lines it printed.  A benchmark that
    fails (a wrong total included) stops everything: a table with a wrong figure is no table."""
    print(f"\n$ {' '.join(cmd)}", flush=True)
    lines = []
    with log.open("a") as out, subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                                 text=True) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            out.write(line)
            if line.startswith("{"):
                lines.append(json.loads(line))
            elif "WARN" not in line:
                print(f"  | {line}", end="", flush=True)
    if proc.returncode:
        sys.exit(f"{cmd[1]} failed (exit {proc.returncode}); its output is in {log}")
    return lines


def timed(cmd: list[str], runs: int, env: dict[str, str] | None = None) -> float:
    """The median wall time of ``runs`` runs of a command that must succeed."""
    seconds = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, env=env)
        seconds.append(time.perf_counter() - t0)
    return statistics.median(seconds)


class Table:
    """The rows printed at the end: what, the figure, the target and whether it is met."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, str, str, str]] = []

    def add(self, what: str, value: float | None, unit: str, target: float, met: Callable[[float, float], bool],
            sign: str) -> None:
        if value is None:
            self.rows.append((what, "not measured", f"{sign} {target:g}{unit}", "-"))
            return
        self.rows.append((what, f"{value:.2f}{unit}", f"{sign} {target:g}{unit}",
                          "PASS" if met(value, target) else "FAIL"))

    def print(self) -> None:
        width = max(len(r[0]) for r in self.rows)
        print(f"\n{'what':<{width}}  {'now':>14}  {'target':>10}")
        for what, now, target, verdict in self.rows:
            print(f"{what:<{width}}  {now:>14}  {target:>10}  {verdict}")


def at_least(value: float, target: float) -> bool:
    return value >= target


def at_most(value: float, target: float) -> bool:
    return value <= target


def core_rows(table: Table, args: argparse.Namespace, log: Path) -> None:
    stores = ["sqlite", *(s for s, env in (("postgresql", "TILTFRAME_TEST_POSTGRES_URL"),
                                           ("mysql", "TILTFRAME_TEST_MYSQL_URL")) if os.environ.get(env))]
    records = figures([PYTHON, str(BENCH / "bench_core.py"), "--workload", "W1", "W2", "--events", str(args.events),
                       "--files-per-batch", "0", "--repeat", str(args.repeat), "--store", *stores, "--json",
                       "--cache", str(args.cache)], log)
    by = {(r["workload"], r["store"]): r for r in records}
    for name, target in (("W1", 0.75), ("W2", 1.0)):
        r = by.get((name, "sqlite"))
        table.add(f"{name}: pipeline (SQLite) / plain Spark cascade", r and r["cascade_s"] / r["seconds"], "x",
                  target, at_least, ">=")
    for store, label in (("postgresql", "PostgreSQL"), ("mysql", "MariaDB")):
        server, embedded = by.get(("W1", store)), by.get(("W1", "sqlite"))
        value = server and embedded and embedded["seconds"] / server["seconds"]
        table.add(f"W1: {label} store / SQLite store", value, "x", 0.8, at_least, ">=")


def exports_rows(table: Table, args: argparse.Namespace, log: Path) -> None:
    (record,) = figures([PYTHON, str(BENCH / "bench_exports.py"), "--rows", str(args.export_rows), "--repeat",
                         str(args.repeat), "--json", "--cache", str(args.cache)], log)[-1:]
    ratios = record["ratios"]
    table.add("real export, CSV: ISO-8601 text / epoch ms (time)", ratios["iso_over_ms"], "x", 1.2, at_most, "<=")
    table.add("real export, CSV: tiltframe run / plain Spark job", ratios["csv_tiltframe_over_plain"], "x", 0.9,
              at_least, ">=")
    table.add("real export, Parquet: tiltframe run / plain Spark job", ratios["parquet_tiltframe_over_plain"], "x",
              0.9, at_least, ">=")


def continuous_rows(table: Table, args: argparse.Namespace, log: Path) -> None:
    (record,) = figures([PYTHON, str(BENCH / "bench_continuous.py"), "--json", "--cache", str(args.cache)], log)[-1:]
    for case, sides in record["results"].items():
        ours, spark = sides["tiltframe"], sides["spark"]
        if "throughput" in ours:
            table.add(f"continuous {case}: throughput / plain Spark",
                      ours["throughput"]["events_per_s"] / spark["throughput"]["events_per_s"], "x", 0.8, at_least,
                      ">=")
        if "latency" in ours:
            table.add(f"continuous {case}: p50 latency / plain Spark",
                      ours["latency"]["p50"] / spark["latency"]["p50"], "x", 1.2, at_most, "<=")


def read_rows(table: Table, args: argparse.Namespace, log: Path) -> None:
    workdir = args.cache / "serve"
    (record,) = figures([PYTHON, str(BENCH / "bench_serve.py"), "--events", str(args.serve_events), "--requests",
                         "300", "--requests-per-client", "20", "--workdir", str(workdir), "--json"], log)[-1:]
    table.add("one-key per-day retrieval, in process (tf.query)", record["in_process"]["tf_query"]["p50"], " ms",
              2, at_most, "<=")
    table.add("one-key per-day retrieval, in process (a kept reader)", record["in_process"]["reader"]["p50"], " ms",
              2, at_most, "<=")
    with tempfile.TemporaryDirectory() as tmp:
        app = Path(tmp) / "app.siddhi"
        app.write_text(record["app"])
        seconds = timed([*TILTFRAME, "query", str(app), "-d", record["data_dir"], record["query"]], 5)
    table.add("`tiltframe query` as a new process", seconds, " s", 0.4, at_most, "<=")


def run_rows(table: Table, args: argparse.Namespace, log: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        app, inbox = Path(tmp) / "app.siddhi", Path(tmp) / "in"
        app.write_text(SMALL_APP)
        inbox.mkdir()
        (inbox / "e.csv").write_text("symbol,price,quantity,timestamp\nA,1.0,2,1700000000000\nB,2.0,3,1700000001000\n")
        runs = []
        for i in range(3):
            runs.append(timed([*TILTFRAME, "run", str(app), "-i", f"S={inbox}", "-d", str(Path(tmp) / f"d{i}")], 1))
    table.add("`tiltframe run` fixed cost (new process, one small file)", statistics.median(runs), " s", 5, at_most,
              "<=")


def memory_rows(table: Table, args: argparse.Namespace, log: Path) -> None:
    (record,) = figures([PYTHON, str(BENCH / "bench_memory.py"), "--events", str(10 * args.events), "--json",
                         "--cache", str(args.cache)], log)[-1:]
    growth = record["growth_pct"]
    table.add("driver memory over a 10x longer stream: Python, resident (growth)", growth["python_mb"], "%", 10,
              at_most, "<=")
    table.add("driver memory over a 10x longer stream: JVM heap after GC (growth)", growth["heap_mb"], "%", 10,
              at_most, "<=")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=10_000_000, help="events of W1 and of W2")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of each contender of bench_core")
    parser.add_argument("--serve-events", type=int, default=1_000_000,
                        help="events of the year of second data the retrieval rows read")
    parser.add_argument("--export-rows", type=int, default=336_776,
                        help="flights of the real export's shape (bench/exports.py)")
    parser.add_argument("--parts", nargs="+", default=["core", "exports", "continuous", "read", "run", "memory"],
                        choices=["core", "exports", "continuous", "read", "run", "memory"])
    parser.add_argument("--cache", type=Path, default=ROOT / ".bench-data")
    args = parser.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    log = args.cache / f"bench-all-{time.strftime('%Y%m%d-%H%M%S')}.log"
    print(f"machine: {os.cpu_count()} cores; every benchmark's output is kept in {log}")
    table = Table()
    parts = {"core": core_rows, "exports": exports_rows, "continuous": continuous_rows, "read": read_rows,
             "run": run_rows, "memory": memory_rows}
    for name in args.parts:
        parts[name](table, args, log)
    table.print()


if __name__ == "__main__":
    main()
