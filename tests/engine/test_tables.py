"""Pre-aggregated tables (EventQL) on Spark: rows dealt round-robin to the workers, each storing its own
partial rows, and every retrieval equal to a GROUP BY over the raw rows."""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest
import sqlalchemy as sa

import tiltframe as tf
from tests.servers import SERVER_STORES, fresh_database
from tiltframe.store import DB_FILE_NAME

APP = """
@preaggregate(workers='3')
define table AdImpressions (time long, site string, clicked int, cost double)
    preaggregate by time every min
    dimensions site
    measures count() as impressions, sum(clicked) as clicks, mean(cost) as avgCost, min(cost) as low,
             max(cost) as high;
"""
SCHEMA = "time long, site string, clicked int, cost double"
T0 = 1_704_067_200_000  # 2024-01-01 00:00:00 GMT


def impressions(n: int, seed: int) -> pd.DataFrame:
    """Ad impressions over three minutes; one site gets most of them (a hot key)."""
    rng = np.random.default_rng(seed)
    sites = np.where(rng.random(n) < 0.7, "hot.example", rng.choice(["a.example", "b.example", "c.example"], n))
    return pd.DataFrame({"time": T0 + rng.integers(0, 180_000, n), "site": sites,
                         "clicked": (rng.random(n) < 0.1).astype(int), "cost": rng.integers(1, 1000, n) / 100})


def oracle(rows: pd.DataFrame) -> pd.DataFrame:
    con = duckdb.connect()
    con.register("rows", rows)
    return con.execute(
        "SELECT (time // 60000) * 60000 AS AGG_TIMESTAMP, site, count(*) AS impressions, sum(clicked) AS clicks, "
        "avg(cost) AS avgCost, min(cost) AS low, max(cost) AS high FROM rows GROUP BY ALL ORDER BY ALL").df()


@pytest.mark.slow
def test_workers_store_partial_rows_and_retrieval_merges_them(spark, tmp_path: Path) -> None:
    app = tf.load_app(APP)
    rows = impressions(3000, 1)
    # Two inserts: the second merges into the workers' rows; a third bypasses pre-aggregation.
    for part in (rows.iloc[:1500], rows.iloc[1500:2500]):
        totals = tf.insert(app, "AdImpressions", spark.createDataFrame(part, SCHEMA).repartition(4),
                           data_dir=tmp_path, spark=spark)
        assert totals.events_aggregated == len(part)
    folder = tmp_path / "raw"
    folder.mkdir()
    rows.iloc[2500:].to_json(folder / "rows.jsonl", orient="records", lines=True)
    assert tf.insert(app, "AdImpressions", folder / "rows.jsonl", data_dir=tmp_path, spark=spark,
                     preaggregate=False).events_aggregated == 500
    got = tf.query(app, 'from AdImpressions within 0L, 4102444800000L per "minutes" select *', data_dir=tmp_path)
    want = oracle(rows)
    assert list(got["AGG_TIMESTAMP"]) == list(want["AGG_TIMESTAMP"]) and list(got["site"]) == list(want["site"])
    for column in ("impressions", "clicks", "low", "high"):
        assert list(got[column]) == list(want[column]), column
    np.testing.assert_allclose(got["avgCost"], want["avgCost"], rtol=1e-12)

    engine = sa.create_engine(f"sqlite:///{tmp_path / DB_FILE_NAME}")
    with engine.connect() as conn:
        stored = pd.read_sql('SELECT AGG_TIMESTAMP, site, SHARD_ID, AGG_COUNT FROM "AdImpressions_MINUTES"', conn)
    engine.dispose()
    raw = stored["SHARD_ID"].str.startswith("row-")
    assert raw.sum() == 500 and (stored.loc[raw, "AGG_COUNT"] == 1).all()  # one stored row per bypassed row
    workers = stored[~raw]
    assert workers.groupby(["AGG_TIMESTAMP", "site"])["SHARD_ID"].nunique().max() <= 3  # N x C rows
    hot = workers[workers["site"] == "hot.example"].groupby("AGG_TIMESTAMP")["SHARD_ID"].nunique()
    assert (hot == 3).all()  # the hot key is spread over every worker, not pinned to one
    assert stored["AGG_COUNT"].sum() == len(rows)

    # Compaction merges the closed minutes' partial rows into one per site; the answers stay the same.
    removed = tf.compact(app, data_dir=tmp_path)["AdImpressions"]
    engine = sa.create_engine(f"sqlite:///{tmp_path / DB_FILE_NAME}")
    with engine.connect() as conn:
        after = pd.read_sql('SELECT AGG_TIMESTAMP, site, SHARD_ID FROM "AdImpressions_MINUTES"', conn)
    engine.dispose()
    assert removed == len(stored) - len(after) > 0
    closed = after[after["AGG_TIMESTAMP"] < T0 + 120_000]
    assert (closed["SHARD_ID"] == "*").all() and not closed.duplicated(["AGG_TIMESTAMP", "site"]).any()
    again = tf.query(app, 'from AdImpressions within 0L, 4102444800000L per "minutes" select *', data_dir=tmp_path)
    pd.testing.assert_frame_equal(again, got)
    assert tf.compact(app, data_dir=tmp_path) == {"AdImpressions": 0}


@pytest.mark.slow
@pytest.mark.parametrize("backend", SERVER_STORES)
def test_a_table_with_store_lives_on_a_server(spark, tmp_path: Path, backend: str) -> None:
    """``@store`` on ``define table``: the workers' partial rows go to the server, SELECT merges them."""
    rows = impressions(2000, 2)
    with fresh_database(backend) as url:
        app = tf.load_app(f"@store(type='rdbms', jdbc.url='{url}')\n{APP}")
        assert tf.insert(app, "AdImpressions", spark.createDataFrame(rows, SCHEMA).repartition(3), data_dir=tmp_path,
                         spark=spark).events_aggregated == len(rows)
        got = tf.select(app, "SELECT site, clicks, impressions FROM AdImpressions GROUP BY site ORDER BY site",
                        data_dir=tmp_path)
        partials = tf.select(app, "SELECT * FROM partials(AdImpressions)", data_dir=tmp_path)
    want = oracle(rows).groupby("site", as_index=False)[["clicks", "impressions"]].sum()
    assert got.to_dict("records") == want.to_dict("records")
    assert partials["SHARD_ID"].nunique() == 3 and len(partials) > len(oracle(rows))  # N x C rows on the server
    assert not (tmp_path / DB_FILE_NAME).exists()  # nothing went to the embedded store
