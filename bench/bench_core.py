"""Core benchmark: the full streaming pipeline vs plain Spark batch jobs over the same files.

For each reference workload (W1, W2 from ``bench/workload.py``) it runs, in one process:

1. ``groupBy``: one plain Spark batch ``groupBy`` at the finest granularity (seconds), written to noop;
2. ``cascade``: the plain six-level batch cascade (sec -> min -> hour -> day -> month -> year), no store;
3. ``pipeline``: tiltframe's streaming pipeline (file source, availableNow, exactly-once commits) into
   each store of ``--store``: the embedded SQLite store (the default), and a fresh database on a
   PostgreSQL or MySQL/MariaDB server (named by ``--postgres-url``/``--mysql-url``, by default
   TILTFRAME_TEST_POSTGRES_URL/TILTFRAME_TEST_MYSQL_URL; dropped after the run),

checks the pipeline's totals against the input (events counted = events read, stored yearly sums =
input sums) and prints events/s, per-batch latency, where the time goes, and the ratios, per store.  Each
contender runs once untimed (the first run of a plan in a process pays JIT and code generation), then
``--repeat`` times taking turns; the medians are compared.

The pipeline runs with every setting of ``--files-per-batch``: by default all files in one micro-batch
(how ``tiltframe run`` reads a backlog), then micro-batches of 20 files.  A setting that splits the
input also gets the plain cascade run as one batch job per chunk of as many files: the part of the gap
that is Spark's own cost per job.

    python bench/bench_core.py --workload W1 W2            # the reference sizes (10M events each)
    python bench/bench_core.py --workload W1 --events 1000000
    eval "$(bash scripts/services.sh)"                     # the servers on loopback, then:
    python bench/bench_core.py --workload W1 --events 1000000 --store sqlite postgresql mysql
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import statistics
import sys
import time
from contextlib import nullcontext
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq
import workload

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests.servers: fresh databases on the test servers
WORKLOADS = {
    "W1": ["--keys", "1000", "--span-seconds", "7200", "--disorder-pct", "1", "--max-lateness-ms", "2000"],
    "W2": ["--keys", "4000", "--span-seconds", "100"],
}
APP = """
define stream TradeStream (symbol string, price double, quantity long, timestamp long);
define aggregation TradeAggregation
from TradeStream
select symbol, avg(price) as avgPrice, sum(quantity) as total
group by symbol
aggregate by timestamp every sec ... year;
"""
STORES = ("sqlite", "postgresql", "mysql")
#: Where a server store's JDBC URL comes from when no ``--postgres-url``/``--mysql-url`` is given.
SERVER_URL_ENV = {"postgresql": "TILTFRAME_TEST_POSTGRES_URL", "mysql": "TILTFRAME_TEST_MYSQL_URL"}


def generate(name: str, events: int, cache: Path, args: list[str] | None = None) -> Path:
    """The workload's files (generated once into ``cache`` by ``bench/workload.py``); ``args`` overrides the
    workload's options."""
    out = cache / f"{name}-{events}"
    if not (out / "meta.json").exists():
        shutil.rmtree(out, ignore_errors=True)
        options = WORKLOADS[name] if args is None else args
        w, _ = workload.parse([*options, "--events", str(events), "--out", str(out)])
        workload.write(w, out)
    return out


def input_totals(parquet_dir: Path) -> tuple[int, int]:
    table = pq.read_table(parquet_dir, columns=["quantity"])
    return table.num_rows, int(pc.sum(table["quantity"]).as_py())


def plain_groupby(spark, path: str) -> float:
    from pyspark.sql import functions as F

    t0 = time.perf_counter()
    df = spark.read.parquet(path)
    df.groupBy((F.col("timestamp") - F.pmod("timestamp", F.lit(1000))).alias("ts"), "symbol").agg(
        F.sum("price"), F.count(F.lit(1)), F.sum("quantity"), F.max("timestamp")
    ).write.format("noop").mode("overwrite").save()
    return time.perf_counter() - t0


def plain_cascade(spark, path: str | list[str]) -> float:
    """Six levels, each from the one before, each materialized; plain Spark, no store.  ``path``: a
    folder, or the files of one chunk of it."""
    from pyspark.sql import functions as F

    def merge(df, bucket):
        return df.groupBy(bucket.alias("ts"), "symbol").agg(
            F.sum("s").alias("s"), F.sum("c").alias("c"), F.sum("q").alias("q"), F.max("e").alias("e")
        )

    t0 = time.perf_counter()
    df = spark.read.parquet(*([path] if isinstance(path, str) else path))
    level = df.groupBy((F.col("timestamp") - F.pmod("timestamp", F.lit(1000))).alias("ts"), "symbol").agg(
        F.sum("price").alias("s"), F.count(F.lit(1)).alias("c"), F.sum("quantity").alias("q"),
        F.max("timestamp").alias("e"),
    ).persist()
    level.write.format("noop").mode("overwrite").save()
    kept = [level]
    for ms in (60_000, 3_600_000, 86_400_000):
        level = merge(level, F.col("ts") - F.pmod("ts", F.lit(ms))).persist()
        level.write.format("noop").mode("overwrite").save()
        kept.append(level)
    for unit in ("MM", "YEAR"):
        day = F.date_from_unix_date((F.col("ts") / 86_400_000).cast("int"))
        level = merge(level, F.unix_date(F.trunc(day, unit)).cast("long") * 86_400_000).persist()
        level.write.format("noop").mode("overwrite").save()
        kept.append(level)
    elapsed = time.perf_counter() - t0
    for k in kept:
        k.unpersist()
    return elapsed


def chunked_cascade(spark, parquet_dir: Path, files_per_batch: int) -> float:
    """``plain_cascade`` as one batch job per chunk of ``files_per_batch`` files, one after another: what
    Spark itself pays per job, for the same split of the input as the pipeline's micro-batches."""
    files = sorted(str(f) for f in parquet_dir.glob("*.parquet"))
    return sum(plain_cascade(spark, files[i : i + files_per_batch]) for i in range(0, len(files), files_per_batch))


def pipeline(spark, parquet_dir: Path, data_dir: Path, files_per_batch: int | None, app_text: str = APP,
             on_batch=None) -> dict:
    import tiltframe as tf
    from tiltframe.aggregates.layout import AggregationLayout
    from tiltframe.engine.inputs.sources import FileInput
    from tiltframe.model.durations import Granularity, Unit
    from tiltframe.store import store_location
    from tiltframe.store.open_stores import StoreRegistry

    shutil.rmtree(data_dir, ignore_errors=True)
    app = tf.load_app(app_text)
    t0 = time.perf_counter()
    # Exactly the batches asked for: no default bound on bytes per micro-batch.
    source = FileInput(str(parquet_dir), "parquet", files_per_batch, max_bytes_per_trigger=0)
    result = tf.run(app, {"TradeStream": source}, data_dir=data_dir, spark=spark, on_batch=on_batch)
    elapsed = time.perf_counter() - t0
    totals = result.aggregations["TradeAggregation"]
    layout = AggregationLayout.of(app, "TradeAggregation")
    stores = StoreRegistry(data_dir, read_only=True)
    years = stores.for_aggregation(layout.spec).read(layout, Granularity(Unit.YEARS))
    stores.close()
    latencies = sorted(r.seconds for r in totals.reports if not r.skipped)
    return {
        "store": str(store_location(layout.spec.store, data_dir)),
        "seconds": elapsed,
        "events_read": totals.events_read,
        "events_aggregated": totals.events_aggregated,
        "events_moved": totals.events_moved,
        "events_rejected": totals.events_rejected,
        "stored_total": int(years["total_SUM"].sum()),
        "stored_count": int(years["avgPrice_COUNT"].sum()),
        "batches": totals.batches,
        "rows_written": totals.rows_written,
        "spark_seconds": totals.spark_seconds,
        "store_seconds": totals.store_seconds,
        "batch_p50": latencies[len(latencies) // 2] if latencies else 0.0,
        "batch_max": latencies[-1] if latencies else 0.0,
    }


def checked_pipeline(spark, parquet_dir: Path, files_per_batch: int | None, *, totals: tuple[int, int], store: str,
                     url: str | None, data_dir: Path) -> dict:
    """``pipeline`` into ``store`` (``url``: a server database), its totals checked against the input's."""
    from tests.servers import app_with_store

    n, quantity = totals
    p = pipeline(spark, parquet_dir, data_dir, files_per_batch, app_with_store(APP, url)[0])
    # A fast wrong run is no figure: the totals must match the input exactly, in the store asked for.
    assert p["store"].startswith(store) if url else p["store"].endswith(".db"), (store, p["store"])
    assert p["events_read"] == n == p["events_aggregated"], (store, p["events_read"], n)
    assert p["stored_count"] == n, (store, p["stored_count"], n)
    assert p["stored_total"] == quantity, (store, p["stored_total"], quantity)
    return p


def verified(spark, parquet_dir: Path, data_dir: Path) -> float:
    """Seconds ``tf.verify`` takes over the store of the pipeline's last run; it must find no difference."""
    import tiltframe as tf
    from tiltframe.engine.inputs.sources import FileInput

    app = tf.load_app(APP)
    t0 = time.perf_counter()
    result = tf.verify(app, {"TradeStream": FileInput(str(parquet_dir), "parquet")}, data_dir=data_dir,
                       spark=spark)["TradeAggregation"]
    elapsed = time.perf_counter() - t0
    assert result.ok and result.events > 0, result.differences[:5]  # a verify that finds a difference is no figure
    return elapsed


def _batches_label(files_per_batch: int | None) -> str:
    return "all files in one micro-batch" if files_per_batch is None else f"micro-batches of {files_per_batch} files"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workload", nargs="+", default=["W1", "W2"], choices=sorted(WORKLOADS))
    parser.add_argument("--events", type=int, default=10_000_000)
    parser.add_argument("--files-per-batch", type=int, nargs="+", default=[0, 20],
                        help="maxFilesPerTrigger of the streaming runs, one setting after the other (files hold "
                             "100k events each); 0: every file in one micro-batch, as `tiltframe run` reads a "
                             "backlog")
    parser.add_argument("--cache", type=Path, default=ROOT / ".bench-data")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of each contender (medians are printed)")
    parser.add_argument("--json", action="store_true", help="also print one JSON line per workload, setting and store")
    parser.add_argument("--verify", action="store_true",
                        help="then time `tiltframe verify` over the last SQLite run's store (every level recomputed "
                             "from the input and compared), next to the pipeline's time")
    parser.add_argument("--store", nargs="+", default=["sqlite"], choices=STORES,
                        help="where the pipeline writes: the embedded SQLite store and/or a fresh database on a server")
    parser.add_argument("--postgres-url", default=os.environ.get(SERVER_URL_ENV["postgresql"]),
                        help=f"JDBC URL of a PostgreSQL database (default ${SERVER_URL_ENV['postgresql']}); "
                             "the run uses a new database on that server")
    parser.add_argument("--mysql-url", default=os.environ.get(SERVER_URL_ENV["mysql"]),
                        help=f"JDBC URL of a MySQL/MariaDB database (default ${SERVER_URL_ENV['mysql']})")
    args = parser.parse_args()
    servers = {"postgresql": args.postgres_url, "mysql": args.mysql_url}
    for store in args.store:
        if store != "sqlite" and not servers[store]:
            option = "--postgres-url" if store == "postgresql" else "--mysql-url"
            parser.error(f"--store {store} needs {option} or {SERVER_URL_ENV[store]} "
                         "(start the test servers with: eval \"$(bash scripts/services.sh)\")")
    settings: list[int | None] = [n or None for n in dict.fromkeys(args.files_per_batch)]

    from tests.servers import database_beside
    from tiltframe.engine.spark.session import get_session

    spark = get_session("local[*]")
    for name in args.workload:
        folder = generate(name, args.events, args.cache)
        parquet = folder / "parquet"
        n, quantity = input_totals(parquet)
        files = len(list(parquet.glob("*.parquet")))
        meta = json.loads((folder / "meta.json").read_text())
        assert n == meta["events"], f"generator wrote {n} events, meta says {meta['events']}"
        checked = functools.partial(checked_pipeline, spark, parquet, totals=(n, quantity))
        # Settings that split the input also get the plain cascade run as one batch job per chunk.
        chunked = [f for f in settings if f is not None and f < files]

        # Each contender runs once untimed first: the first run of a plan in a process pays JIT and code
        # generation (and the pipeline its SQL statements' compilation), which a long-running job pays once.
        plain_groupby(spark, str(parquet))
        plain_cascade(spark, str(parquet))
        for f in chunked:
            chunked_cascade(spark, parquet, f)
        warmup = args.cache / f"{name}-{args.events}-warmup"
        colds = {}
        for f in settings:
            colds[f] = checked(f, store="sqlite", url=None, data_dir=warmup)
            shutil.rmtree(warmup, ignore_errors=True)
        # Then the contenders take turns, so that a change of load on the machine weighs on all of them.
        groupbys, cascades = [], []
        chunks: dict[int, list[float]] = {f: [] for f in chunked}
        runs: dict[tuple[int | None, str], list[dict]] = {(f, s): [] for f in settings for s in args.store}
        for _ in range(args.repeat):
            groupbys.append(plain_groupby(spark, str(parquet)))
            cascades.append(plain_cascade(spark, str(parquet)))
            for f in chunked:
                chunks[f].append(chunked_cascade(spark, parquet, f))
            for (f, store), ps in runs.items():
                data_dir = args.cache / (f"{name}-{args.events}-run" + ("" if store == "sqlite" else f"-{store}"))
                with nullcontext() if store == "sqlite" else database_beside(servers[store], "tiltframe_bench_") as url:
                    ps.append(checked(f, store=store, url=url, data_dir=data_dir))
        g, c = statistics.median(groupbys), statistics.median(cascades)
        print(f"\n{name}: {n:,} events in {files} files ({' '.join(WORKLOADS[name])}), totals checked in every "
              f"run: events read = events in input = events stored; stored sum(quantity) = input sum")
        print(f"  medians of {args.repeat} runs each, taking turns, after one untimed run of each")
        print(f"  plain Spark groupBy (finest only)   {g:7.1f} s  {n / g:>12,.0f} events/s")
        print(f"  plain Spark six-level cascade       {c:7.1f} s  {n / c:>12,.0f} events/s")
        for f in settings:
            print(f"  {_batches_label(f)}:")
            for store in args.store:
                ps = runs[(f, store)]
                p = sorted(ps, key=lambda r: r["seconds"])[len(ps) // 2]  # the median run, with its breakdown
                label = "tiltframe streaming pipeline" + ("" if args.store == ["sqlite"] else f", {store}")
                print(f"    {label:<34}{p['seconds']:7.1f} s  {n / p['seconds']:>12,.0f} events/s  "
                      f"({p['batches']} micro-batch(es), {p['rows_written']:,} rows stored)")
                print(f"      per batch: p50 {p['batch_p50']:.2f} s, max {p['batch_max']:.2f} s; time in Spark "
                      f"{p['spark_seconds']:.1f} s, in the store {p['store_seconds']:.1f} s "
                      f"({p['rows_written'] / max(p['store_seconds'], 1e-9):,.0f} rows/s), streaming overhead "
                      f"{p['seconds'] - p['spark_seconds'] - p['store_seconds']:.1f} s")
                turns = ", ".join(f"{ci / pi['seconds']:.2f}" for ci, pi in zip(cascades, ps, strict=True))
                print(f"      ratio pipeline / cascade: {c / p['seconds']:.2f} (each turn: {turns})   "
                      f"pipeline / groupBy: {g / p['seconds']:.2f}")
                # ``store`` names the kind (what bench_all keys on); the run's own ``store`` is its location.
                record = {"workload": name, "events": n, "files_per_batch": f, "groupby_s": g, "cascade_s": c,
                          **p, "store": store, "location": p["store"]}
                if f in chunks:
                    k = statistics.median(chunks[f])
                    turns = ", ".join(f"{ki / pi['seconds']:.2f}" for ki, pi in zip(chunks[f], ps, strict=True))
                    print(f"      the plain cascade as {p['batches']} batch jobs, one per micro-batch's files: "
                          f"{k:.1f} s; ratio pipeline / that: {k / p['seconds']:.2f} (each turn: {turns})")
                    record["chunked_cascade_s"] = k
                if args.json:
                    print(json.dumps(record))
            if args.verify and "sqlite" in args.store:
                p = runs[(f, "sqlite")][-1]
                v = verified(spark, parquet, args.cache / f"{name}-{args.events}-run")
                print(f"    tiltframe verify over that store   {v:7.1f} s  (every level recomputed from the input and "
                      f"compared, no difference); verify / pipeline: {v / p['seconds']:.2f}")
            cold = colds[f]
            first = "the process's first pipeline run" if f == settings[0] else "after another setting's"
            print(f"    the untimed warm-up run (sqlite; {first}): {cold['seconds']:.1f} s, first batch "
                  f"{cold['batch_max']:.2f} s")


if __name__ == "__main__":
    main()
