"""Retrieval merges partial rows of one bucket written apart (as shards will) with the same functions:
the rows of two stores, each fed half of the events, merged and finalized in pandas equal the exact
statistics over all the events; sketches stay within their bounds."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.aggregates.test_statistics_oracle import ANCHORS, rollup, trades
from tests.oracle import run_batches
from tiltframe.aggregates.layout import AggregationLayout
from tiltframe.model.durations import Granularity, Unit
from tiltframe.store.open_stores import StoreRegistry
from tiltframe.store.reads.pandas_merges import finalize, merge_rows

APP = """
define stream TradeStream (symbol string, price double, quantity long, ts long);
define aggregation TradeAggregation
from TradeStream
select symbol, stdDev(price) as sd, stdDevSample(price) as sds, var(price) as v, varSample(price) as vs,
       first(price) as f, last(price) as l, delta(quantity) as d, count() as n,
       distinctCount(quantity) as users, dds(price, [0.5, 0.99], 0.01) as q
group by symbol
aggregate by ts every sec ... year;
"""


def bucket_starts(ts: pd.Series, per: str) -> pd.Series:
    """GMT bucket start (epoch ms) of each event time, computed by pandas."""
    stamps = pd.to_datetime(ts, unit="ms")
    floored = stamps.dt.to_period("Y").dt.start_time if per == "years" else stamps.dt.floor(
        {"seconds": "s", "hours": "h"}[per])
    return floored.astype("int64") // 1_000_000


@pytest.mark.slow
def test_rows_of_two_writers_merge_to_the_exact_statistics(spark, tmp_path: Path) -> None:
    n = 1200
    events = trades(n, 21, lambda rng: np.round(rng.lognormal(3, 1, n), 2), quantities=400, anchor=ANCHORS[0],
                    spread=4_000)
    # Both halves keep their arrival numbers, so (event time, arrival) orders events across writers.
    halves = [events.iloc[: n // 2], events.iloc[n // 2 :]]
    stored = []
    for i, half in enumerate(halves):
        app, _ = run_batches(spark, tmp_path / f"w{i}", half.reset_index(drop=True), [200], APP)
        layout = AggregationLayout.of(app, "TradeAggregation")
        stores = StoreRegistry(tmp_path / f"w{i}")
        stored.append({per: stores.for_aggregation(layout.spec).read(layout, Granularity(unit))
                       for per, unit in (("seconds", Unit.SECONDS), ("hours", Unit.HOURS), ("years", Unit.YEARS))})
        stores.close()
    for per in ("seconds", "hours", "years"):
        rows = pd.concat([stored[0][per], stored[1][per]], ignore_index=True)
        # The second writer's arrival numbers restart at 0: shift them after the first writer's.
        second = rows.index >= len(stored[0][per])
        for col in [c for c in rows.columns if c.endswith("_BATCH")]:
            rows.loc[second, col] = rows.loc[second, col] + 1_000
        got = finalize(merge_rows(rows, layout), layout).sort_values(["AGG_TIMESTAMP", "symbol"])
        got = got.reset_index(drop=True)
        want = rollup(events, per)
        assert list(got["AGG_TIMESTAMP"]) == list(want["AGG_TIMESTAMP"])
        for col in ("f", "l", "d", "n"):
            assert list(got[col]) == list(want[col]), (per, col)
        for col in ("sd", "sds", "v", "vs"):
            np.testing.assert_allclose(got[col].astype(float), want[col].astype(float), rtol=1e-9, atol=1e-9)
        starts = bucket_starts(events["ts"], per)
        for row in got.itertuples(index=False):
            bucket = events[(events["symbol"] == row.symbol) & (starts == row.AGG_TIMESTAMP)]
            exact = bucket["quantity"].nunique()
            assert abs(row.users - exact) <= 0.05 * exact
            prices = np.sort(bucket["price"].to_numpy())
            for q, value in ((0.5, row.q_p50), (0.99, row.q_p99)):
                truth = prices[int(np.floor(q * (len(prices) - 1)))]
                assert abs(value - truth) <= 0.01 * truth + 1e-9
