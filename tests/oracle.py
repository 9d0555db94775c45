"""Independent answers over raw events (DuckDB GROUP BY on floored timestamps), and the harness that
feeds the same events through the per-batch pipeline to compare with them."""

from __future__ import annotations

import itertools
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd

import tiltframe as tf
from tiltframe.aggregates.layout import AggregationLayout
from tiltframe.engine.rollup.pipeline import AggregationPipeline
from tiltframe.engine.rollup.reports import PipelineTotals
from tiltframe.model.app import AppSpec
from tiltframe.store.open_stores import StoreRegistry

#: The app every oracle comparison runs: all built-in functions plus a latest-event value.
APP = """
define stream TradeStream (symbol string, price double, quantity long, ts long);
define aggregation TradeAggregation
from TradeStream
select symbol, avg(price) as avgPrice, sum(quantity) as total, count() as trades,
       min(price) as low, max(price) as high, price * quantity as last
group by symbol
aggregate by ts every sec ... year;
"""

DUCK_UNITS = {"seconds": "second", "minutes": "minute", "hours": "hour", "days": "day", "months": "month",
              "years": "year"}


def rollup(events: pd.DataFrame, per: str) -> pd.DataFrame:
    """Per GMT bucket and symbol: avg/sum/count/min/max and the latest event's price*quantity.

    ``events`` has symbol, price, quantity, ts (epoch ms) and arrival (global arrival position).
    """
    unit = DUCK_UNITS[per]
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.register("events", events)
    return con.execute(
        f"""
        SELECT epoch_ms(date_trunc('{unit}', make_timestamp(ts * 1000))) AS AGG_TIMESTAMP, symbol,
               avg(price) AS avgPrice, sum(quantity) AS total, count(*) AS trades,
               min(price) AS low, max(price) AS high,
               arg_max(price * quantity, ts * 1000000 + arrival) AS last
        FROM events GROUP BY ALL ORDER BY AGG_TIMESTAMP, symbol
        """
    ).df()


def open_pipeline(
    tmp: Path, pipeline_id: str, app_text: str = APP
) -> tuple[AppSpec, StoreRegistry, AggregationPipeline]:
    """The oracle app's pipeline writing into a fresh embedded store under ``tmp``."""
    app = tf.load_app(app_text)
    layout = AggregationLayout.of(app, "TradeAggregation")
    stores = StoreRegistry(tmp)
    store = stores.for_aggregation(layout.spec)
    store.ensure_schema(layout)
    return app, stores, AggregationPipeline(layout, store, pipeline_id)


def run_batches(
    spark, tmp: Path, events: pd.DataFrame, cuts: list[int], app_text: str = APP, *, small: bool | None = None
) -> tuple[AppSpec, PipelineTotals]:
    """Feed ``events`` through the per-batch pipeline in the given micro-batches (arrival order: a
    DataFrame made from pandas keeps its rows in partition order); ``small``: whether each batch is small
    (ordered in one partition, ``engine.events.arrival``; None: by Spark's estimate, which says small here)."""
    app, stores, pipeline = open_pipeline(tmp, "test-pipeline", app_text)
    bounds = [0, *sorted(set(cuts)), len(events)]
    for batch_id, (lo, hi) in enumerate(itertools.pairwise(bounds)):
        part = events.iloc[lo:hi][["symbol", "price", "quantity", "ts"]]
        if len(part):
            pipeline.process(spark.createDataFrame(part, "symbol string, price double, quantity long, ts long"),
                             batch_id, small=small)
    stores.close()
    totals = pipeline.totals
    assert totals.events_read == len(events)
    return app, totals


def check_against_oracle(
    app, data_dir: Path, events: pd.DataFrame, kept_from: dict[str, int] | None = None
) -> None:
    """Every duration equals the oracle; ``kept_from`` gives, per duration purged, where its buckets start."""
    for per in ("seconds", "minutes", "hours", "days", "months", "years"):
        got = tf.query(
            app,
            f'from TradeAggregation within 0L, 4102444800000L per "{per}" '
            "select AGG_TIMESTAMP, symbol, avgPrice, total, trades, low, high, last",
            data_dir=data_dir,
        )
        want = rollup(events, per)
        if kept_from and per in kept_from:
            want = want[want["AGG_TIMESTAMP"] >= kept_from[per]].reset_index(drop=True)
        assert len(got) == len(want), per
        got = got.sort_values(["AGG_TIMESTAMP", "symbol"]).reset_index(drop=True)
        for col in ("AGG_TIMESTAMP", "symbol", "total", "trades", "low", "high", "last"):
            assert list(got[col]) == list(want[col]), (per, col)
        np.testing.assert_allclose(got["avgPrice"], want["avgPrice"], rtol=1e-12)
