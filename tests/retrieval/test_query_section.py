"""The query section of a retrieval (group by, aggregates, having, order by, limit, offset) checked against
DuckDB: the raw events are rolled up by DuckDB (``tests.oracle.rollup``), and the same query section runs as
SQL over that rollup.  tiltframe's side goes through the pipeline into the store and ``tf.query``."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest

import tiltframe as tf
from tests.oracle import APP, rollup, run_batches
from tiltframe.errors import DefinitionError
from tiltframe.model.app import AppSpec

T0 = 1_717_200_000_000  # 2024-06-01 00:00:00 GMT
HOUR = 3_600_000
SYMBOLS = ["IBM", "WSO2", "ORCL", "MSFT", "SAP"]
EVERYTHING = "within 0L, 4102444800000L"
REQUESTS = "define stream Req (symbol string, startTime long, endTime long, perValue string);\n"


def trades(n: int, seed: int) -> pd.DataFrame:
    """Trades over three days; symbols unevenly often, so that sums and counts differ between them."""
    rng = np.random.default_rng(seed)
    weights = np.array([0.4, 0.25, 0.15, 0.12, 0.08])
    return pd.DataFrame({
        "symbol": rng.choice(SYMBOLS, n, p=weights),
        "price": np.round(rng.uniform(1, 500, n), 2),
        "quantity": rng.integers(1, 1000, n),
        "ts": T0 + rng.integers(0, 72 * HOUR, n),
        "arrival": np.arange(n),
    })


@dataclass
class Stored:
    app: AppSpec
    data_dir: Path
    events: pd.DataFrame

    def query(self, text: str, request: dict | None = None) -> pd.DataFrame:
        return tf.query(self.app, text, data_dir=self.data_dir, request=request)

    def oracle(self, per: str, sql: str) -> pd.DataFrame:
        """``sql`` over ``r``, DuckDB's rollup of the raw events per ``per``."""
        con = duckdb.connect()
        con.register("r", rollup(self.events, per))
        return con.execute(sql).df()


@pytest.fixture(scope="module")
def stored(spark, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stored]:
    tmp = tmp_path_factory.mktemp("section")
    events = trades(4000, seed=21)
    run_batches(spark, tmp, events, cuts=[1500, 2600])
    yield Stored(tf.load_app(APP + REQUESTS), tmp, events)


def same(got: pd.DataFrame, want: pd.DataFrame) -> None:
    """Equal column names, row order and values (doubles to 1e-9, relative)."""
    assert list(got.columns) == list(want.columns)
    assert len(got) == len(want)
    for column in got.columns:
        g, w = got[column].to_numpy(), want[column].to_numpy()
        if np.issubdtype(w.dtype, np.floating):
            np.testing.assert_allclose(g.astype(float), w, rtol=1e-9, err_msg=column)
        else:
            assert [int(v) if isinstance(v, np.integer) else v for v in g] == list(w), column


CASES = [
    (
        "hours",
        "select symbol, sum(total) as t, count() as n, avg(avgPrice) as a, max(high) as h, min(low) as l "
        "group by symbol order by symbol",
        "SELECT symbol, sum(total) AS t, count(*) AS n, avg(avgPrice) AS a, max(high) AS h, min(low) AS l "
        "FROM r GROUP BY symbol ORDER BY symbol",
    ),
    (
        "hours",
        "select symbol, sum(trades) as n group by symbol having n > 400 order by n desc limit 2 offset 2",
        "SELECT symbol, sum(trades) AS n FROM r GROUP BY symbol HAVING n > 400 ORDER BY n DESC LIMIT 2 OFFSET 2",
    ),
    (
        "days",
        "select AGG_TIMESTAMP, sum(total) as t, stdDev(avgPrice) as s, distinctCount(symbol) as d "
        "group by AGG_TIMESTAMP order by AGG_TIMESTAMP desc",
        "SELECT AGG_TIMESTAMP, sum(total) AS t, stddev_pop(avgPrice) AS s, count(DISTINCT symbol) AS d "
        "FROM r GROUP BY AGG_TIMESTAMP ORDER BY AGG_TIMESTAMP DESC",
    ),
    (
        "minutes",
        "select sum(total) as t, count() as n, max(last) as m",
        "SELECT sum(total) AS t, count(*) AS n, max(last) AS m FROM r",
    ),
    (
        "hours",
        "select symbol, sum(total) / count() as perHour, sum(total) * 2 as twice group by symbol "
        "having sum(trades) < 800 order by perHour",
        "SELECT symbol, CAST(sum(total) AS BIGINT) // count(*) AS perHour, sum(total) * 2 AS twice FROM r "
        "GROUP BY symbol HAVING sum(trades) < 800 ORDER BY perHour",
    ),
    (
        "hours",
        "select AGG_TIMESTAMP, symbol, total having total > 9000 order by total desc, AGG_TIMESTAMP limit 7 offset 3",
        "SELECT AGG_TIMESTAMP, symbol, total FROM r WHERE total > 9000 ORDER BY total DESC, AGG_TIMESTAMP "
        "LIMIT 7 OFFSET 3",
    ),
    (
        "days",
        "select symbol, total order by high desc limit 4",  # ordered by an attribute it does not select
        "SELECT symbol, total FROM r ORDER BY high DESC LIMIT 4",
    ),
    (
        "hours",
        "select symbol, max(high) - min(low) as spread group by symbol order by AGG_TIMESTAMP, symbol",
        # Siddhi's rule for an attribute that is not grouped: its value in the group's last row, here the
        # group's latest hour; every symbol trades in the last hour, so all tie and symbol decides.
        "SELECT symbol, max(high) - min(low) AS spread FROM r GROUP BY symbol ORDER BY max(AGG_TIMESTAMP), symbol",
    ),
]


@pytest.mark.parametrize(("per", "section", "sql"), CASES)
def test_query_section_matches_duckdb(stored: Stored, per: str, section: str, sql: str) -> None:
    got = stored.query(f'from TradeAggregation {EVERYTHING} per "{per}" {section}')
    same(got, stored.oracle(per, sql))


def test_on_then_group_by(stored: Stored) -> None:
    got = stored.query(
        f'from TradeAggregation on symbol == "WSO2" or symbol == "SAP" {EVERYTHING} per "days" '
        "select AGG_TIMESTAMP, sum(total) as t group by AGG_TIMESTAMP order by AGG_TIMESTAMP"
    )
    want = stored.oracle("days", "SELECT AGG_TIMESTAMP, sum(total) AS t FROM r WHERE symbol IN ('WSO2', 'SAP') "
                                 "GROUP BY AGG_TIMESTAMP ORDER BY AGG_TIMESTAMP")
    same(got, want)


def test_no_rows_no_groups(stored: Stored) -> None:
    """Nothing retrieved, nothing answered: Siddhi sends no event (SQL would give one row with a NULL sum)."""
    got = stored.query('from TradeAggregation within 0L, 1000L per "hours" select sum(total) as t, count() as n')
    assert list(got.columns) == ["t", "n"]
    assert got.empty


def test_join_groups_each_request(stored: Stored) -> None:
    """A join's request attributes: within and per unqualified, the group key and a selected value."""
    start, end = T0 + 6 * HOUR, T0 + 60 * HOUR  # the day buckets that start inside: June 2 and 3
    text = (
        "from Req join TradeAggregation on TradeAggregation.symbol == Req.symbol "
        "within startTime, endTime per perValue "
        "select Req.symbol as who, AGG_TIMESTAMP, sum(total) as t, count() as n group by AGG_TIMESTAMP "
        "order by AGG_TIMESTAMP desc limit 3"
    )
    for symbol in ("IBM", "SAP"):
        got = stored.query(text, request={"symbol": symbol, "startTime": start, "endTime": end, "perValue": "days"})
        want = stored.oracle(
            "days",
            f"SELECT '{symbol}' AS who, AGG_TIMESTAMP, sum(total) AS t, count(*) AS n FROM r "
            f"WHERE symbol = '{symbol}' AND AGG_TIMESTAMP >= {start} AND AGG_TIMESTAMP < {end} "
            "GROUP BY AGG_TIMESTAMP ORDER BY AGG_TIMESTAMP DESC LIMIT 3",
        )
        assert len(want) == 2
        same(got, want)


def test_no_select_returns_every_attribute_in_definition_order(stored: Stored) -> None:
    got = stored.query(f'from TradeAggregation {EVERYTHING} per "days"')
    assert list(got.columns) == ["AGG_TIMESTAMP", "AGG_TIME", "symbol", "avgPrice", "total", "trades", "low", "high",
                                 "last"]
    want = rollup(stored.events, "days")
    same(got.drop(columns=["AGG_TIME"]), want)
    assert stored.query(f'from TradeAggregation {EVERYTHING} per "days" select *').equals(got)
    threshold = int(want["total"].median())
    filtered = stored.query(f'from TradeAggregation {EVERYTHING} per "days" select * having total > {threshold}')
    same(filtered.drop(columns=["AGG_TIME"]), want[want["total"] > threshold].reset_index(drop=True))


def test_join_without_select_gives_both_sides(stored: Stored) -> None:
    """Siddhi's ``select *`` in a join: the request's attributes, then the aggregation's."""
    app = tf.load_app(APP + "define stream Asks (who string, since long);\n")
    got = tf.query(app, 'from Asks join TradeAggregation within since, 4102444800000L per "years"',
                   data_dir=stored.data_dir, request={"who": "me", "since": 0})
    assert list(got.columns[:4]) == ["who", "since", "AGG_TIMESTAMP", "AGG_TIME"]
    assert set(got["who"]) == {"me"} and len(got) == len(SYMBOLS)
    with pytest.raises(DefinitionError, match="both have 'symbol'"):
        stored.query('from Req join TradeAggregation within startTime, endTime per perValue',
                     request={"symbol": "IBM", "startTime": 0, "endTime": 1, "perValue": "days"})
