"""Pre-aggregation benchmark: EventQL's ad-network shape (workload W2) in a pre-aggregated table and as raw
rows, both in one PostgreSQL database.

W2 (``bench/workload.py``: 100k events/s for 100 s over 4000 keys) is read as ad impressions: the
key is the site, and an impression is a click when its ``quantity`` is at most 10 (1% of them).  In one
process, on a fresh database of the PostgreSQL server named by ``--postgres-url`` (by default
``$TILTFRAME_TEST_POSTGRES_URL``; dropped afterwards), it

1. inserts the impressions into the table below with ``tf.insert`` (Spark pre-aggregates them per minute
   and site on 4 workers; up to 4 x C partial rows per minute), then compacts it (``tf.compact``: the
   closed minute keeps C rows);
2. copies the same impressions, unaggregated, into a plain table ``ad_impressions_raw`` (``COPY``, then
   ``VACUUM ANALYZE``);
3. answers the seed's query, the click rate of every site, on each: over the raw rows in SQL; over the
   pre-aggregated table in SQL (the same query, merging the partial rows: sums of sums); and through
   ``tf.select`` (what a user runs: the partial rows merged in the database's GROUP BY, the rate computed
   in Python).  Each is run once to warm
   the caches, then timed ``--repeat`` times; the median counts.

Before any figure it checks the totals: events inserted = events read = events in the input, stored
impressions and clicks = the input's (DuckDB over the Parquet files), and every answer equal to DuckDB's
per-site click rates.  It prints stored rows as a share of input rows (the seed estimates 0.07% for its
shape, with C rows per minute) and the query speed-ups as ratios (the seed: 1500x).

    eval "$(bash scripts/services.sh)"                  # the PostgreSQL server on loopback, then:
    python bench/bench_preaggregation.py                # W2: 10M impressions
    python bench/bench_preaggregation.py --events 1000000
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import sqlalchemy as sa
from bench_core import ROOT, SERVER_URL_ENV, WORKLOADS, generate

WORKERS = 4
CLICK_QUANTITY = 10  # quantity 1..1000 uniform: 1% of the impressions are clicks
APP = f"""
@store(type='rdbms', jdbc.url='{{url}}')
@preaggregate(workers='{WORKERS}')
define table AdImpressions (time long, site string, clicked int)
    preaggregate by time every min
    dimensions site
    measures count() as impressions, sum(clicked) as clicks;
"""
RAW = "ad_impressions_raw"
RAW_QUERY = f"SELECT site, sum(clicked) * 1.0 / count(*) AS rate FROM {RAW} GROUP BY site"
STORED_QUERY = ('SELECT site, sum("clicks_SUM") * 1.0 / sum("impressions_COUNT") AS rate '
                'FROM "AdImpressions_MINUTES" GROUP BY site')
SELECT = "SELECT site, clicks * 1.0 / impressions AS rate FROM AdImpressions GROUP BY site"


def impressions(batch: pa.RecordBatch) -> pa.Table:
    """A batch of W2 trades as impressions (time, site, clicked)."""
    clicked = pc.cast(pc.less_equal(batch["quantity"], CLICK_QUANTITY), pa.int32())
    return pa.table({"time": batch["timestamp"], "site": batch["symbol"], "clicked": clicked})


def oracle(parquet: Path) -> pd.DataFrame:
    """Impressions and clicks per site over the raw events, computed apart from tiltframe and PostgreSQL."""
    return duckdb.sql(
        f"SELECT symbol AS site, count(*) AS impressions, "
        f"sum(CASE WHEN quantity <= {CLICK_QUANTITY} THEN 1 ELSE 0 END) AS clicks "
        f"FROM read_parquet('{parquet}/*.parquet') GROUP BY symbol ORDER BY symbol").df()


def copy_raw(engine: sa.Engine, parquet: Path) -> tuple[int, float]:
    """The impressions as plain rows in PostgreSQL (``COPY``, file by file); returns rows and seconds."""
    rows, t0 = 0, time.perf_counter()
    with engine.begin() as conn:
        conn.exec_driver_sql(f"CREATE TABLE {RAW} (time bigint NOT NULL, site text NOT NULL, clicked int NOT NULL)")
        cursor = conn.connection.dbapi_connection.cursor()  # psycopg 3: COPY streams the CSV text
        with cursor.copy(f"COPY {RAW} (time, site, clicked) FROM STDIN WITH (FORMAT csv)") as copy:
            for file in sorted(parquet.glob("*.parquet")):
                for batch in pq.ParquetFile(file).iter_batches(batch_size=200_000):
                    table = impressions(batch)
                    out = io.BytesIO()
                    pacsv.write_csv(table, out, pacsv.WriteOptions(include_header=False))
                    copy.write(out.getvalue())
                    rows += table.num_rows
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql(f"VACUUM ANALYZE {RAW}")
    return rows, time.perf_counter() - t0


def timed(run: Callable[[], pd.DataFrame], repeat: int) -> tuple[pd.DataFrame, float]:
    """The answer of ``run`` and its median time over ``repeat`` runs after a warm-up run."""
    answer = run()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
    return answer, statistics.median(times)


def check_rates(label: str, got: pd.DataFrame, want: pd.DataFrame) -> None:
    got = got.sort_values("site", ignore_index=True)
    assert list(got["site"]) == list(want["site"]), f"{label}: other sites than the input's"
    rates = want["clicks"] / want["impressions"]
    worst = float((got["rate"].astype(float) - rates).abs().max())
    assert worst < 1e-12, f"{label}: click rates differ from the input's by up to {worst}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=10_000_000)
    parser.add_argument("--repeat", type=int, default=5, help="timed runs of each query (the median counts)")
    parser.add_argument("--cache", type=Path, default=ROOT / ".bench-data")
    parser.add_argument("--postgres-url", default=os.environ.get(SERVER_URL_ENV["postgresql"]),
                        help=f"JDBC URL of a PostgreSQL database (default ${SERVER_URL_ENV['postgresql']}); "
                             "the run uses a new database on that server")
    args = parser.parse_args()
    if not args.postgres_url:
        parser.error(f"needs --postgres-url or {SERVER_URL_ENV['postgresql']} "
                     "(start the test servers with: eval \"$(bash scripts/services.sh)\")")

    import tiltframe as tf
    from tests.servers import database_beside
    from tiltframe.engine.spark.session import get_session
    from tiltframe.store.urls import store_target

    parquet = generate("W2", args.events, args.cache) / "parquet"
    n = sum(pq.read_metadata(f).num_rows for f in parquet.glob("*.parquet"))
    want = oracle(parquet)
    assert int(want["impressions"].sum()) == n, (int(want["impressions"].sum()), n)
    clicks = int(want["clicks"].sum())
    spark = get_session("local[*]")
    data_dir = args.cache / f"W2-{args.events}-preaggregation"
    shutil.rmtree(data_dir, ignore_errors=True)

    with database_beside(args.postgres_url, "tiltframe_bench_") as url:
        app = tf.load_app(APP.format(url=url))
        engine = sa.create_engine(store_target(app.aggregation("AdImpressions").store))
        try:
            rows = spark.read.parquet(str(parquet)).selectExpr(
                "timestamp AS time", "symbol AS site", f"CAST(quantity <= {CLICK_QUANTITY} AS INT) AS clicked")
            t0 = time.perf_counter()
            totals = tf.insert(app, "AdImpressions", rows, data_dir=data_dir, spark=spark)
            insert_s = time.perf_counter() - t0
            # A fast wrong run is no figure: every impression counted once, the stored sums the input's.
            assert totals.events_read == n == totals.events_aggregated, (totals.events_read, n)
            with engine.connect() as conn:
                stored = conn.exec_driver_sql(
                    'SELECT count(*), sum("impressions_COUNT"), sum("clicks_SUM") FROM "AdImpressions_MINUTES"').one()
            assert (int(stored[1]), int(stored[2])) == (n, clicks), (stored, n, clicks)
            partial_rows = int(stored[0])

            raw_rows, copy_s = copy_raw(engine, parquet)
            assert raw_rows == n, (raw_rows, n)

            def sql(query: str) -> Callable[[], pd.DataFrame]:
                def run() -> pd.DataFrame:
                    with engine.connect() as conn:
                        return pd.read_sql_query(sa.text(query), conn)
                return run

            raw_answer, raw_s = timed(sql(RAW_QUERY), args.repeat)
            check_rates("raw rows", raw_answer, want)
            partial_answer, partial_s = timed(sql(STORED_QUERY), args.repeat)
            check_rates("partial rows", partial_answer, want)
            select_answer, select_s = timed(lambda: tf.select(app, SELECT, data_dir=data_dir), args.repeat)
            check_rates("tf.select", select_answer, want)

            removed = tf.compact(app, data_dir=data_dir)["AdImpressions"]
            compacted_rows = partial_rows - removed
            compacted_answer, compacted_s = timed(sql(STORED_QUERY), args.repeat)
            check_rates("compacted rows", compacted_answer, want)
            compacted_select, compacted_select_s = timed(lambda: tf.select(app, SELECT, data_dir=data_dir),
                                                         args.repeat)
            check_rates("tf.select after compaction", compacted_select, want)
            with engine.connect() as conn:
                minutes = conn.exec_driver_sql('SELECT count(DISTINCT "AGG_TIMESTAMP") FROM "AdImpressions_MINUTES"'
                                               ).scalar_one()
        finally:
            engine.dispose()

    sites = len(want)
    print(f"\nW2: {n:,} impressions ({' '.join(WORKLOADS['W2'])}), {sites:,} sites, {minutes} minute(s), "
          f"{clicks:,} clicks; totals checked: events inserted = read = input, stored impressions and clicks = "
          f"input, every answer = DuckDB's per-site click rates")
    print(f"  insert, pre-aggregated by Spark ({WORKERS} workers)  {insert_s:7.1f} s  {n / insert_s:>12,.0f} rows/s")
    print(f"  COPY of the raw rows into PostgreSQL          {copy_s:7.1f} s  {n / copy_s:>12,.0f} rows/s")
    print(f"  stored rows: raw {n:,}; partial rows {partial_rows:,} ({partial_rows / n:.3%} of input, "
          f"at most {WORKERS} x C = {WORKERS * sites * minutes:,}); compacted {compacted_rows:,} "
          f"({compacted_rows / n:.3%}; C = {sites * minutes:,} when every minute is closed)")
    print(f"  per-site click rate, median of {args.repeat} (PostgreSQL, warm cache):")
    print(f"    SQL over raw rows                {raw_s * 1000:9.1f} ms")
    for label, seconds in (("SQL over partial rows", partial_s), ("SQL over compacted rows", compacted_s),
                           ("tf.select over partial rows", select_s),
                           ("tf.select over compacted rows", compacted_select_s)):
        print(f"    {label:<32} {seconds * 1000:9.1f} ms  ratio raw / this {raw_s / seconds:8.1f}x")

if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
