"""A real export's shape through ``tiltframe run``, beside the plain Spark job that computes the same.

The input is ``bench/exports.py``'s year of flights (about twenty attributes, real nulls, monthly files as
pandas writes them) in three forms of the same rows: CSV with the event time as ISO-8601 text, CSV with it
as epoch milliseconds, and Parquet with a timestamp column.  The app is the one a user of such data writes:
two aggregations ``every hour ... year`` in ``America/New_York`` with averages, extremes, sums, a distinct
count and KLL quantile sketches.  Contenders, each a new process (a JVM's start included), taking turns:

- ``tiltframe run`` of the app over each form, into a new embedded store;
- the plain Spark job over the CSV (ISO text) and the Parquet files: ``spark.read`` with the schema, the
  text parsed by ``to_timestamp``, and per aggregation the hour level grouped from the events and each
  coarser level from the finer (the same states: count, sum, min, max, ``hll_sketch_agg``,
  ``kll_sketch_agg_double`` and their merges), every level materialised.

Each run's totals are checked before any figure is printed: tiltframe read, aggregated and stored every row
(the year level's flights, delay sums and miles equal the generator's), and so did the plain job.  It
prints each contender's median and two ratios per the targets: ISO text against epoch ms (time), and
plain Spark against tiltframe (throughput) for CSV and for Parquet.

    python bench/bench_exports.py                          # 336,776 flights in 12 files, three turns
    python bench/bench_exports.py --rows 2000000 --repeat 1
    python bench/bench_exports.py plain --form csv-iso --data DIR   # one plain Spark run (a contender)
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import exports

ROOT = Path(__file__).resolve().parents[1]
PYTHON = sys.executable
ZONE = "America/New_York"
#: The plain job's two rollups and the key of each, as the app has them.
ROLLUPS = {"DelaysByCarrier": "carrier", "TrafficByOrigin": "origin"}


def schema(form: str) -> str:
    """The plain job's reader schema: the CSV's columns as the stream declares them."""
    time_type = {"csv-iso": "string", "csv-ms": "bigint", "parquet": "timestamp"}[form]
    return (
        "year int, month int, day int, dep_time double, sched_dep_time int, dep_delay double, arr_time double, "
        "sched_arr_time int, arr_delay double, carrier string, flight int, tailnum string, origin string, "
        f"dest string, air_time double, distance bigint, hour int, minute int, cancelled boolean, time_hour {time_type}"
    )


def plain(form: str, data: Path) -> dict[str, Any]:
    """One plain Spark run over ``form``: both rollups at every level; the year level's totals."""
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from tiltframe.engine.spark.session import tiltframe_defaults

    t0 = time.perf_counter()
    # The shuffle partitions and driver memory tiltframe gives its own sessions where nobody set them: Spark's
    # 200 partitions made this job ten times slower on small data.
    sized = {k: v for k, v in tiltframe_defaults("local[*]").items()
             if k in ("spark.sql.shuffle.partitions", "spark.driver.memory")}
    builder = SparkSession.builder.master("local[*]").config("spark.ui.enabled", "false")
    spark = builder.config("spark.sql.session.timeZone", ZONE).config(map=sized).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    if form == "parquet":  # pandas writes nanosecond timestamps, which Spark reads only as longs
        spark.conf.set("spark.sql.legacy.parquet.nanosAsLong", "true")
        events = spark.read.parquet(str(data / form))
    else:
        events = spark.read.schema(schema(form)).option("header", True).csv(str(data / form))
    ts = {"csv-iso": F.to_timestamp("time_hour"), "csv-ms": F.timestamp_millis("time_hour"),
          "parquet": F.timestamp_micros(F.floor(F.col("time_hour") / 1000))}[form]
    events = events.withColumn("ts", ts)
    totals: dict[str, Any] = {}
    for name, key in ROLLUPS.items():
        if name == "DelaysByCarrier":
            level = events.groupBy(F.date_trunc("HOUR", "ts").alias("b"), key).agg(
                F.count(F.lit(1)).alias("n"), F.sum("dep_delay").alias("s"), F.count("dep_delay").alias("c"),
                F.min("dep_delay").alias("lo"), F.max("dep_delay").alias("hi"), F.sum("arr_delay").alias("s2"),
                F.count("arr_delay").alias("c2"), F.hll_sketch_agg("tailnum").alias("h"),
                F.kll_sketch_agg_double("arr_delay").alias("k"))

            def merge(df, unit, key=key):
                return df.groupBy(F.date_trunc(unit, "b").alias("b"), key).agg(
                    F.sum("n").alias("n"), F.sum("s").alias("s"), F.sum("c").alias("c"), F.min("lo").alias("lo"),
                    F.max("hi").alias("hi"), F.sum("s2").alias("s2"), F.sum("c2").alias("c2"),
                    F.hll_union_agg("h").alias("h"), F.kll_merge_agg_double("k").alias("k"))
        else:
            level = events.groupBy(F.date_trunc("HOUR", "ts").alias("b"), key).agg(
                F.count(F.lit(1)).alias("n"), F.sum("distance").alias("s"), F.sum("air_time").alias("s2"),
                F.count("air_time").alias("c2"), F.max("arr_delay").alias("hi"), F.hll_sketch_agg("dest").alias("h"),
                F.kll_sketch_agg_double("dep_delay").alias("k"))

            def merge(df, unit, key=key):
                return df.groupBy(F.date_trunc(unit, "b").alias("b"), key).agg(
                    F.sum("n").alias("n"), F.sum("s").alias("s"), F.sum("s2").alias("s2"), F.sum("c2").alias("c2"),
                    F.max("hi").alias("hi"), F.hll_union_agg("h").alias("h"), F.kll_merge_agg_double("k").alias("k"))
        kept, counts = [], []
        for unit in ("HOUR", "DAY", "MONTH", "YEAR"):
            if unit != "HOUR":
                level = merge(level, unit)
            level = level.persist()
            rows = level.collect()  # every level to the driver, as a store would take it
            kept.append(level)
            counts.append(len(rows))
        totals[name] = {"flights": sum(r.n for r in rows), "sum": float(sum(r.s or 0 for r in rows)),
                        "levels_rows": counts}
        for k in kept:
            k.unpersist()
    spark.stop()
    return {"form": form, "seconds": time.perf_counter() - t0, "totals": totals}


def stored_totals(data_dir: Path) -> dict[str, Any]:
    """The year level of both aggregations, read straight from the embedded store's tables."""
    con = sqlite3.connect(data_dir / "tiltframe.db")
    try:
        carrier = con.execute(
            'SELECT sum(AGG_COUNT), sum(avg_dep_SUM), sum(total_dep_SUM) FROM "DelaysByCarrier_YEARS"')
        flights, dep_sum, total_dep = carrier.fetchone()
        origin = con.execute('SELECT sum(AGG_COUNT), sum(miles_SUM) FROM "TrafficByOrigin_YEARS"')
        flights2, miles = origin.fetchone()
    finally:
        con.close()
    return {"flights": [flights, flights2], "dep_delay_sum": [dep_sum, total_dep], "miles": miles}


def run_tiltframe(form: str, data: Path, work: Path) -> float:
    """``tiltframe run`` of the app over ``form`` into a new store; its wall time, after its totals are checked."""
    meta = json.loads((data / "meta.json").read_text())
    store = work / f"store-{form}"
    shutil.rmtree(store, ignore_errors=True)
    cmd = [PYTHON, "-m", "tiltframe", "run", str(data / f"{form}.siddhi"), "-i", f"Flights={data / form}", "-d",
           str(store)]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if done.returncode:
        sys.exit(f"tiltframe run over {form} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    got = stored_totals(store)
    want_flights = [meta["rows"], meta["rows"]]
    if got["flights"] != want_flights or got["miles"] != meta["distance_sum"] or any(
            abs(s - meta["dep_delay_sum"]) > 1e-6 * max(1.0, abs(meta["dep_delay_sum"])) for s in got["dep_delay_sum"]):
        sys.exit(f"tiltframe over {form}: stored totals {got} differ from the input's {meta}")
    shutil.rmtree(store, ignore_errors=True)
    return seconds


def run_plain(form: str, data: Path) -> float:
    """The plain Spark job over ``form`` as a new process; its wall time, after its totals are checked."""
    meta = json.loads((data / "meta.json").read_text())
    t0 = time.perf_counter()
    done = subprocess.run([PYTHON, __file__, "plain", "--form", form, "--data", str(data)], cwd=ROOT,
                          capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if done.returncode:
        sys.exit(f"plain Spark over {form} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    carrier, origin = result["totals"]["DelaysByCarrier"], result["totals"]["TrafficByOrigin"]
    if (carrier["flights"], origin["flights"]) != (meta["rows"], meta["rows"]) or \
            int(origin["sum"]) != meta["distance_sum"] or abs(carrier["sum"] - meta["dep_delay_sum"]) > 1e-6 * abs(
            meta["dep_delay_sum"]):
        sys.exit(f"plain Spark over {form}: totals {result['totals']} differ from the input's {meta}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", nargs="?", default="bench", choices=["bench", "plain"])
    parser.add_argument("--rows", type=int, default=336_776)
    parser.add_argument("--files", type=int, default=12)
    parser.add_argument("--repeat", type=int, default=3, help="turns of every contender")
    parser.add_argument("--form", choices=exports.FORMS, help="plain: the form to read")
    parser.add_argument("--data", type=Path, help="plain: the generated folder")
    parser.add_argument("--cache", type=Path, default=ROOT / ".bench-data")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON line at the end")
    args = parser.parse_args()
    if args.what == "plain":
        print(json.dumps(plain(args.form, args.data)))
        return
    data = args.cache / f"exports-{args.rows}-{args.files}"
    if not (data / "meta.json").exists():
        shutil.rmtree(data, ignore_errors=True)
        exports.write(args.rows, data, files=args.files)
    contenders = {
        "tiltframe csv-iso": lambda: run_tiltframe("csv-iso", data, args.cache),
        "tiltframe csv-ms": lambda: run_tiltframe("csv-ms", data, args.cache),
        "tiltframe parquet": lambda: run_tiltframe("parquet", data, args.cache),
        "plain csv-iso": lambda: run_plain("csv-iso", data),
        "plain parquet": lambda: run_plain("parquet", data),
    }
    times: dict[str, list[float]] = {name: [] for name in contenders}
    for turn in range(args.repeat):
        for name, run in contenders.items():
            times[name].append(run())
            print(f"turn {turn + 1}: {name} {times[name][-1]:.1f} s (totals checked)", flush=True)
    median = {name: statistics.median(t) for name, t in times.items()}
    ratios = {
        "iso_over_ms": median["tiltframe csv-iso"] / median["tiltframe csv-ms"],
        "csv_tiltframe_over_plain": median["plain csv-iso"] / median["tiltframe csv-iso"],
        "parquet_tiltframe_over_plain": median["plain parquet"] / median["tiltframe parquet"],
    }
    turns = {
        "iso_over_ms": [a / b for a, b in zip(times["tiltframe csv-iso"], times["tiltframe csv-ms"], strict=True)],
        "csv_tiltframe_over_plain": [a / b for a, b in zip(times["plain csv-iso"], times["tiltframe csv-iso"],
                                                            strict=True)],
        "parquet_tiltframe_over_plain": [a / b for a, b in zip(times["plain parquet"], times["tiltframe parquet"],
                                                                strict=True)],
    }
    print(f"\n{args.rows:,} flights in {args.files} files; medians of {args.repeat} turns, each a new process")
    for name, seconds in median.items():
        print(f"  {name:<20} {seconds:7.1f} s")
    print(f"  ISO text / epoch ms (time; target <= 1.2):             {ratios['iso_over_ms']:.2f}  "
          f"(turns: {', '.join(f'{r:.2f}' for r in turns['iso_over_ms'])})")
    print(f"  CSV: tiltframe / plain Spark (throughput; >= 0.9):     {ratios['csv_tiltframe_over_plain']:.2f}  "
          f"(turns: {', '.join(f'{r:.2f}' for r in turns['csv_tiltframe_over_plain'])})")
    print(f"  Parquet: tiltframe / plain Spark (throughput; >= 0.9): {ratios['parquet_tiltframe_over_plain']:.2f}  "
          f"(turns: {', '.join(f'{r:.2f}' for r in turns['parquet_tiltframe_over_plain'])})")
    if args.json:
        print(json.dumps({"rows": args.rows, "files": args.files, "seconds": times, "medians": median,
                          "ratios": ratios, "turns": turns}))


if __name__ == "__main__":
    main()
