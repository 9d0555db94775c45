"""Does cost grow as the scaling model says?  A workload, and the same shape grown ``--factor`` times.

docs/scaling.md works a deployment far larger than this machine out on paper, from a model: a level of
the rollup holds one row per (key, bucket) that received an event, so with uniform keys and times its
expected row count is ``K * B * (1 - exp(-N / (K * B)))`` (N events, K keys, B buckets of the level in the
span); Spark's time grows with the events and the store's with the rows written.  This benchmark checks
the model where it can be run.  In one process it generates (``bench/workload.py``'s generator) three
workloads of the same span and shape:

- ``fixed``: a tiny one (``--fixed-events`` events, ``--fixed-keys`` keys): a micro-batch's fixed cost;
- ``base``: ``--events`` events over ``--keys`` keys;
- ``grown``: events and keys both ``--factor`` times as many, so events per key per second stay the same;

and runs tiltframe's pipeline over each (``bench_core.pipeline``: all files in one micro-batch, as
``tiltframe run`` reads a backlog; the app below, avg/sum/count/min/max per symbol at every level from
seconds to years; the embedded SQLite store, and/or a fresh database on a test server with ``--store``),
after one untimed run of ``base`` (the process's first run pays JIT and code generation).  Before any
figure it checks each run against the input: events read = aggregated = in the input = stored; every
level's row count, event count and sum of quantity equal DuckDB's over the Parquet files; the coarsest
level's rows equal DuckDB's row by row.

It then prints, per run: rows per level (from the store); Spark's and the store's time of the batch (the
batch report's wall seconds) and their CPU seconds (the Spark JVM's, which in local mode runs the
executors too, and the store write's thread on the driver), which the load of other work on a shared
machine does not stretch; store rows/s; the store's size on disk; the driver's peak memory (VmHWM).  And
the model's prediction for the grown run: rows per level from the formula above (exact for the generator:
calendar buckets counted from the workload's start, the binomial form of the formula), Spark time = fixed
+ (base - fixed) x events grown, store time = fixed + (base - fixed) x rows grown, each as measured /
predicted, and whether that is within ``--row-tolerance`` and ``--time-tolerance``.

``--plan EVENTS_PER_DAY KEYS`` prints the model alone for a deployment (docs/scaling.md's figures): rows
per level in a day, rows written per second for micro-batches every ``--trigger-seconds`` (on average and
at ``--peak`` times the rate), and rows kept under the default retention.

    python bench/bench_scaling.py                                  # 1M x 1,000 keys, then 10M x 10,000 (2 h)
    python bench/bench_scaling.py --events 100000 --keys 100       # a quicker look
    eval "$(bash scripts/services.sh)"; python bench/bench_scaling.py --store sqlite postgresql
    python bench/bench_scaling.py --plan 1000000000 100000         # the model for 1B events a day, 100k keys
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sqlite3
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests.servers: fresh databases on the test servers
sys.path.insert(0, str(ROOT / "bench"))

import bench_core  # noqa: E402  (bench/ on the path above)
import workload  # noqa: E402

AGGREGATION = "TradeAggregation"
#: bench_core's app with count, min and max too; purging off, so that every row written is counted.
APP = f"""
define stream TradeStream (symbol string, price double, quantity long, timestamp long);
@purge(enable='false')
define aggregation {AGGREGATION}
from TradeStream
select symbol, avg(price) as avgPrice, sum(quantity) as total, count() as trades, min(price) as low,
       max(price) as high
group by symbol
aggregate by timestamp every sec ... year;
"""
#: The levels of ``every sec ... year`` (tables ``TradeAggregation_<LEVEL>``), finest first, in UTC.
LEVELS = ("SECONDS", "MINUTES", "HOURS", "DAYS", "MONTHS", "YEARS")
FIXED_MS = {"SECONDS": 1_000, "MINUTES": 60_000, "HOURS": 3_600_000, "DAYS": 86_400_000}
DAY_MS = 86_400_000
#: docs/retention.md's default retention per level, in ms (None: kept forever).
DEFAULT_RETENTION_MS: dict[str, int | None] = {
    "SECONDS": 120_000, "MINUTES": DAY_MS, "HOURS": 30 * DAY_MS, "DAYS": 365 * DAY_MS, "MONTHS": None, "YEARS": None,
}


# The model.

def _calendar_floor(level: str, ms: int) -> int:
    t = datetime.fromtimestamp(ms // 1000, UTC)
    start = t.replace(month=1 if level == "YEARS" else t.month, day=1, hour=0, minute=0, second=0)
    return int(start.timestamp()) * 1000


def _calendar_next(level: str, start_ms: int) -> int:
    t = datetime.fromtimestamp(start_ms // 1000, UTC)
    t = t.replace(year=t.year + 1, month=1) if level == "YEARS" or t.month == 12 else t.replace(month=t.month + 1)
    return int(t.timestamp()) * 1000


def bucket_spans(level: str, start_ms: int, span_ms: int) -> Counter[int]:
    """The buckets of ``level`` (UTC) that overlap ``[start_ms, start_ms + span_ms)``, counted by how many ms
    of that span each holds: the span's calendar boundaries counted exactly (a 2 h span from 23:00 holds
    two days, two months and two years of one hour each)."""
    end = start_ms + span_ms
    spans: Counter[int] = Counter()
    if level in FIXED_MS:
        size = FIXED_MS[level]
        first, last = start_ms - start_ms % size, (end - 1) - (end - 1) % size
        if first == last:
            spans[span_ms] += 1
        else:
            spans[first + size - start_ms] += 1
            spans[end - last] += 1
            if (inner := (last - first) // size - 1) > 0:
                spans[size] += inner
        return spans
    bucket = _calendar_floor(level, start_ms)
    while bucket < end:
        after = _calendar_next(level, bucket)
        spans[min(after, end) - max(bucket, start_ms)] += 1
        bucket = after
    return spans


def key_weights(keys: int, zipf_s: float = 0.0) -> np.ndarray:
    """Each key's share of the events, as ``workload.events`` draws them (uniform, or Zipf with ``zipf_s``)."""
    if zipf_s <= 0:
        return np.full(keys, 1.0 / keys)
    weights = 1.0 / np.arange(1, keys + 1) ** zipf_s
    return weights / weights.sum()


def expected_rows(events: float, weights: np.ndarray, spans: Counter[int], span_ms: int) -> float:
    """Expected distinct (key, bucket) pairs among ``events`` events with independent keys (``weights``) and
    times uniform over ``span_ms``: the sum over cells of P(cell non-empty) = 1 - (1 - q)^N.  For uniform
    keys and equal buckets this is ``K * B * (1 - exp(-N / (K * B)))`` to within the cell's probability."""
    shares, counts = np.unique(weights, return_counts=True)
    total = 0.0
    with np.errstate(divide="ignore"):
        for length, buckets in spans.items():
            q = shares * (length / span_ms)
            total += buckets * float((counts * -np.expm1(events * np.log1p(-q))).sum())
    return total


def model_rows(events: float, keys: int, start_ms: int, span_ms: int, zipf_s: float = 0.0) -> dict[str, float]:
    """Expected rows of each level for a workload of ``bench/workload.py``'s shape."""
    weights = key_weights(keys, zipf_s)
    return {level: expected_rows(events, weights, bucket_spans(level, start_ms, span_ms), span_ms)
            for level in LEVELS}


def predicted_seconds(fixed: float, base: float, growth: float) -> float:
    """A cost that is ``fixed`` plus a part proportional to the work, measured ``base`` at growth 1."""
    return fixed + max(base - fixed, 0.0) * growth


def _period(ms: int | None) -> str:
    if ms is None:
        return "all"
    for unit, size in (("d", DAY_MS), ("h", 3_600_000), ("s", 1_000)):
        if ms % size == 0:
            return f"{ms // size} {unit}"
    return f"{ms} ms"


def plan(events_per_day: float, keys: int, *, zipf_s: float, trigger_s: int, peak: float) -> dict[str, Any]:
    """The model for a deployment, per level: buckets and distinct rows in a day (what a day's backfill in
    one micro-batch writes); rows written per second by micro-batches every ``trigger_s`` seconds, on average
    and at ``peak`` times the average rate (each batch rewrites every coarse row it touches; a batch's events
    start half a trigger past a boundary, as arrival-cut batches do, so it straddles two buckets of the next
    level up); and the rows kept under docs/retention.md's defaults (a year of the levels kept forever)."""
    day_start = _calendar_floor("YEARS", workload.DEFAULT_START_MS + 3_600_000)  # 2024-01-01T00:00Z
    weights = key_weights(keys, zipf_s)
    per_ms = events_per_day / DAY_MS
    batch_ms = trigger_s * 1000
    levels = {}
    for level in LEVELS:
        batch = bucket_spans(level, day_start + batch_ms // 2, batch_ms)
        kept_ms = DEFAULT_RETENTION_MS[level] or 365 * DAY_MS
        levels[level] = {
            "buckets_per_day": sum(bucket_spans(level, day_start, DAY_MS).values()),
            "rows_per_day": expected_rows(events_per_day, weights, bucket_spans(level, day_start, DAY_MS), DAY_MS),
            "written_per_s": expected_rows(per_ms * batch_ms, weights, batch, batch_ms) / trigger_s,
            "written_per_s_at_peak": expected_rows(peak * per_ms * batch_ms, weights, batch, batch_ms) / trigger_s,
            "retention": _period(DEFAULT_RETENTION_MS[level]),
            "rows_kept": expected_rows(per_ms * kept_ms, weights, bucket_spans(level, day_start, kept_ms), kept_ms),
        }
    return {"events_per_day": events_per_day, "keys": keys, "zipf_s": zipf_s, "trigger_s": trigger_s,
            "peak": peak, "levels": levels,
            "total": {k: sum(f[k] for f in levels.values())
                      for k in ("rows_per_day", "written_per_s", "written_per_s_at_peak", "rows_kept")}}


def print_plan(p: dict[str, Any]) -> None:
    skew = f"Zipf s={p['zipf_s']:g}" if p["zipf_s"] > 0 else "uniform"
    print(f"model: {p['events_per_day']:,.0f} events a day ({p['events_per_day'] / 86_400:,.0f}/s on average) over "
          f"{p['keys']:,} keys ({skew}); micro-batches every {p['trigger_s']} s; peak {p['peak']:g}x the average")
    print(f"  {'level':<8} {'buckets/day':>11} {'rows in a day':>15} {'written/s':>10} {'at peak':>10} "
          f"{'retention':>10} {'rows kept':>14}")
    for level, f in [*p["levels"].items(), ("all", {**p["total"], "buckets_per_day": None, "retention": ""})]:
        buckets = "" if f["buckets_per_day"] is None else f"{f['buckets_per_day']:,}"
        print(f"  {level:<8} {buckets:>11} {f['rows_per_day']:>15,.0f} {f['written_per_s']:>10,.0f} "
              f"{f['written_per_s_at_peak']:>10,.0f} {f['retention']:>10} {f['rows_kept']:>14,.0f}")
    print("  (rows in a day: what a day's backfill in one micro-batch writes; written/s: rows the store merges per "
          "second; rows kept: under docs/retention.md's defaults, a year's for 'all')")


# The runs.

def generate(w: workload.Workload, cache: Path) -> Path:
    """``w``'s Parquet files, written once into ``cache`` by the project's generator."""
    out = cache / f"scaling-{w.events}-{w.keys}-{w.span_seconds}-{w.zipf_s:g}-{w.disorder_pct:g}-{w.seed}"
    if not (out / "meta.json").exists():
        shutil.rmtree(out, ignore_errors=True)
        workload.write(w, out)
    return out / "parquet"


def duckdb_levels(parquet: Path) -> dict[str, Any]:
    """Per level, from the input alone (DuckDB): distinct (symbol, bucket) rows, events, sum of quantity;
    and the coarsest level's rows (symbol, year, events, sum of quantity)."""
    import duckdb

    bucket = {
        "SECONDS": "timestamp // 1000", "MINUTES": "timestamp // 60000", "HOURS": "timestamp // 3600000",
        "DAYS": "timestamp // 86400000", "MONTHS": "date_trunc('month', epoch_ms(timestamp))",
        "YEARS": "date_trunc('year', epoch_ms(timestamp))",
    }
    con = duckdb.connect()
    con.execute(f"CREATE VIEW e AS SELECT * FROM read_parquet('{parquet}/*.parquet')")
    levels = {}
    for level, b in bucket.items():
        rows, n, q = con.execute(f"SELECT count(*), sum(c), sum(q) FROM (SELECT symbol, {b} AS b, count(*) AS c, "
                                 "sum(quantity) AS q FROM e GROUP BY ALL)").fetchone()
        levels[level] = (int(rows), int(n), int(q))
    years = con.execute("SELECT symbol, epoch_ms(date_trunc('year', epoch_ms(timestamp))), count(*), sum(quantity) "
                        "FROM e GROUP BY ALL").fetchall()
    con.close()
    return {"levels": levels, "years": sorted((s, int(y), int(c), int(q)) for s, y, c, q in years)}


def _server_engine(url: str) -> Any:
    import sqlalchemy as sa

    from tiltframe.model.aggregations import StoreSpec
    from tiltframe.store.urls import store_target

    return sa.create_engine(store_target(StoreSpec("rdbms", url)))


def stored_levels(url: str | None, data_dir: Path) -> tuple[dict[str, tuple[int, int, int]], list[tuple], int]:
    """From the store: per level (rows, events, sum of quantity), the coarsest level's rows, and the bytes the
    aggregation's tables take (the SQLite file; PostgreSQL ``pg_total_relation_size``; MySQL/MariaDB data and
    index length)."""
    tables = {level: f"{AGGREGATION}_{level}" for level in LEVELS}
    years_sql = 'SELECT symbol, "AGG_TIMESTAMP", "AGG_COUNT", "total_SUM" FROM "{}"'
    if url is None:
        path = data_dir / "tiltframe.db"
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        query = lambda sql: con.execute(sql).fetchall()  # noqa: E731
        size = sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))
    else:
        engine = _server_engine(url)
        mysql = engine.dialect.name != "postgresql"
        con = engine.connect()
        query = lambda sql: con.exec_driver_sql(sql.replace('"', "`") if mysql else sql).fetchall()  # noqa: E731
        if mysql:  # InnoDB's sizes in information_schema are as of its last statistics
            query("ANALYZE TABLE " + ", ".join(f'"{t}"' for t in tables.values()))
            names = ", ".join(f"'{t}'" for t in tables.values())
            size = int(query("SELECT sum(data_length + index_length) FROM information_schema.tables WHERE "
                             f"table_schema = database() AND table_name IN ({names})")[0][0])
        else:
            size = sum(int(query(f"SELECT pg_total_relation_size('\"{t}\"')")[0][0]) for t in tables.values())
    try:
        levels = {}
        for level, table in tables.items():
            rows, n, q = query(f'SELECT count(*), sum("AGG_COUNT"), sum("total_SUM") FROM "{table}"')[0]
            levels[level] = (int(rows), int(n or 0), int(q or 0))
        years = sorted((s, int(y), int(c), int(q)) for s, y, c, q in query(years_sql.format(tables["YEARS"])))
    finally:
        con.close()
        if url is not None:
            engine.dispose()
    return levels, years, size


def _peak_mb(pid: int | str = "self") -> float | None:
    """A process's peak resident memory (VmHWM) in MB, or None where /proc does not say."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def _reset_peak(pid: int | str = "self") -> bool:
    """Start a process's VmHWM afresh (Linux: ``5`` into ``clear_refs``), so each run has its own peak."""
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def _cpu_seconds(pid: int | None) -> float | None:
    """User + system CPU seconds of a process so far (``/proc/<pid>/stat``), or None."""
    if pid is None:
        return None
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _gc_seconds(spark: Any) -> float:
    """Seconds the driver JVM's garbage collectors have taken so far (in local mode, the executors' too)."""
    beans = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()
    return sum(max(b.getCollectionTime(), 0) for b in beans) / 1000


@contextmanager
def thread_cpu() -> Iterator[dict[str, float]]:
    """CPU seconds of the batch's thread on the driver while active: in the Spark part (``_aggregate``: the
    plan, receiving the Arrow rows, splitting the levels) and in the store's write (for SQLite all of the
    store's work; for a server, the client's share).  CPU time, unlike wall time, does not grow with the
    load other work puts on a shared machine."""
    from tiltframe.engine.rollup.pipeline import AggregationPipeline
    from tiltframe.store.sql import SqlStore

    clocks = {"aggregate": 0.0, "write_batch": 0.0}
    originals = {"aggregate": AggregationPipeline._aggregate, "write_batch": SqlStore.write_batch}

    def timed(name: str) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            t0 = time.thread_time()
            try:
                return originals[name](*args, **kwargs)
            finally:
                clocks[name] += time.thread_time() - t0
        return call

    AggregationPipeline._aggregate = timed("aggregate")  # type: ignore[method-assign]
    SqlStore.write_batch = timed("write_batch")  # type: ignore[method-assign]
    try:
        yield clocks
    finally:
        AggregationPipeline._aggregate = originals["aggregate"]  # type: ignore[method-assign]
        SqlStore.write_batch = originals["write_batch"]  # type: ignore[method-assign]


def measured_run(spark: Any, parquet: Path, truth: dict[str, Any], *, store: str, url: str | None,
                 data_dir: Path, jvm_pid: int | None) -> dict[str, Any]:
    """One pipeline run into an empty store, checked against ``truth`` (DuckDB's) before it is returned."""
    from tests.servers import app_with_store

    peaks = _reset_peak() and (jvm_pid is None or _reset_peak(jvm_pid))
    cpu, gc = _cpu_seconds(jvm_pid), _gc_seconds(spark)
    with thread_cpu() as clocks:
        p = bench_core.pipeline(spark, parquet, data_dir, None, app_with_store(APP, url)[0])
    cpu = None if cpu is None else _cpu_seconds(jvm_pid) - cpu  # type: ignore[operator]
    gc = _gc_seconds(spark) - gc
    python_mb, jvm_mb = (_peak_mb(), _peak_mb(jvm_pid) if jvm_pid else None) if peaks else (None, None)
    levels, years, size = stored_levels(url, data_dir)
    shutil.rmtree(data_dir, ignore_errors=True)
    # A fast wrong run is no figure: every level must hold exactly what the input says.
    _, n, quantity = truth["levels"]["YEARS"]
    assert p["store"].startswith(store) if url else p["store"].endswith(".db"), (store, p["store"])
    assert p["events_read"] == p["events_aggregated"] == n == p["stored_count"], (store, p["events_read"], n)
    assert p["stored_total"] == quantity, (store, p["stored_total"], quantity)
    for level in LEVELS:
        assert levels[level] == truth["levels"][level], (store, level, levels[level], truth["levels"][level])
    assert years == truth["years"], (store, "the coarsest level's rows differ from DuckDB's")
    assert p["rows_written"] == sum(rows for rows, _, _ in levels.values()), (p["rows_written"], levels)
    return {**p, "store": store, "location": p["store"], "levels": {k: v[0] for k, v in levels.items()},
            "store_bytes": size, "python_peak_mb": python_mb, "jvm_peak_mb": jvm_mb, "jvm_cpu_s": cpu, "gc_s": gc,
            "driver_spark_cpu_s": clocks["aggregate"], "store_cpu_s": clocks["write_batch"]}


def _ratio(measured: float, predicted: float) -> float:
    return measured / predicted if predicted else math.nan


def compare(fixed: dict[str, Any], base: dict[str, Any], grown: dict[str, Any], model: dict[str, dict[str, float]],
            factor: float) -> dict[str, Any]:
    """The grown run against the model's prediction from the base and fixed runs of the same store."""
    rows_model = sum(model["grown"].values())
    rows_growth = rows_model / base["rows_written"]
    spark = predicted_seconds(fixed["spark_seconds"], base["spark_seconds"], grown["events_read"] / base["events_read"])
    stored = predicted_seconds(fixed["store_seconds"], base["store_seconds"], rows_growth)
    store_cpu = predicted_seconds(fixed["store_cpu_s"], base["store_cpu_s"], rows_growth)
    cpu = None if grown["jvm_cpu_s"] is None else predicted_seconds(
        fixed["jvm_cpu_s"], base["jvm_cpu_s"], grown["events_read"] / base["events_read"])
    return {
        "factor": factor,
        "rows": {level: _ratio(grown["levels"][level], model["grown"][level]) for level in LEVELS},
        "rows_base": {level: _ratio(base["levels"][level], model["base"][level]) for level in LEVELS},
        "rows_all": _ratio(grown["rows_written"], rows_model),
        "spark_predicted_s": spark, "spark": _ratio(grown["spark_seconds"], spark),
        "cpu_predicted_s": cpu, "cpu": _ratio(grown["jvm_cpu_s"], cpu) if cpu is not None else None,
        "store_predicted_s": stored, "store": _ratio(grown["store_seconds"], stored),
        "store_cpu_predicted_s": store_cpu, "store_cpu": _ratio(grown["store_cpu_s"], store_cpu),
        "bytes_per_row": _ratio(grown["store_bytes"] / grown["rows_written"],
                                base["store_bytes"] / base["rows_written"]),
    }


def _mb(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def report(store: str, runs: dict[str, dict[str, Any]], c: dict[str, Any], model: dict[str, dict[str, float]],
           cores: int, row_tol: float, time_tol: float) -> dict[str, Any]:
    f, b, g = runs["fixed"], runs["base"], runs["grown"]
    print(f"\n{store} store:")
    print(f"  {'':<28}{'fixed':>12}{'base':>14}{'grown':>14}{'grown/base':>12}{'model (grown)':>16}"
          f"{'measured/model':>16}")
    print(f"  {'events':<28}{f['events_read']:>12,}{b['events_read']:>14,}{g['events_read']:>14,}"
          f"{g['events_read'] / b['events_read']:>11.2f}x")
    for level in LEVELS:
        print(f"  {'rows ' + level:<28}{f['levels'][level]:>12,}{b['levels'][level]:>14,}{g['levels'][level]:>14,}"
              f"{g['levels'][level] / b['levels'][level]:>11.2f}x{model['grown'][level]:>16,.0f}"
              f"{c['rows'][level]:>16.4f}")
    print(f"  {'rows, all levels':<28}{f['rows_written']:>12,}{b['rows_written']:>14,}{g['rows_written']:>14,}"
          f"{g['rows_written'] / b['rows_written']:>11.2f}x{sum(model['grown'].values()):>16,.0f}"
          f"{c['rows_all']:>16.4f}")
    print(f"  {'Spark s (to rows on driver)':<28}{f['spark_seconds']:>12.2f}{b['spark_seconds']:>14.2f}"
          f"{g['spark_seconds']:>14.2f}{g['spark_seconds'] / b['spark_seconds']:>11.2f}x{c['spark_predicted_s']:>16.2f}"
          f"{c['spark']:>16.2f}")
    if c["cpu"] is not None:
        print(f"  {'JVM CPU s (Spark, local)':<28}{f['jvm_cpu_s']:>12.2f}{b['jvm_cpu_s']:>14.2f}{g['jvm_cpu_s']:>14.2f}"
              f"{g['jvm_cpu_s'] / b['jvm_cpu_s']:>11.2f}x{c['cpu_predicted_s']:>16.2f}{c['cpu']:>16.2f}")
    gc_growth = f"{g['gc_s'] / b['gc_s']:>11.2f}x" if b["gc_s"] >= 0.01 else f"{'-':>12}"
    print(f"  {'JVM GC s':<28}{f['gc_s']:>12.2f}{b['gc_s']:>14.2f}{g['gc_s']:>14.2f}{gc_growth}")
    print(f"  {'store s (write + commit)':<28}{f['store_seconds']:>12.2f}{b['store_seconds']:>14.2f}"
          f"{g['store_seconds']:>14.2f}{g['store_seconds'] / b['store_seconds']:>11.2f}x{c['store_predicted_s']:>16.2f}"
          f"{c['store']:>16.2f}")
    print(f"  {'store CPU s (driver thread)':<28}{f['store_cpu_s']:>12.2f}{b['store_cpu_s']:>14.2f}"
          f"{g['store_cpu_s']:>14.2f}{g['store_cpu_s'] / b['store_cpu_s']:>11.2f}x{c['store_cpu_predicted_s']:>16.2f}"
          f"{c['store_cpu']:>16.2f}")
    print(f"  {'driver CPU s in Spark part':<28}{f['driver_spark_cpu_s']:>12.2f}{b['driver_spark_cpu_s']:>14.2f}"
          f"{g['driver_spark_cpu_s']:>14.2f}{g['driver_spark_cpu_s'] / b['driver_spark_cpu_s']:>11.2f}x")
    print(f"  {'run s (start to end)':<28}{f['seconds']:>12.2f}{b['seconds']:>14.2f}{g['seconds']:>14.2f}"
          f"{g['seconds'] / b['seconds']:>11.2f}x")
    rate = {k: r["rows_written"] / r["store_seconds"] for k, r in runs.items()}
    print(f"  {'store rows/s':<28}{rate['fixed']:>12,.0f}{rate['base']:>14,.0f}{rate['grown']:>14,.0f}"
          f"{rate['grown'] / rate['base']:>11.2f}x")
    per_core = {k: r["events_read"] / (r["spark_seconds"] * cores) for k, r in runs.items()}
    print(f"  {'events/s per core (Spark)':<28}{per_core['fixed']:>12,.0f}{per_core['base']:>14,.0f}"
          f"{per_core['grown']:>14,.0f}{per_core['grown'] / per_core['base']:>11.2f}x")
    if c["cpu"] is not None:
        per_cpu = {k: r["events_read"] / r["jvm_cpu_s"] for k, r in runs.items()}
        print(f"  {'events per JVM CPU s':<28}{per_cpu['fixed']:>12,.0f}{per_cpu['base']:>14,.0f}"
              f"{per_cpu['grown']:>14,.0f}{per_cpu['grown'] / per_cpu['base']:>11.2f}x")
    rows_cpu = {k: r["rows_written"] / max(r["store_cpu_s"], 1e-9) for k, r in runs.items()}
    print(f"  {'store rows per thread CPU s':<28}{rows_cpu['fixed']:>12,.0f}{rows_cpu['base']:>14,.0f}"
          f"{rows_cpu['grown']:>14,.0f}{rows_cpu['grown'] / rows_cpu['base']:>11.2f}x")
    print(f"  {'store MB':<28}{f['store_bytes'] / 1e6:>12,.1f}{b['store_bytes'] / 1e6:>14,.1f}"
          f"{g['store_bytes'] / 1e6:>14,.1f}{g['store_bytes'] / b['store_bytes']:>11.2f}x")
    bpr = {k: r["store_bytes"] / r["rows_written"] for k, r in runs.items()}
    print(f"  {'store bytes per row':<28}{bpr['fixed']:>12,.0f}{bpr['base']:>14,.0f}{bpr['grown']:>14,.0f}"
          f"{bpr['grown'] / bpr['base']:>11.2f}x")
    print(f"  {'driver Python peak MB':<28}{_mb(f['python_peak_mb']):>12}{_mb(b['python_peak_mb']):>14}"
          f"{_mb(g['python_peak_mb']):>14}")
    print(f"  {'JVM peak MB (+executors)':<28}{_mb(f['jvm_peak_mb']):>12}{_mb(b['jvm_peak_mb']):>14}"
          f"{_mb(g['jvm_peak_mb']):>14}")
    rows_dev = max(abs(r - 1) for r in [*c["rows"].values(), *c["rows_base"].values()])
    times = {"spark": c["spark"], "store": c["store"], "spark_cpu": c["cpu"], "store_cpu": c["store_cpu"]}
    verdict = {"rows": rows_dev <= row_tol,
               **{k: None if r is None else bool(abs(r - 1) <= time_tol) for k, r in times.items()}}

    def said(key: str) -> str:
        return "-" if times[key] is None else f"{100 * (times[key] - 1):+.0f}% {'yes' if verdict[key] else 'NO'}"

    print(f"  the model, rows: every level within {100 * row_tol:g}% in the base and grown runs: "
          f"{'yes' if verdict['rows'] else 'NO'} (largest deviation {100 * rows_dev:.2f}%)")
    print(f"  the model, times after the fixed cost, grown run against its prediction (within {100 * time_tol:g}%?): "
          f"wall: Spark {said('spark')}, store {said('store')}; CPU, which other work on the machine does not "
          f"stretch: JVM {said('spark_cpu')}, store's thread {said('store_cpu')}")
    return verdict


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=1_000_000, help="events of the base workload")
    parser.add_argument("--keys", type=int, default=1000, help="keys of the base workload")
    parser.add_argument("--span-seconds", type=int, default=7200, help="event-time span of every workload")
    parser.add_argument("--factor", type=int, default=10, help="events and keys of the grown workload / the base's")
    parser.add_argument("--fixed-events", type=int, default=1000, help="events of the tiny run (the fixed cost)")
    parser.add_argument("--fixed-keys", type=int, default=10)
    parser.add_argument("--zipf-s", type=float, default=0.0, help="key skew of the workloads; 0 = uniform")
    parser.add_argument("--disorder-pct", type=float, default=0.0, help="late events (rows do not depend on it)")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--store", nargs="+", default=["sqlite"], choices=bench_core.STORES)
    parser.add_argument("--repeat", type=int, default=1, help="timed runs of each workload (the median is shown)")
    parser.add_argument("--row-tolerance", type=float, default=0.02)
    parser.add_argument("--time-tolerance", type=float, default=0.30)
    parser.add_argument("--cache", type=Path, default=ROOT / ".bench-data")
    parser.add_argument("--json", action="store_true", help="also print one JSON line per store")
    parser.add_argument("--plan", type=float, nargs=2, metavar=("EVENTS_PER_DAY", "KEYS"),
                        help="print the model for a deployment and exit (no run)")
    parser.add_argument("--trigger-seconds", type=int, default=60, help="--plan: seconds between micro-batches")
    parser.add_argument("--peak", type=float, default=10.0, help="--plan: the peak rate / the average rate")
    args = parser.parse_args()
    if args.plan:
        p = plan(args.plan[0], int(args.plan[1]), zipf_s=args.zipf_s, trigger_s=args.trigger_seconds, peak=args.peak)
        print_plan(p)
        if args.json:
            print(json.dumps(p))
        return
    servers = {s: os.environ.get(bench_core.SERVER_URL_ENV[s]) for s in args.store if s != "sqlite"}
    for store, url in servers.items():
        if not url:
            parser.error(f"--store {store} needs ${bench_core.SERVER_URL_ENV[store]} "
                         "(start the test servers with: eval \"$(bash scripts/services.sh)\")")

    from tests.servers import database_beside
    from tiltframe.engine.spark.session import get_session

    base = workload.Workload(args.events, args.keys, args.span_seconds, disorder_pct=args.disorder_pct,
                             max_lateness_ms=2000 if args.disorder_pct else 0, seed=args.seed, zipf_s=args.zipf_s)
    shapes = {"fixed": replace(base, events=args.fixed_events, keys=args.fixed_keys), "base": base,
              "grown": replace(base, events=args.events * args.factor, keys=args.keys * args.factor)}
    parquet, truth, model = {}, {}, {}
    for name, w in shapes.items():
        t0 = time.perf_counter()
        parquet[name] = generate(w, args.cache)
        truth[name] = duckdb_levels(parquet[name])
        model[name] = model_rows(w.events, w.keys, w.start_ms, w.span_seconds * 1000, w.zipf_s)
        print(f"{name}: {w.events:,} events x {w.keys:,} keys over {w.span_seconds} s in "
              f"{len(list(parquet[name].glob('*.parquet')))} files, counted by DuckDB "
              f"({time.perf_counter() - t0:.1f} s)", flush=True)

    spark = get_session("local[*]")
    cores = spark.sparkContext.defaultParallelism
    gateway = spark.sparkContext._gateway  # type: ignore[attr-defined]
    jvm_pid = gateway.proc.pid if getattr(gateway, "proc", None) is not None else None
    scratch = args.cache / "scaling-run"
    # Untimed: the process's first run pays JIT and code generation (and the store its statements').
    measured_run(spark, parquet["base"], truth["base"], store="sqlite", url=None, data_dir=scratch, jvm_pid=jvm_pid)
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {s: {n: [] for n in shapes} for s in args.store}
    for _ in range(args.repeat):
        for name in shapes:  # taking turns, so that a change of load weighs on every workload
            for store in args.store:
                fresh = nullcontext() if store == "sqlite" else database_beside(servers[store], "tiltframe_scaling_")
                with fresh as url:
                    runs[store][name].append(measured_run(spark, parquet[name], truth[name], store=store, url=url,
                                                          data_dir=scratch, jvm_pid=jvm_pid))
    spark.stop()

    print(f"\nevents and keys grown {args.factor}x over the same {args.span_seconds} s (events per key per second "
          f"the same), keys {'Zipf s=' + str(args.zipf_s) if args.zipf_s > 0 else 'uniform'}; all files in one "
          f"micro-batch; totals checked in every run against DuckDB over the input: events read = aggregated = "
          f"stored, each level's rows, events and sum(quantity), the coarsest level row by row; "
          f"{cores} cores (local[*]); {'median of ' + str(args.repeat) + ' runs, ' if args.repeat > 1 else ''}"
          f"after one untimed run")
    for store in args.store:
        median = {n: sorted(rs, key=lambda r: r["seconds"])[len(rs) // 2] for n, rs in runs[store].items()}
        c = compare(median["fixed"], median["base"], median["grown"], model, args.factor)
        verdict = report(store, median, c, model, cores, args.row_tolerance, args.time_tolerance)
        if args.json:
            slim = {n: {k: v for k, v in r.items() if k != "location"} for n, r in median.items()}
            print(json.dumps({"store": store, "cores": cores, "runs": slim, "model": model, "compare": c,
                              "within": verdict}))


if __name__ == "__main__":
    main()
