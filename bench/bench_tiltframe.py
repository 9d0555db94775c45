"""Tilt-frame benchmark: one 4-level chain against four independent windows over the same events.

The setups aggregate the same stream (the workload generator ``bench/workload.py``, W1's
shape with fewer keys, so that buckets hold enough events for the quantile sketches to be tested) into
the embedded SQLite store, on local Spark, in the same micro-batches (one file per batch):

- ``tilt``: one aggregation ``every 10 sec, 1 min, 10 min, 1 hour``; tiltframe merges each level from
  the one before it, all levels in one Spark job per batch;
- ``independent``: four aggregations of one app, ``every 10 sec``, ``every 1 min``, ``every 10 min`` and
  ``every 1 hour``, each built from the raw events by its own streaming query; ``tf.run`` runs the four
  concurrently;
- ``one at a time``: the same four aggregations, each in its own app run after the other, which tells
  the work of the independent windows apart from what their concurrency hides.

All select ``count``, ``avg``, ``stdDev``, ``kll`` and ``dds`` of the price per symbol.  An untimed run of
the first two on a small input warms up the JVM.  Every aggregation's totals are checked before any
figure (events counted = events read = events in the input, every micro-batch processed, retrieved
``count()`` of every level summing to the input), and the setups must agree bucket by bucket (counts
exactly, avg and stdDev to 1e-9, DDSketch quantiles exactly: a DDSketch merge adds bins).  It prints,
per setup and as ratios tilt/independent from the same run:

1. state: rows and bytes of each level's table (SQLite ``dbstat``: record payload, of it the sketch
   binaries, and pages on disk with the primary-key index);
2. Spark, over the jobs and stages each setup ran (the driver UI's REST API,
   ``/api/v1/applications/<id>/stages`` and ``/jobs``): wall time with a job running, task time and CPU
   time, GC time, shuffle bytes and records written, task results sent to the driver, bytes spilled, and
   memory.  The stage metric ``peakExecutionMemory`` stays 0 here: every aggregate is an
   ``ObjectHashAggregate`` (sketches, ``collect_list``), which does not report it.  So the memory figure is
   the executor's ``OnHeapExecutionMemory`` (memory the memory manager handed out, in pages of up to
   64 MiB), sampled every 50 ms and taken at its peak over the setup's stages; for the concurrent setup it
   is the four queries together, as a deployment would hold them;
3. throughput: events/s of the whole run (Spark + store + streaming), the summed time in Spark and in the
   store of its aggregations, and the wall time during which no Spark job ran (planning, store, streaming);
4. quantile error per level: max rank error of the kll p50/p99 and max relative error of the dds p50/p99
   against the exact quantiles of each bucket's raw events (numpy), with the bounds of docs/functions.md.

Wall times share the machine with whatever else runs: the report prints the load average.

    python bench/bench_tiltframe.py                                  # 200k events in 4 micro-batches
    python bench/bench_tiltframe.py --events 2000000 --batches 4
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sqlite3
import time
import urllib.request
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import datasketches as ds
import numpy as np
import pandas as pd
import pyarrow.parquet as pq
from bench_core import ROOT, generate

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from tiltframe.engine.rollup.reports import PipelineTotals

#: Level name in ``per`` -> bucket length in ms.
LEVELS = {"10 sec": 10_000, "1 min": 60_000, "10 min": 600_000, "1 hour": 3_600_000}
#: The independent setup's aggregation of each level.
INDEPENDENT = {"10 sec": "Every10Sec", "1 min": "Every1Min", "10 min": "Every10Min", "1 hour": "Every1Hour"}
TILT = "TiltFrame"
QUANTILES = (0.5, 0.99)
ALPHA = 0.01
KLL_K = 200  # kll's default k
KLL_EPS = ds.kll_doubles_sketch.get_normalized_rank_error(KLL_K, False)  # about 1.3%, 99% confidence
SELECT = (f"symbol, count() as n, avg(price) as a, stdDev(price) as sd, kll(price, {list(QUANTILES)}) as k, "
          f"dds(price, {list(QUANTILES)}, {ALPHA}) as d")
OUTPUTS = ["n", "a", "sd", *(f"k_p{round(q * 100)}" for q in QUANTILES), *(f"d_p{round(q * 100)}" for q in QUANTILES)]
STREAM = "define stream TradeStream (symbol string, price double, quantity long, timestamp long);\n"
SKETCH_COLUMNS = ("k_KLL", "d_DDS")


def aggregation(name: str, durations: str) -> str:
    return (f"define aggregation {name}\nfrom TradeStream\nselect {SELECT}\ngroup by symbol\n"
            f"aggregate by timestamp every {durations};\n")


TILT_APP = STREAM + aggregation(TILT, ", ".join(LEVELS))
#: Each independent window alone (run one at a time), and all four in one app (run concurrently).
SINGLE_APPS = [STREAM + aggregation(name, level) for level, name in INDEPENDENT.items()]
INDEPENDENT_APP = STREAM + "".join(aggregation(name, level) for level, name in INDEPENDENT.items())


def workload_args(keys: int, span_seconds: int, events_per_file: int) -> list[str]:
    """W1's disorder (1% late by up to 2 s) and span, with ``keys`` symbols, one file per micro-batch."""
    return ["--keys", str(keys), "--span-seconds", str(span_seconds), "--disorder-pct", "1",
            "--max-lateness-ms", "2000", "--events-per-file", str(events_per_file)]


# --- Spark's stage metrics -------------------------------------------------------------------------------


def session() -> SparkSession:
    """tiltframe's local session (``get_session``'s settings) with the driver UI on, whose REST API serves
    the stage metrics; executor memory sampled every 50 ms (the aggregates here are object hash
    aggregates, which report no peak execution memory of their own); enough stages kept for big runs."""
    from tiltframe.engine.spark import session as tf_session

    saved, retention = dict(tf_session.DEFAULT_CONF), dict(tf_session.UI_RETENTION)
    tf_session.DEFAULT_CONF.update({"spark.ui.enabled": "true", "spark.executor.metrics.pollingInterval": "50ms",
                                    "spark.ui.retainedStages": "100000", "spark.ui.retainedJobs": "100000",
                                    "spark.sql.ui.retainedExecutions": "100"})
    tf_session.UI_RETENTION.clear()  # the UI is on here: Spark's retention of tasks, beside the above
    try:
        return tf_session.get_session("local[*]", app_name="bench_tiltframe")
    finally:
        tf_session.DEFAULT_CONF.clear()
        tf_session.DEFAULT_CONF.update(saved)
        tf_session.UI_RETENTION.update(retention)


class StageMetrics:
    """Reads the stages of this application from the driver's REST API (its port may not be 4040 when
    other Spark drivers run on the host, so the URL comes from the SparkContext)."""

    def __init__(self, spark: SparkSession) -> None:
        url = spark.sparkContext.uiWebUrl
        if url is None:
            msg = "the Spark UI is off: no REST API to read stage metrics from"
            raise RuntimeError(msg)
        self.base = f"{url}/api/v1/applications/{spark.sparkContext.applicationId}"

    def _get(self, path: str) -> Any:
        with urllib.request.urlopen(self.base + path, timeout=30) as response:
            return json.load(response)

    def last_stage(self) -> int:
        return max((s["stageId"] for s in self._get("/stages")), default=-1)

    def since(self, after: int) -> dict[str, float]:
        """Totals over the stages with an id above ``after`` that ran (skipped stages reused a shuffle)."""
        stages: list[dict[str, Any]] = []
        for _ in range(100):  # the status store is fed by an asynchronous listener: wait for it to settle
            stages = [s for s in self._get("/stages") if s["stageId"] > after]
            if all(s["status"] in ("COMPLETE", "SKIPPED", "FAILED") for s in stages):
                break
            time.sleep(0.1)
        ran = [s for s in stages if s["status"] == "COMPLETE"]
        jobs = [j for j in self._get("/jobs") if j["stageIds"] and min(j["stageIds"]) > after]
        sampled = [s.get("peakExecutorMetrics") or {} for s in ran]
        return {
            "stages": len(ran),
            "failed_stages": sum(s["status"] == "FAILED" for s in stages),
            "job_seconds": _covered([(_epoch(j["submissionTime"]), _epoch(j["completionTime"])) for j in jobs]),
            "task_seconds": sum(s["executorRunTime"] for s in ran) / 1000,
            "task_cpu_seconds": sum(s["executorCpuTime"] for s in ran) / 1e9,
            "gc_seconds": sum(s["jvmGcTime"] for s in ran) / 1000,
            "peak_execution_memory": sum(s["peakExecutionMemory"] for s in ran),
            "execution_memory": max((m.get("OnHeapExecutionMemory", 0) for m in sampled), default=0),
            "shuffle_write": sum(s["shuffleWriteBytes"] for s in ran),
            "shuffle_records": sum(s["shuffleWriteRecords"] for s in ran),
            "result_bytes": sum(s["resultSize"] for s in ran),
            "spilled": sum(s["memoryBytesSpilled"] + s["diskBytesSpilled"] for s in ran),
        }


def _epoch(stamp: str) -> float:
    """Seconds since the epoch of a REST API time such as ``2026-11-21T11:57:21.921GMT``."""
    return datetime.strptime(stamp.removesuffix("GMT"), "%Y-%m-%dT%H:%M:%S.%f").replace(tzinfo=UTC).timestamp()


def _covered(intervals: list[tuple[float, float]]) -> float:
    """Length of the union of intervals: the wall time during which at least one job ran."""
    total, end = 0.0, float("-inf")
    for lo, hi in sorted(intervals):
        total += max(0.0, hi - max(lo, end))
        end = max(end, hi)
    return total


# --- one setup -------------------------------------------------------------------------------------------


@dataclass
class Level:
    """What one level of one setup stored and answers."""

    rows: int
    payload: int  # record bytes of its table (dbstat)
    sketch: int  # of which the KLL and DDSketch binaries
    disk: int  # pages of its table and its primary-key index
    result: pd.DataFrame  # retrieved with tf.query, sorted by bucket and symbol


@dataclass
class Setup:
    """What one setup cost (wall time, per-aggregation totals, Spark metrics) and what it stored."""

    seconds: float
    totals: dict[str, PipelineTotals]
    spark: dict[str, float]
    levels: dict[str, Level] = field(default_factory=dict)

    @property
    def spark_seconds(self) -> float:
        return sum(t.spark_seconds for t in self.totals.values())

    @property
    def store_seconds(self) -> float:
        return sum(t.store_seconds for t in self.totals.values())


def table_sizes(db: Path, table: str) -> tuple[int, int, int, int]:
    """Rows, record payload, sketch bytes and on-disk pages (table + its indexes) of one table."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        names = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE tbl_name = ?", (table,))]
        marks = ",".join("?" * len(names))
        disk = con.execute(f"SELECT COALESCE(SUM(pgsize), 0) FROM dbstat WHERE name IN ({marks})", names).fetchone()[0]
        payload = con.execute("SELECT COALESCE(SUM(payload), 0) FROM dbstat WHERE name = ?", (table,)).fetchone()[0]
        lengths = " + ".join(f"COALESCE(SUM(LENGTH({c})), 0)" for c in SKETCH_COLUMNS)
        rows, sketch = con.execute(f'SELECT COUNT(*), {lengths} FROM "{table}"').fetchone()
    finally:
        con.close()
    return rows, payload, sketch, disk


def run_setup(spark: SparkSession, metrics: StageMetrics | None, apps: list[str], parquet: Path,
              data_dir: Path) -> Setup:
    """Run each app of ``apps`` in turn over every file, one file per micro-batch, into a fresh store under
    ``data_dir``; the levels are then read back with the aggregations of all of them."""
    import tiltframe as tf
    from tiltframe.aggregates.layout import AggregationLayout
    from tiltframe.engine.inputs.sources import FileInput
    from tiltframe.model.durations import Granularity
    from tiltframe.store import store_location

    shutil.rmtree(data_dir, ignore_errors=True)
    before = metrics.last_stage() if metrics is not None else -1
    totals: dict[str, PipelineTotals] = {}
    t0 = time.perf_counter()
    for text in apps:
        result = tf.run(tf.load_app(text), {"TradeStream": FileInput(str(parquet), "parquet", 1)},
                        data_dir=data_dir, spark=spark)
        totals.update(result.aggregations)
    elapsed = time.perf_counter() - t0
    setup = Setup(elapsed, totals, metrics.since(before) if metrics is not None else {})
    app = tf.load_app(STREAM + "".join(text.removeprefix(STREAM) for text in apps))
    for per in LEVELS:
        name = TILT if TILT in totals else INDEPENDENT[per]
        layout = AggregationLayout.of(app, name)
        g = Granularity.parse(per)
        assert g in layout.spec.granularities, (name, per)
        db = Path(store_location(layout.spec.store, data_dir))
        rows, payload, sketch, disk = table_sizes(db, layout.table_name(g))
        got = tf.query(app, f'from {name} within 0L, 4102444800000L per "{per}" '
                       f"select AGG_TIMESTAMP, symbol, {', '.join(OUTPUTS)}", data_dir=data_dir)
        got = got.sort_values(["AGG_TIMESTAMP", "symbol"]).reset_index(drop=True)
        setup.levels[per] = Level(rows, payload, sketch, disk, got)
    return setup


def check(name: str, setup: Setup, n: int, batches: int) -> None:
    """A fast wrong run is no figure: every event counted once per aggregation and once per level."""
    for agg, t in setup.totals.items():
        assert t.events_read == n == t.events_aggregated, (name, agg, t.events_read, t.events_aggregated, n)
        assert t.events_rejected == 0 == t.events_moved, (name, agg, t.events_rejected, t.events_moved)
        assert t.batches == batches and not t.skipped, (name, agg, t.batches, batches)
    for per, level in setup.levels.items():
        assert int(level.result["n"].sum()) == n, (name, per, int(level.result["n"].sum()), n)
        assert len(level.result) == level.rows, (name, per, len(level.result), level.rows)
    assert setup.spark.get("failed_stages", 0) == 0, (name, setup.spark)


def check_agree(tilt: Setup, independent: Setup) -> None:
    """Same buckets, counts, avg and stdDev (to rounding), same DDSketch quantiles (merges add bins)."""
    for per in LEVELS:
        a, b = tilt.levels[per].result, independent.levels[per].result
        assert len(a) == len(b), (per, len(a), len(b))
        for col in ("AGG_TIMESTAMP", "symbol", "n", *(f"d_p{round(q * 100)}" for q in QUANTILES)):
            assert (a[col].to_numpy() == b[col].to_numpy()).all(), (per, col)
        for col in ("a", "sd"):
            np.testing.assert_allclose(a[col], b[col], rtol=1e-9, atol=1e-9, err_msg=f"{per} {col}")


# --- quantile errors against the raw events --------------------------------------------------------------


def exact_buckets(events: pd.DataFrame, length: int) -> dict[tuple[int, str], np.ndarray]:
    """The sorted prices of each (bucket, symbol) of one level (buckets of ``length`` ms, UTC)."""
    bucket = events["timestamp"] - events["timestamp"] % length
    frame = events.assign(bucket=bucket).sort_values(["bucket", "symbol", "price"])
    return {key: group.to_numpy() for key, group in frame.groupby(["bucket", "symbol"], sort=False)["price"]}


def quantile_errors(result: pd.DataFrame, exact: dict[tuple[int, str], np.ndarray]) -> dict[str, float]:
    """Max over buckets of kll's rank error (distance of q to the ranks its estimate stands for) and of
    dds's relative error to the exact lower quantile (rank floor(q (n - 1))), per quantile."""
    worst = {f"{s}_p{round(q * 100)}": 0.0 for s in ("k", "d") for q in QUANTILES}
    assert len(result) == len(exact), (len(result), len(exact))
    for row in result.itertuples(index=False):
        prices = exact[(row.AGG_TIMESTAMP, row.symbol)]
        assert len(prices) == row.n, (row, len(prices))
        for q in QUANTILES:
            name = f"p{round(q * 100)}"
            k, d = getattr(row, f"k_{name}"), getattr(row, f"d_{name}")
            low = np.searchsorted(prices, k, "left") / len(prices)
            high = np.searchsorted(prices, k, "right") / len(prices)
            worst[f"k_{name}"] = max(worst[f"k_{name}"], low - q, q - high)
            true = prices[math.floor(q * (len(prices) - 1))]
            worst[f"d_{name}"] = max(worst[f"d_{name}"], abs(d - true) / abs(true))
    return worst


# --- report ----------------------------------------------------------------------------------------------


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}" if b else "-"


def mib(b: float) -> str:
    return f"{b / 2**20:.2f} MiB"


def secs(v: float) -> str:
    return f"{v:.1f} s"


def report(n: int, batches: int, meta: dict, tilt: Setup, ind: Setup, seq: Setup,
           errors: dict[str, dict[str, dict]]) -> None:
    """The figures side by side, with ratios tilt/independent from this run."""
    print(f"\n{n:,} events, {meta['keys']} symbols over {meta['span_seconds']} s "
          f"({meta['delayed_events']:,} delayed up to {meta['max_lateness_ms']} ms), {batches} micro-batches of "
          f"{meta['events_per_file']:,}; embedded SQLite store, local Spark on {os.cpu_count()} cores "
          f"(load average {os.getloadavg()[0]:.1f})")
    print("totals checked: every aggregation read and counted every event in every micro-batch, retrieved "
          "count() of every level sums to the input, all setups agree on every bucket")

    print("\n1. State per level: rows, record bytes (of them the kll + dds binaries), disk pages incl. key index")
    print(f"  {'level':7} {'rows':>7} {'bytes tilt':>12} {'bytes indep':>12} {'ratio':>6} {'sketch tilt':>12} "
          f"{'sketch indep':>12} {'ratio':>6} {'disk tilt':>12} {'disk indep':>12}")
    for per in LEVELS:
        a, b = tilt.levels[per], ind.levels[per]
        assert a.rows == b.rows
        print(f"  {per:7} {a.rows:7,} {a.payload:12,} {b.payload:12,} {ratio(a.payload, b.payload):>6} "
              f"{a.sketch:12,} {b.sketch:12,} {ratio(a.sketch, b.sketch):>6} {a.disk:12,} {b.disk:12,}")
    pa_, pb = (sum(s.levels[p].payload for p in LEVELS) for s in (tilt, ind))
    da, db = (sum(s.levels[p].disk for p in LEVELS) for s in (tilt, ind))
    print(f"  {'all':7} {sum(lv.rows for lv in tilt.levels.values()):7,} {pa_:12,} {pb:12,} {ratio(pa_, pb):>6} "
          f"{'':12} {'':12} {'':6} {da:12,} {db:12,}  (disk ratio {ratio(da, db)})")

    print("\n2. Spark, over the stages each setup ran (driver UI REST API; executor memory sampled every 50 ms)")
    setups = {"tilt": tilt, "independent": ind, "one at a time": seq}
    print(f"  {'':40}" + "".join(f"{k:>15}" for k in setups) + f"{'tilt/indep':>12}{'tilt/one':>10}")
    rows = [("stages run", "stages", str), ("wall time with a Spark job running", "job_seconds", secs),
            ("task time", "task_seconds", secs),
            ("task CPU time", "task_cpu_seconds", secs), ("GC time", "gc_seconds", secs),
            ("peak execution memory (task metric)", "peak_execution_memory", mib),
            ("execution memory held, peak (sampled)", "execution_memory", mib),
            ("shuffle bytes written", "shuffle_write", mib),
            ("shuffle records written", "shuffle_records", "{:,}".format),
            ("task results to the driver", "result_bytes", mib), ("spilled (memory + disk)", "spilled", mib)]
    for label, key, fmt in rows:
        values = [s.spark[key] for s in setups.values()]
        print(f"  {label:40}" + "".join(f"{fmt(v):>15}" for v in values)
              + f"{ratio(values[0], values[1]):>12}{ratio(values[0], values[2]):>10}")

    print("\n3. Throughput, end to end (same events, same micro-batches); Spark and store time summed over the "
          "aggregations; the rest of the wall time without a Spark job: planning, store, streaming")
    for label, s in (("tilt frame (1 aggregation, 4 levels)", tilt), ("independent (4 concurrent queries)", ind),
                     ("independent, one aggregation at a time", seq)):
        print(f"  {label:40} {s.seconds:6.1f} s {n / s.seconds:>10,.0f} events/s   Spark {s.spark_seconds:5.1f} s, "
              f"store {s.store_seconds:5.1f} s, no Spark job running {s.seconds - s.spark['job_seconds']:5.1f} s")
    print(f"  ratio of events/s tilt/independent: {ind.seconds / tilt.seconds:.2f} (concurrent), "
          f"{seq.seconds / tilt.seconds:.2f} (one at a time)")

    print(f"\n4. Quantile error, worst bucket of each level (bounds: kll rank {KLL_EPS:.2%} at k={KLL_K}, 99% "
          f"confidence; dds relative {ALPHA:.0%})")
    names = [f"{s}_p{round(q * 100)}" for s in ("k", "d") for q in QUANTILES]
    header = "  ".join(f"{'kll' if c[0] == 'k' else 'dds'} {c[2:]} tilt/indep" for c in names)
    print(f"  {'level':7} {'ev/bucket':>9}  {header}")
    for per in LEVELS:
        e_t, e_i = errors["tilt"][per], errors["independent"][per]
        cells = "  ".join(f"{e_t[c]:>9.3%}/{e_i[c]:<7.3%}" for c in names)
        print(f"  {per:7} {n / tilt.levels[per].rows:9.0f}  {cells}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--batches", type=int, default=4, help="micro-batches (one generated file each)")
    parser.add_argument("--keys", type=int, default=20,
                        help="symbols; few enough that coarse buckets hold thousands of events for the sketches")
    parser.add_argument("--span-seconds", type=int, default=7200, help="event-time span (2 h: 2 hourly buckets)")
    parser.add_argument("--cache", type=Path, default=ROOT / ".bench-data")
    parser.add_argument("--json", action="store_true", help="also print the figures as one JSON line")
    args = parser.parse_args()

    per_file = -(-args.events // args.batches)
    name = f"tilt-k{args.keys}-s{args.span_seconds}-f{per_file}"
    folder = generate(name, args.events, args.cache, workload_args(args.keys, args.span_seconds, per_file))
    parquet = folder / "parquet"
    meta = json.loads((folder / "meta.json").read_text())
    events = pq.read_table(parquet, columns=["symbol", "price", "timestamp"]).to_pandas()
    n = len(events)
    assert n == meta["events"] == args.events, (n, meta["events"], args.events)
    assert meta["files"] == args.batches, (meta["files"], args.batches)

    spark = session()
    metrics = StageMetrics(spark)
    # The first runs of a process pay for JIT and code generation: both apps once, untimed, on a small input
    # (two micro-batches, so that the store's merge of stored sketches is warm too).
    warm_events = min(args.events, 10_000)
    warm = generate(f"tilt-warmup-k{args.keys}", warm_events, args.cache,
                    workload_args(args.keys, args.span_seconds, -(-warm_events // 2)))
    for apps in ([TILT_APP], [INDEPENDENT_APP]):
        run_setup(spark, None, apps, warm / "parquet", args.cache / "tilt-warmup-run")
    shutil.rmtree(args.cache / "tilt-warmup-run", ignore_errors=True)

    run_dir = args.cache / f"{name}-{args.events}"
    tilt = run_setup(spark, metrics, [TILT_APP], parquet, run_dir.with_name(run_dir.name + "-tilt"))
    ind = run_setup(spark, metrics, [INDEPENDENT_APP], parquet, run_dir.with_name(run_dir.name + "-independent"))
    seq = run_setup(spark, metrics, SINGLE_APPS, parquet, run_dir.with_name(run_dir.name + "-one-at-a-time"))
    for label, setup in (("tilt", tilt), ("independent", ind), ("one at a time", seq)):
        check(label, setup, n, args.batches)
    check_agree(tilt, ind)
    check_agree(tilt, seq)

    errors: dict[str, dict[str, dict]] = {"tilt": {}, "independent": {}}
    for per, length in LEVELS.items():
        exact = exact_buckets(events, length)
        for label, setup in (("tilt", tilt), ("independent", ind)):
            errors[label][per] = quantile_errors(setup.levels[per].result, exact)
    report(n, args.batches, meta, tilt, ind, seq, errors)
    if args.json:
        figures = {label: {"seconds": s.seconds, "spark_seconds": s.spark_seconds, "store_seconds": s.store_seconds,
                           "spark": s.spark, "quantile_errors": errors.get(label),
                           "levels": {p: {"rows": lv.rows, "payload": lv.payload, "sketch": lv.sketch, "disk": lv.disk}
                                      for p, lv in s.levels.items()}}
                   for label, s in (("tilt", tilt), ("independent", ind), ("one_at_a_time", seq))}
        print(json.dumps({"events": n, "batches": args.batches, "keys": args.keys, **figures}))


if __name__ == "__main__":
    main()
