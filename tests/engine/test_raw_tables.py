"""Raw tables (EventQL: pre-aggregation is optional per table): inserted rows are stored as they are, on
every store, and SELECTs group and aggregate them as SQL does; every answer equals DuckDB's over the same
rows, and a row that cannot be typed is recorded with its reason."""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tiltframe as tf
from tests.servers import STORES, fresh_database
from tiltframe.errors import DefinitionError
from tiltframe.store import DB_FILE_NAME
from tiltframe.store.schema import REJECTED_TABLE

TABLE = "define table Clicks (time long, site string, clicked int, cost double);\n"

#: Queries as an EventQL user writes them over a raw table, each with DuckDB's spelling where it differs.
QUERIES = [
    "SELECT site, count() AS n, sum(clicked) AS c, avg(cost) AS a, min(cost) AS lo, max(time) AS hi "
    "FROM Clicks GROUP BY site ORDER BY site",
    "SELECT count() AS n, sum(cost) AS total, count(cost) AS priced FROM Clicks WHERE time >= 20",
    "SELECT site, sum(cost * 2) AS c2 FROM Clicks WHERE clicked = 1 GROUP BY site HAVING c2 > 3 "
    "ORDER BY c2 DESC LIMIT 2",
    "SELECT clicked, site FROM Clicks GROUP BY clicked, site ORDER BY clicked, site",
    "SELECT count() AS n FROM Clicks WHERE time > 1000000",
]
DUCK = {"count()": "count(*)"}


def duck(rows: pd.DataFrame, query: str) -> pd.DataFrame:
    con = duckdb.connect()
    con.register("Clicks", rows)
    for ours, theirs in DUCK.items():
        query = query.replace(ours, theirs)
    return con.execute(query.replace("ORDER BY site", "ORDER BY site NULLS LAST")).df()


def rows_of(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "time": rng.integers(0, 100, n).astype("int64"),
        "site": pd.Series(rng.choice(["a", "b", "c", None], n), dtype=object),
        "clicked": rng.integers(0, 2, n).astype("int64"),
        "cost": np.where(rng.random(n) < 0.2, np.nan, rng.integers(1, 500, n) / 100),
    })


def same(got: pd.DataFrame, want: pd.DataFrame) -> None:
    assert list(got.columns) == list(want.columns)
    assert len(got) == len(want), (got, want)
    for column in got.columns:
        g, w = got[column].tolist(), want[column].tolist()
        for a, b in zip(g, w, strict=True):
            if isinstance(b, float) and not pd.isna(b):
                assert a == pytest.approx(b), (column, g, w)
            else:
                assert (pd.isna(a) and pd.isna(b)) or a == b, (column, g, w)


@pytest.mark.slow
@pytest.mark.parametrize("backend", STORES)
def test_a_raw_table_keeps_its_rows_and_answers_like_sql(spark, tmp_path: Path, backend: str) -> None:
    rows = rows_of(400, 3)
    with fresh_database(backend) if backend != "sqlite" else nullcontext() as url:
        store = f"@store(type='rdbms', jdbc.url='{url}')\n" if url else ""
        app = tf.load_app(store + TABLE)
        first = tf.insert(app, "Clicks", rows.iloc[:300], data_dir=tmp_path, spark=spark)
        csv = tmp_path / "more.csv"
        rows.iloc[300:].to_csv(csv, index=False)
        with csv.open("a") as more:
            more.write("7,a,yes,1.5\n")  # 'yes' is no int: recorded, not stored
        second = tf.insert(app, "Clicks", csv, data_dir=tmp_path, spark=spark)
        assert (first.events_read, first.events_aggregated, first.events_rejected) == (300, 300, 0)
        assert (second.events_read, second.events_aggregated, second.events_rejected) == (101, 100, 1)
        stored = tf.select(app, "SELECT * FROM Clicks", data_dir=tmp_path)
        same(stored, rows.reset_index(drop=True))  # in insert order, nulls kept
        for query in QUERIES:
            same(tf.select(app, query, data_dir=tmp_path), duck(rows, query))
        if url:
            engine = sa.create_engine(url.replace("jdbc:postgresql", "postgresql+psycopg").replace(
                "jdbc:mysql", "mysql+pymysql"))
        else:
            engine = sa.create_engine(f"sqlite:///{tmp_path / DB_FILE_NAME}")
        with engine.connect() as conn:
            r = REJECTED_TABLE.c
            recorded = conn.execute(sa.select(r.reason, r.value).where(r.aggregation == "Clicks")).fetchall()
        engine.dispose()
    assert len(recorded) == 1 and "clicked" in recorded[0][0] and recorded[0][1] == "yes", recorded


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(0, 60), seed=st.integers(0, 2**16), inserts=st.integers(1, 3))
def test_grouped_answers_equal_duckdb_whatever_the_rows_and_inserts(spark, tmp_path_factory, n: int, seed: int,
                                                                     inserts: int) -> None:
    data = tmp_path_factory.mktemp("raw")
    app = tf.load_app(TABLE)
    rows = rows_of(n, seed)
    for part in np.array_split(np.arange(n), inserts):
        tf.insert(app, "Clicks", spark.createDataFrame(rows.iloc[part], "time long, site string, clicked int, "
                                                                         "cost double"), data_dir=data, spark=spark)
    for query in QUERIES[:2]:
        same(tf.select(app, query, data_dir=data), duck(rows, query))


@pytest.mark.parametrize(("query", "message", "column"), [
    ("SELECT site, cost FROM Clicks GROUP BY site", "column 'cost' in SELECT is not in GROUP BY", 14),
    ("SELECT sit, count() AS n FROM Clicks GROUP BY sit", "unknown column of Clicks 'sit'", 47),
    ("SELECT sum(count()) AS n FROM Clicks", "an aggregate inside sum() is not allowed", 8),
    ("SELECT count() AS n FROM Clicks WHERE sum(cost) > 1", "aggregate sum() in WHERE", 39),
])
def test_grouping_mistakes_are_named_where_they_are(query: str, message: str, column: int) -> None:
    app = tf.load_app(TABLE)
    with pytest.raises(DefinitionError, match=message.replace("(", r"\(").replace(")", r"\)")) as refused:
        tf.select(app, query, data_dir="/nonexistent")
    assert refused.value.column == column


PREAGGREGATED = (
    "define table Clicks (time long, site string, clicked int, cost double) preaggregate by time every sec "
    "dimensions site measures sum(cost) as cost, count() as n, max(clicked) as top;\n"
)


@pytest.mark.slow
@pytest.mark.parametrize("backend", STORES)
def test_enabling_preaggregation_keeps_and_counts_the_raw_rows(spark, tmp_path: Path, backend: str) -> None:
    """EventQL's pre-aggregation enabled on a table that holds raw rows: a read before they are folded is
    refused (never a total without them); migrate folds them once, recording the rows the rollup cannot
    take; later inserts add to them; the answers equal DuckDB's over every row."""
    rows = rows_of(200, 11)
    rows.loc[[3, 50], "time"] = None  # no time: a rollup cannot place them
    later = rows_of(80, 12)
    with fresh_database(backend) if backend != "sqlite" else nullcontext() as url:
        store = f"@store(type='rdbms', jdbc.url='{url}')\n" if url else ""
        raw = tf.load_app(store + TABLE)
        tf.insert(raw, "Clicks", spark.createDataFrame(rows.astype(object).where(rows.notna(), None),
                                                       "time long, site string, clicked int, cost double"),
                  data_dir=tmp_path, spark=spark)
        app = tf.load_app(store + PREAGGREGATED)
        query = "SELECT site, cost, n, top FROM Clicks GROUP BY site"
        with pytest.raises(tf.StoreError, match="holds 200 rows stored raw before its pre-aggregation was enabled"):
            tf.select(app, query, data_dir=tmp_path)
        unusable = int((rows["time"].isna() | rows["site"].isna()).sum())
        assert tf.migrate(app, data_dir=tmp_path) == {"Clicks": [
            f"200 rows stored raw before pre-aggregation folded into the rollup, {unusable} of them rejected "
            "(recorded with their reason)"]}
        assert tf.migrate(app, data_dir=tmp_path) == {"Clicks": []}
        more = tf.insert(app, "Clicks", later, data_dir=tmp_path, spark=spark)
        assert more.events_rejected == int(later["site"].isna().sum())
        got = tf.select(app, query, data_dir=tmp_path)
        assert tf.select(raw, "SELECT count() AS n FROM Clicks", data_dir=tmp_path)["n"].tolist() == [200]
    both = pd.concat([rows, later], ignore_index=True)
    want = duck(both, "SELECT site, sum(cost) AS cost, count() AS n, max(clicked) AS top FROM Clicks "
                      "WHERE time IS NOT NULL AND site IS NOT NULL GROUP BY site ORDER BY site")
    same(got, want)
