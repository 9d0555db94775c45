"""Every retrieval ``per`` every duration equals a DuckDB GROUP BY over the raw events, however the
events were split into micro-batches (property-based)."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tiltframe as tf
from tests.oracle import APP, rollup
from tiltframe.engine.pipeline import AggregationPipeline
from tiltframe.spec.model import AppSpec
from tiltframe.store.layout import AggregationLayout
from tiltframe.store.registry import StoreRegistry

ANCHORS = [
    pd.Timestamp(t, tz="UTC").value // 1_000_000
    for t in ("2023-12-31 23:59:59", "2024-02-28 23:59:58", "2024-02-29 23:59:59", "2024-03-31 23:59:30",
              "2024-12-31 23:00:00")
]

event = st.tuples(
    st.sampled_from(["IBM", "WSO2", "ORCL"]),
    st.sampled_from(ANCHORS),
    st.one_of(st.integers(-3000, 3000), st.integers(-3 * 86_400_000, 3 * 86_400_000)),
    st.integers(1, 100_000).map(lambda c: c / 100),
    st.integers(1, 1000),
)


def open_pipeline(tmp: Path, pipeline_id: str) -> tuple[AppSpec, StoreRegistry, AggregationPipeline]:
    """The oracle app's pipeline writing into a fresh embedded store under ``tmp``."""
    app = tf.load_app(APP)
    layout = AggregationLayout.of(app, "TradeAggregation")
    stores = StoreRegistry(tmp)
    store = stores.for_aggregation(layout.spec)
    store.ensure_schema(layout)
    return app, stores, AggregationPipeline(layout, store, pipeline_id)


def run_batches(spark, tmp: Path, events: pd.DataFrame, cuts: list[int]) -> AppSpec:
    """Feed ``events`` through the per-batch pipeline in the given micro-batches (arrival order)."""
    app, stores, pipeline = open_pipeline(tmp, "test-pipeline")
    bounds = [0, *sorted(set(cuts)), len(events)]
    for batch_id, (lo, hi) in enumerate(itertools.pairwise(bounds)):
        part = events.iloc[lo:hi][["symbol", "price", "quantity", "ts"]]
        if len(part):
            pipeline.process(spark.createDataFrame(part, "symbol string, price double, quantity long, ts long"),
                             batch_id)
    stores.close()
    totals = pipeline.totals
    assert totals.events_read == totals.events_aggregated == len(events)
    return app


def check_against_oracle(app, data_dir: Path, events: pd.DataFrame) -> None:
    for per in ("seconds", "minutes", "hours", "days", "months", "years"):
        got = tf.query(
            app,
            f'from TradeAggregation within 0L, 4102444800000L per "{per}" '
            "select AGG_TIMESTAMP, symbol, avgPrice, total, trades, low, high, last",
            data_dir=data_dir,
        )
        want = rollup(events, per)
        assert len(got) == len(want), per
        got = got.sort_values(["AGG_TIMESTAMP", "symbol"]).reset_index(drop=True)
        for col in ("AGG_TIMESTAMP", "symbol", "total", "trades", "low", "high", "last"):
            assert list(got[col]) == list(want[col]), (per, col)
        np.testing.assert_allclose(got["avgPrice"], want["avgPrice"], rtol=1e-12)


@pytest.mark.slow
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.lists(event, min_size=1, max_size=60), cuts=st.lists(st.integers(0, 60), max_size=3))
def test_rollups_equal_group_by_over_raw_events(spark, tmp_path_factory, data, cuts) -> None:
    events = pd.DataFrame(
        [(s, p, q, a + d) for s, a, d, p, q in data], columns=["symbol", "price", "quantity", "ts"]
    )
    events["arrival"] = np.arange(len(events))
    tmp = tmp_path_factory.mktemp("oracle")
    app = run_batches(spark, tmp, events, [c for c in cuts if c < len(events)])
    check_against_oracle(app, tmp, events)


@pytest.mark.slow
def test_replayed_batch_changes_nothing(spark, tmp_path: Path) -> None:
    events = pd.DataFrame({"symbol": ["IBM", "IBM", "WSO2"], "price": [1.0, 2.0, 3.0], "quantity": [1, 2, 3],
                           "ts": [ANCHORS[0], ANCHORS[0] + 1, ANCHORS[0] + 2]})
    app, stores, pipeline = open_pipeline(tmp_path, "p")
    layout, store = pipeline.layout, pipeline.store
    df = spark.createDataFrame(events, "symbol string, price double, quantity long, ts long")
    first = pipeline.process(df, 7)
    snapshot = {g: store.read(layout, g) for g in layout.spec.granularities}
    again = pipeline.process(df, 7)
    assert not first.skipped and again.skipped
    for g, before in snapshot.items():
        pd.testing.assert_frame_equal(store.read(layout, g), before)
    stores.close()
    events["arrival"] = np.arange(3)
    check_against_oracle(app, tmp_path, events)
