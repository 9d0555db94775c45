"""stdDev / var (population and sample), first, last and delta against DuckDB over the raw events, at every
duration, however the events are split into micro-batches and whatever their disorder; and on the
server stores, whose upserts merge the same states in SQL."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tiltframe as tf
import tiltframe.engine.rollup.pipeline as pipeline_module
from tests.oracle import DUCK_UNITS, run_batches
from tests.servers import SERVER_STORES, app_with_store, fresh_database, staged_batches
from tiltframe.engine.rollup.staged_writes import STAGED_WRITES_ENV

APP = """
define stream TradeStream (symbol string, price double, quantity long, ts long);
define aggregation TradeAggregation
from TradeStream
select symbol, stdDev(price) as sd, stdDevSample(price) as sds, var(price) as v, varSample(price) as vs,
       first(price) as f, last(price) as l, delta(quantity) as d, count() as n
group by symbol
aggregate by ts every sec ... year;
"""
OUTPUTS = ["sd", "sds", "v", "vs", "f", "l", "d", "n"]
PERS = ("seconds", "minutes", "hours", "days", "months", "years")

ANCHORS = [
    pd.Timestamp(t, tz="UTC").value // 1_000_000
    for t in ("2023-12-31 23:59:59", "2024-02-29 23:59:59", "2024-03-31 23:59:30")
]


def trades(n: int, seed: int, price: Callable[[np.random.Generator], np.ndarray], *, quantities: int,
           anchor: int, spread: int) -> pd.DataFrame:
    """``n`` random trades of two symbols within ``spread`` ms of ``anchor``, numbered in arrival order."""
    rng = np.random.default_rng(seed)
    events = pd.DataFrame({
        "symbol": rng.choice(["IBM", "WSO2"], n), "price": price(rng),
        "quantity": rng.integers(0, quantities, n), "ts": anchor + rng.integers(-spread, spread, n)})
    events["arrival"] = np.arange(n)
    return events


def rollup(events: pd.DataFrame, per: str) -> pd.DataFrame:
    """The exact statistics per GMT bucket and symbol; first/last by (event time, arrival)."""
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.register("events", events)
    order = "ts * 1000000 + arrival"
    return con.execute(
        f"""
        SELECT epoch_ms(date_trunc('{DUCK_UNITS[per]}', make_timestamp(ts * 1000))) AS AGG_TIMESTAMP, symbol,
               stddev_pop(price) AS sd, stddev_samp(price) AS sds, var_pop(price) AS v, var_samp(price) AS vs,
               arg_min(price, {order}) AS f, arg_max(price, {order}) AS l,
               arg_max(quantity, {order}) - arg_min(quantity, {order}) AS d, count(*) AS n
        FROM events GROUP BY ALL ORDER BY AGG_TIMESTAMP, symbol
        """
    ).df()


def check(app, data_dir: Path, events: pd.DataFrame, *, rtol: float = 1e-9, atol: float = 1e-9) -> None:
    for per in PERS:
        got = tf.query(app, f'from TradeAggregation within 0L, 4102444800000L per "{per}" '
                       f"select AGG_TIMESTAMP, symbol, {', '.join(OUTPUTS)}", data_dir=data_dir)
        got = got.sort_values(["AGG_TIMESTAMP", "symbol"]).reset_index(drop=True)
        want = rollup(events, per)
        assert list(got["AGG_TIMESTAMP"]) == list(want["AGG_TIMESTAMP"]), per
        assert list(got["symbol"]) == list(want["symbol"]), per
        for col in ("f", "l", "d", "n"):
            assert list(got[col]) == list(want[col]), (per, col)
        for col in ("sd", "sds", "v", "vs"):  # NULL (NaN) for one value in the sample forms
            np.testing.assert_allclose(got[col].astype(float), want[col].astype(float), rtol=rtol, atol=atol,
                                       err_msg=f"{per} {col}")


event = st.tuples(
    st.sampled_from(["IBM", "WSO2"]),
    st.sampled_from(ANCHORS),
    st.one_of(st.integers(-3000, 3000), st.integers(-2 * 86_400_000, 2 * 86_400_000)),
    st.integers(-100_000, 100_000).map(lambda c: c / 100),
    st.integers(0, 50),
)


@pytest.mark.slow
@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.lists(event, min_size=1, max_size=50), cuts=st.lists(st.integers(0, 50), max_size=3))
def test_statistics_equal_the_exact_ones(spark, tmp_path_factory, data, cuts) -> None:
    events = pd.DataFrame([(s, p, q, a + d) for s, a, d, p, q in data], columns=["symbol", "price", "quantity", "ts"])
    events["arrival"] = np.arange(len(events))
    tmp = tmp_path_factory.mktemp("stats")
    app, totals = run_batches(spark, tmp, events, [c for c in cuts if c < len(events)], APP)
    assert totals.events_aggregated == len(events)
    check(app, tmp, events)


def test_stdev_is_stable_on_large_values(spark, tmp_path: Path) -> None:
    """Values near 1e9 with unit spread: sums of squares would lose every digit (1e18 against 1); Chan's
    merge of (count, mean, M2) keeps the population and sample deviations to 1e-6."""
    events = trades(4000, 7, lambda rng: 1e9 + rng.normal(0, 1, 4000), quantities=100, anchor=ANCHORS[0],
                    spread=90_000_000)
    app, _ = run_batches(spark, tmp_path, events, [500, 1500, 2000, 3500], APP)
    check(app, tmp_path, events, rtol=1e-6, atol=1e-6)
    days = tf.query(app, 'from TradeAggregation within 0L, 4102444800000L per "years" select symbol, sd',
                    data_dir=tmp_path)
    assert days["sd"].between(0.9, 1.1).all()


@pytest.mark.slow
@pytest.mark.parametrize("kind", SERVER_STORES)
def test_server_stores_merge_the_same_states(spark, tmp_path: Path, kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Many small batches make the upsert merge (Chan's formula and the first/last choice in SQL; MySQL
    applies the assignments in order) on almost every row.  The batches take turns between the two ways
    into a server store (through the driver as small batches, staged by the executors), so each path's
    states are merged into the other's."""
    turns = itertools.cycle([True, False])
    monkeypatch.setattr(pipeline_module, "estimated_small", lambda frames: next(turns))
    monkeypatch.setenv(STAGED_WRITES_ENV, "1")  # on a local master too
    staged = staged_batches(monkeypatch)
    n = 600
    events = trades(n, 3, lambda rng: np.round(rng.normal(100, 20, n), 2), quantities=100, anchor=ANCHORS[1],
                    spread=5_000)
    with fresh_database(kind) as url:
        text, _ = app_with_store(APP, url)
        app, _ = run_batches(spark, tmp_path, events, list(range(50, n, 50)), text)
        assert staged == list(range(1, 12, 2))
        check(app, tmp_path, events)
