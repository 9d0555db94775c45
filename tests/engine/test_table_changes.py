"""A pre-aggregated table's definition changes while it holds rows: the stored rows follow, on every store.

Each step inserts more rows under a new definition; every answer is checked against DuckDB over the rows
inserted so far.  A measure added has no value for the rows stored before it, so its oracle reads only
the rows inserted since; a dimension removed merges the stored rows over its values.
"""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest
import sqlalchemy as sa

import tiltframe as tf
from tests.servers import STORES, fresh_database
from tiltframe.errors import DefinitionError, StoreError
from tiltframe.model.aggregations import StoreSpec
from tiltframe.store.urls import store_target

T0 = 1_704_067_200_000  # 2024-01-01 00:00:00 GMT
COLUMNS = "(time long, site string, country string, clicked int, cost double)"
V1 = f"""define table Ads {COLUMNS} preaggregate by time every min dimensions site, country
    measures count() as impressions, sum(clicked) as clicks, max(cost) as top;"""
# top removed, avgCost and users' cost quantiles added, clicks kept; workers changed.
V2 = f"""@preaggregate(workers='2')
define table Ads {COLUMNS} preaggregate by time every min dimensions site, country
    measures count() as impressions, sum(clicked) as clicks, mean(cost) as avgCost, quantiles_approx(cost) as q;"""
# country is no longer a dimension: the stored rows merge over it.
V3 = f"""define table Ads {COLUMNS} preaggregate by time every min dimensions site
    measures count() as impressions, sum(clicked) as clicks, mean(cost) as avgCost, quantiles_approx(cost) as q;"""
PER_SITE_COUNTRY = "SELECT time, site, country, impressions, clicks{} FROM Ads ORDER BY time, site, country"
PER_SITE = "SELECT time, site, impressions, clicks, avgCost, q_p50 FROM Ads ORDER BY time, site"


def rows(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "time": T0 + rng.integers(0, 180_000, n), "site": rng.choice(["a.example", "b.example", "c.example"], n),
        "country": rng.choice(["DE", "FR"], n), "clicked": (rng.random(n) < 0.2).astype(int),
        "cost": rng.integers(1, 1000, n) / 100,
    })


def oracle(all_rows: pd.DataFrame, since: pd.DataFrame, keys: str) -> pd.DataFrame:
    """Counts over every row; the mean of cost over the rows inserted since it was declared (NULL else)."""
    con = duckdb.connect()
    con.register("all_rows", all_rows)
    con.register("since", since)
    bucket = "(time // 60000) * 60000 AS time"
    return con.execute(
        f"SELECT a.*, s.avgCost FROM (SELECT {bucket}, {keys}, count(*) AS impressions, sum(clicked) AS clicks "
        f"FROM all_rows GROUP BY ALL) a LEFT JOIN (SELECT {bucket}, {keys}, avg(cost) AS avgCost FROM since "
        f"GROUP BY ALL) s USING (time, {keys}) ORDER BY ALL").df()


def insert(app_text: str, part: pd.DataFrame, url: str | None, data_dir: Path, spark) -> tf.AppSpec:
    app = tf.load_app(f"@store(type='rdbms', jdbc.url='{url}')\n{app_text}" if url else app_text)
    frame = spark.createDataFrame(part, "time long, site string, country string, clicked int, cost double")
    assert tf.insert(app, "Ads", frame.repartition(3), data_dir=data_dir, spark=spark).events_aggregated == len(part)
    return app


@pytest.mark.slow
@pytest.mark.parametrize("backend", STORES)
def test_measures_and_dimensions_change_over_stored_rows(spark, tmp_path: Path, backend: str) -> None:
    a, b, c = rows(600, 1), rows(500, 2), rows(400, 3)
    with nullcontext(None) if backend == "sqlite" else fresh_database(backend) as url:
        insert(V1, a, url, tmp_path, spark)

        # A reader with the new definition before it is applied is told how to apply it.
        v2 = tf.load_app(f"@store(type='rdbms', jdbc.url='{url}')\n{V2}" if url else V2)
        with pytest.raises(StoreError, match="applied by the next insert into it, or now by: tiltframe migrate"):
            tf.select(v2, "SELECT * FROM Ads", data_dir=tmp_path)
        assert tf.migrate(v2, data_dir=tmp_path)["Ads"] == [
            "workers change from 4 to 2; stored partial rows keep merging",
            "measure top removed",
            "measure avgCost added: intervals stored before hold no value (NULL) for it",
            "measure q added: intervals stored before hold no value (NULL) for it",
        ]
        assert tf.migrate(v2, data_dir=tmp_path)["Ads"] == []  # a second run changes nothing
        insert(V2, b, url, tmp_path, spark)
        got = tf.select(v2, PER_SITE_COUNTRY.format(", avgCost"), data_dir=tmp_path)
        want = oracle(pd.concat([a, b]), b, "site, country")
        pd.testing.assert_frame_equal(got, want, check_dtype=False)
        with pytest.raises(DefinitionError, match="top"):
            tf.select(v2, PER_SITE_COUNTRY.format(", top"), data_dir=tmp_path)
        assert not any(c.endswith("_MAX") for c in stored_columns(backend, url, tmp_path))

        v3 = insert(V3, c, url, tmp_path, spark)
        got = tf.select(v3, PER_SITE, data_dir=tmp_path)
        want = oracle(pd.concat([a, b, c]), pd.concat([b, c]), "site")
        pd.testing.assert_frame_equal(got.drop(columns="q_p50"), want, check_dtype=False)
        assert got["q_p50"].notna().all()  # every minute and site got rows since q was declared
        assert "country" not in stored_columns(backend, url, tmp_path)

        # What the stored rows cannot follow is refused, and the table keeps answering as before.
        back = V3.replace("dimensions site", "dimensions site, country")
        with pytest.raises(StoreError, match="no value for the new dimension"):
            insert(back, c, url, tmp_path, spark)
        with pytest.raises(DefinitionError, match="granularity cannot change"):
            insert(V3.replace("every min", "every hour"), c, url, tmp_path, spark)
        pd.testing.assert_frame_equal(tf.select(v3, PER_SITE, data_dir=tmp_path), got)


def stored_columns(backend: str, url: str | None, data_dir: Path) -> list[str]:
    engine = sa.create_engine(f"sqlite:///{data_dir / 'tiltframe.db'}" if backend == "sqlite"
                              else store_target(StoreSpec("rdbms", url)))
    try:
        with engine.connect() as conn:
            return [c["name"] for c in sa.inspect(conn).get_columns("Ads_MINUTES")]
    finally:
        engine.dispose()
