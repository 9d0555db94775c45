"""SELECT over a pre-aggregated table, checked against DuckDB grouping the raw rows: whatever the workers
and the rows inserted without pre-aggregation, every answer equals a GROUP BY over floored timestamps."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest

import tiltframe as tf
from tiltframe.aggregates.layout import AggregationLayout
from tiltframe.lang.siddhiql.parser import parse_table_query
from tiltframe.model.app import AppSpec
from tiltframe.retrieval.select import _time_range, select
from tiltframe.store.base import Store
from tiltframe.store.open_stores import StoreRegistry

APP = """
@preaggregate(workers='3')
define table AdImpressions (time long, site string, device string, clicked int, cost double, user string)
    preaggregate by time every min
    dimensions site, device
    measures count() as impressions, sum(clicked) as clicks, mean(cost) as avgCost, min(cost) as low,
             max(cost) as high, cardinality_approx(user) as users;
"""
SCHEMA = "time long, site string, device string, clicked int, cost double, user string"
T0 = 1_704_067_200_000  # 2024-01-01 00:00:00 GMT
MIN = 60_000
SITES = ["hot.example", "a.example", "b.example", "c.example"]


def impressions(n: int, seed: int) -> pd.DataFrame:
    """Impressions over four minutes; one site gets most of them (a hot key)."""
    rng = np.random.default_rng(seed)
    sites = np.where(rng.random(n) < 0.7, SITES[0], rng.choice(SITES[1:], n))
    return pd.DataFrame({
        "time": T0 + rng.integers(0, 4 * MIN, n),
        "site": sites,
        "device": rng.choice(["phone", "desktop"], n),
        "clicked": (rng.random(n) < 0.1).astype(int),
        "cost": rng.integers(1, 1000, n) / 100,
        "user": [f"u{u}" for u in rng.integers(0, 300, n)],
    })


@dataclass
class Table:
    app: AppSpec
    store: Store
    rows: pd.DataFrame

    def select(self, text: str) -> pd.DataFrame:
        return select(self.app, parse_table_query(text, self.app), self.store)

    def oracle(self, sql: str) -> pd.DataFrame:
        """``sql`` over the raw rows, with ``minute`` the floored time column."""
        con = duckdb.connect()
        con.register("raw", self.rows)
        con.execute(f"CREATE VIEW rows AS SELECT *, (time // {MIN}) * {MIN} AS minute FROM raw")
        return con.execute(sql).df()


@pytest.fixture(scope="module")
def table(spark, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Table]:
    """One table, inserted into once: pre-aggregated by the workers, the last rows each stored alone."""
    data_dir: Path = tmp_path_factory.mktemp("select")
    app = tf.load_app(APP)
    rows = impressions(2000, 7)
    tf.insert(app, "AdImpressions", spark.createDataFrame(rows.iloc[:1600], SCHEMA).repartition(3),
              data_dir=data_dir, spark=spark)
    tf.insert(app, "AdImpressions", rows.iloc[1600:], data_dir=data_dir, spark=spark, preaggregate=False)
    stores = StoreRegistry(data_dir, read_only=True)
    yield Table(app, stores.for_aggregation(AggregationLayout.of(app, "AdImpressions").spec), rows)
    stores.close()


def assert_frames(got: pd.DataFrame, want: pd.DataFrame, exact: tuple[str, ...], close: tuple[str, ...] = ()) -> None:
    assert len(got) == len(want)
    for column in exact:
        assert list(got[column]) == list(want[column]), column
    for column in close:
        np.testing.assert_allclose(got[column].to_numpy(dtype=float), want[column].to_numpy(dtype=float), rtol=1e-12)


@pytest.mark.slow
def test_default_aggregation_clause_merges_per_interval_and_dimensions(table: Table) -> None:
    got = table.select("SELECT * FROM AdImpressions")
    assert list(got.columns) == ["time", "site", "device", "impressions", "clicks", "avgCost", "low", "high", "users"]
    want = table.oracle(
        "SELECT minute AS time, site, device, count(*) AS impressions, sum(clicked) AS clicks, avg(cost) AS avgCost, "
        "min(cost) AS low, max(cost) AS high, count(DISTINCT user) AS users FROM rows GROUP BY ALL ORDER BY ALL")
    assert_frames(got, want, ("time", "site", "device", "impressions", "clicks", "low", "high"), ("avgCost",))
    for column in ("time", "impressions", "clicks", "users"):
        assert got[column].dtype == "int64", column  # whole numbers stay whole
    np.testing.assert_allclose(got["users"], want["users"], rtol=0.1)  # an HLL sketch: loosely


@pytest.mark.slow
def test_click_rate_per_site_merges_over_every_interval(table: Table) -> None:
    got = table.select("SELECT site, clicks * 1.0 / impressions AS rate, users FROM AdImpressions GROUP BY site")
    want = table.oracle("SELECT site, sum(clicked) * 1.0 / count(*) AS rate, count(DISTINCT user) AS users "
                        "FROM rows GROUP BY site ORDER BY site")
    assert_frames(got, want, ("site",), ("rate",))
    np.testing.assert_allclose(got["users"], want["users"], rtol=0.1)
    whole = table.select("SELECT site, clicks / impressions AS rate FROM AdImpressions GROUP BY site")
    assert whole["rate"].dtype == "int64" and (whole["rate"] == 0).all()  # / of whole numbers is whole


@pytest.mark.slow
def test_group_by_time_merges_the_dimensions(table: Table) -> None:
    got = table.select("SELECT time, impressions, avgCost, high FROM AdImpressions GROUP BY time")
    want = table.oracle("SELECT minute AS time, count(*) AS impressions, avg(cost) AS avgCost, max(cost) AS high "
                        "FROM rows GROUP BY minute ORDER BY minute")
    assert_frames(got, want, ("time", "impressions", "high"), ("avgCost",))
    assert len(got) == 4


@pytest.mark.slow
def test_aggregate_calls_without_group_by_make_one_group(table: Table) -> None:
    got = table.select("SELECT sum(clicks) AS clicks, mean(avgCost) AS avgCost, impressions FROM AdImpressions")
    want = table.oracle("SELECT sum(clicked) AS clicks, avg(cost) AS avgCost, count(*) AS impressions FROM rows")
    assert_frames(got, want, ("clicks", "impressions"), ("avgCost",))


@pytest.mark.slow
def test_where_filters_time_and_dimensions_before_merging(table: Table) -> None:
    got = table.select(
        f"SELECT time, device, clicks, low FROM AdImpressions WHERE time >= {T0 + MIN} AND {T0 + 3 * MIN} > time "
        "AND site = 'hot.example' GROUP BY time, device")
    want = table.oracle(
        f"SELECT minute AS time, device, sum(clicked) AS clicks, min(cost) AS low FROM rows WHERE minute >= {T0 + MIN} "
        f"AND minute < {T0 + 3 * MIN} AND site = 'hot.example' GROUP BY ALL ORDER BY ALL")
    assert_frames(got, want, ("time", "device", "clicks", "low"))
    assert len(got) == 4
    nothing = table.select("SELECT site, clicks FROM AdImpressions WHERE site = 'nowhere' GROUP BY site")
    assert nothing.empty and list(nothing.columns) == ["site", "clicks"]


@pytest.mark.slow
def test_having_filters_merged_rows_by_measures_and_output_names(table: Table) -> None:
    got = table.select("SELECT site, device, impressions, clicks * 1.0 / impressions AS rate FROM AdImpressions "
                       "GROUP BY site, device HAVING impressions > 100 AND rate > 0.05")
    want = table.oracle(
        "SELECT site, device, count(*) AS impressions, sum(clicked) * 1.0 / count(*) AS rate FROM rows "
        "GROUP BY ALL HAVING count(*) > 100 AND sum(clicked) * 1.0 / count(*) > 0.05 ORDER BY site, device")
    assert_frames(got, want, ("site", "device", "impressions"), ("rate",))
    assert 0 < len(got) < 8


@pytest.mark.slow
def test_order_by_and_limit(table: Table) -> None:
    got = table.select("SELECT time, site, clicks, high FROM AdImpressions GROUP BY time, site "
                       "ORDER BY clicks DESC, high LIMIT 5")
    want = table.oracle("SELECT minute AS time, site, sum(clicked) AS clicks, max(cost) AS high FROM rows "
                        "GROUP BY ALL ORDER BY clicks DESC, high, time, site LIMIT 5")
    assert_frames(got, want, ("time", "site", "clicks", "high"))


@pytest.mark.slow
def test_partials_are_the_stored_rows_with_their_worker(table: Table) -> None:
    got = table.select("SELECT * FROM partials(AdImpressions)")
    assert list(got.columns[:4]) == ["time", "SHARD_ID", "site", "device"]
    raw = got["SHARD_ID"].str.startswith("row-")
    assert raw.sum() == 400 and (got.loc[raw, "impressions"] == 1).all()
    assert (got.loc[raw, "low"] == got.loc[raw, "high"]).all()  # each measure finalized on its row alone
    assert got["impressions"].sum() == len(table.rows) and got["impressions"].dtype == "int64"
    assert got.loc[~raw].groupby(["time", "site", "device"])["SHARD_ID"].nunique().max() <= 3
    hot = table.select(f"SELECT SHARD_ID, clicks FROM partials(AdImpressions) WHERE site = 'hot.example' "
                       f"AND time == {T0} AND SHARD_ID != 'x' ORDER BY SHARD_ID")
    want = table.oracle(f"SELECT sum(clicked) FROM rows WHERE site = 'hot.example' AND minute = {T0}")
    assert hot["clicks"].sum() == want.iloc[0, 0] and list(hot["SHARD_ID"]) == sorted(hot["SHARD_ID"])


def test_where_on_the_time_column_narrows_the_read() -> None:
    app = tf.load_app(APP)

    def where(condition: str) -> tuple[int | None, int | None]:
        return _time_range(parse_table_query(f"SELECT * FROM AdImpressions WHERE {condition}", app).where, "time")

    assert where("time >= 10 and time < 20") == (10, 20)
    assert where("10 < time and (time <= 20 and site = 'x')") == (11, 21)
    assert where("time == 5 and time > 1") == (5, 6)
    assert where("time < 10 or time > 20") == (None, None)
    assert where("site = 'x'") == (None, None)
