"""Sketches keep their documented error bounds at every level of a 4-level tilt frame, built by merging
finer states across many micro-batches, and agree with the sketch built directly at each level."""

from __future__ import annotations

import math
from pathlib import Path

import datasketches as ds
import numpy as np
import pandas as pd
import pytest
from pyspark.sql import functions as F

import tiltframe as tf
from tests.oracle import run_batches
from tests.servers import SERVER_STORES, app_with_store, fresh_database
from tiltframe.aggregates.sketches import ddsketch, ddsketch_spark, hdr, hdr_spark
from tiltframe.aggregates.sketches.stored import hll_estimate, kll_quantiles

QUANTILES = (0.5, 0.9, 0.99)
ALPHA = 0.02
APP = f"""
define stream TradeStream (symbol string, price double, quantity long, ts long);
define aggregation TradeAggregation
from TradeStream
select symbol, distinctCount(quantity) as users, kll(price, {list(QUANTILES)}) as k,
       dds(price, {list(QUANTILES)}, {ALPHA}) as d, hdr(price, {list(QUANTILES)}) as h, count() as n
group by symbol
aggregate by ts every 10 sec, 1 min, 10 min, 1 hour;
"""
LEVELS = {"10 sec": 10_000, "1 min": 60_000, "10 min": 600_000, "1 hour": 3_600_000}
KLL_EPS = ds.kll_doubles_sketch.get_normalized_rank_error(200, False)  # about 1.3%, at 99% confidence
HLL_RSE = 1.04 / math.sqrt(2**12)  # about 1.6%
HDR_WIDTH = 1 / 128  # the relative width of an HDR histogram's bins at 2 significant digits
START = 1_704_067_200_000  # 2024-01-01 00:00:00 GMT


def heavy_tailed_events(n: int, seed: int) -> pd.DataFrame:
    """Pareto prices (a few values a thousand times the median), many distinct users, random order."""
    rng = np.random.default_rng(seed)
    events = pd.DataFrame({
        "symbol": rng.choice(["IBM", "WSO2"], n),
        "price": (rng.pareto(1.5, n) + 1) * 10,
        "quantity": rng.zipf(1.3, n) % 50_000,
        "ts": START + rng.integers(0, 2 * 3_600_000 + 1_800_000, n),
    })
    events["arrival"] = np.arange(n)
    return events


def exact_lower(values: np.ndarray, q: float) -> float:
    ordered = np.sort(values)
    return float(ordered[math.floor(q * (len(ordered) - 1))])


def rank_interval(values: np.ndarray, estimate: float) -> tuple[float, float]:
    """The normalized ranks an estimate can stand for: [share below it, share at or below it]."""
    ordered = np.sort(values)
    return (np.searchsorted(ordered, estimate, "left") / len(ordered),
            np.searchsorted(ordered, estimate, "right") / len(ordered))


def direct_sketches(spark, events: pd.DataFrame, length: int) -> pd.DataFrame:
    """The sketches built straight from the raw events of each bucket of one level, in Spark."""
    df = spark.createDataFrame(events[["symbol", "price", "quantity", "ts"]])
    bucket = (F.col("ts") - F.pmod("ts", F.lit(length))).alias("AGG_TIMESTAMP")
    rows = df.groupBy(bucket, "symbol").agg(
        F.hll_sketch_agg(F.col("quantity").cast("long"), 12).alias("hll"),
        F.kll_sketch_agg_double("price", 200).alias("kll"),
        ddsketch_spark.build(F.col("price"), ALPHA).alias("dds"),
        hdr_spark.build(F.col("price"), 2).alias("hdr"),
    ).toPandas()
    return rows.set_index(["AGG_TIMESTAMP", "symbol"])


def check_bounds(spark, app, data_dir: Path, events: pd.DataFrame) -> dict[str, float]:
    """Assert every bound at every level; returns the worst errors seen (for the failure message)."""
    worst = {"hll": 0.0, "kll": 0.0, "dds": 0.0, "hdr": 0.0}
    outputs = ", ".join(["users", "n", *(f"k_p{round(q * 100)}" for q in QUANTILES),
                         *(f"d_p{round(q * 100)}" for q in QUANTILES), *(f"h_p{round(q * 100)}" for q in QUANTILES)])
    for per, length in LEVELS.items():
        got = tf.query(app, f'from TradeAggregation within 0L, 4102444800000L per "{per}" '
                       f"select AGG_TIMESTAMP, symbol, {outputs}", data_dir=data_dir)
        events = events.assign(bucket=events["ts"] - events["ts"] % length)
        groups = dict(list(events.groupby(["bucket", "symbol"])))
        assert len(got) == len(groups), per
        direct = direct_sketches(spark, events, length)
        for row in got.itertuples(index=False):
            raw = groups[(row.AGG_TIMESTAMP, row.symbol)]
            prices = raw["price"].to_numpy()
            assert row.n == len(raw)
            exact_users = raw["quantity"].nunique()
            hll_error = abs(row.users - exact_users) / exact_users
            assert hll_error <= 3 * HLL_RSE, (per, row, exact_users)
            built = direct.loc[(row.AGG_TIMESTAMP, row.symbol)]
            assert abs(row.users - hll_estimate(built["hll"])) <= 3 * HLL_RSE * exact_users
            worst["hll"] = max(worst["hll"], hll_error)
            for q in QUANTILES:
                k, d = getattr(row, f"k_p{round(q * 100)}"), getattr(row, f"d_p{round(q * 100)}")
                low, high = rank_interval(prices, k)
                kll_error = max(0.0, low - q, q - high)
                assert kll_error <= KLL_EPS, (per, q, k, low, high)
                direct_rank = rank_interval(prices, kll_quantiles(built["kll"], [q])[0])
                assert abs((low + high) / 2 - sum(direct_rank) / 2) <= 2 * KLL_EPS + 1 / len(prices)
                exact = exact_lower(prices, q)
                dds_error = abs(d - exact) / abs(exact)
                assert dds_error <= ALPHA + 1e-9, (per, q, d, exact)
                # Same bins whatever the merges: exactly the sketch built on all the bucket's values.
                assert d == ddsketch.quantiles(built["dds"], [q])[0]
                worst["kll"], worst["dds"] = max(worst["kll"], kll_error), max(worst["dds"], dds_error)
                # HDR: whole prices; the value at rank max(floor(q n + 0.5), 1), and the estimate its bin's top.
                h = getattr(row, f"h_p{round(q * 100)}")
                whole = np.sort(np.trunc(prices))
                exact = float(whole[max(int(q * len(whole) + 0.5), 1) - 1])
                hdr_error = (h - exact) / exact
                assert 0 <= hdr_error < HDR_WIDTH, (per, q, h, exact)
                assert h == hdr.quantiles(built["hdr"], [q])[0]
                worst["hdr"] = max(worst["hdr"], hdr_error)
    return worst


@pytest.mark.slow
def test_sketches_keep_their_bounds_at_every_level(spark, tmp_path: Path) -> None:
    events = heavy_tailed_events(24_000, seed=11)
    cuts = list(range(2_000, len(events), 2_000))  # 12 micro-batches
    app, totals = run_batches(spark, tmp_path, events, cuts, APP)
    assert totals.events_aggregated == len(events)
    worst = check_bounds(spark, app, tmp_path, events)
    print("worst errors:", worst)


@pytest.mark.slow
@pytest.mark.parametrize("kind", SERVER_STORES)
def test_server_stores_merge_sketches(spark, tmp_path: Path, kind: str) -> None:
    """Stored sketches are read back and merged with each new batch's (no database unions them)."""
    events = heavy_tailed_events(3_000, seed=5)
    with fresh_database(kind) as url:
        text, _ = app_with_store(APP, url)
        app, _ = run_batches(spark, tmp_path, events, list(range(500, len(events), 500)), text)
        check_bounds(spark, app, tmp_path, events)
