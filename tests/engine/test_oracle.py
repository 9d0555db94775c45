"""Every retrieval ``per`` every duration equals a DuckDB GROUP BY over the raw events, however the
events were split into micro-batches (property-based)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.oracle import APP, check_against_oracle, open_pipeline, run_batches
from tests.servers import SERVER_STORES, app_with_store, fresh_database

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


@pytest.mark.slow
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.lists(event, min_size=1, max_size=60), cuts=st.lists(st.integers(0, 60), max_size=3))
def test_rollups_equal_group_by_over_raw_events(spark, tmp_path_factory, data, cuts) -> None:
    events = pd.DataFrame(
        [(s, p, q, a + d) for s, a, d, p, q in data], columns=["symbol", "price", "quantity", "ts"]
    )
    events["arrival"] = np.arange(len(events))
    tmp = tmp_path_factory.mktemp("oracle")
    app, totals = run_batches(spark, tmp, events, [c for c in cuts if c < len(events)])
    assert totals.events_aggregated == len(events)
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


@pytest.mark.slow
@pytest.mark.parametrize("server", SERVER_STORES)
def test_server_stores_equal_the_oracle(spark, tmp_path: Path, server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same events through PostgreSQL and MariaDB stores (seed-style @store annotation, credentials
    from the environment) give the oracle's rollups, across several micro-batches."""
    rng = np.random.default_rng(7)
    n = 300
    events = pd.DataFrame({
        "symbol": rng.choice(["IBM", "WSO2", "ORCL"], n),
        "price": rng.integers(1, 10_000, n) / 100,
        "quantity": rng.integers(1, 1000, n),
        "ts": rng.choice(ANCHORS, n) + rng.integers(-90_000_000, 90_000_000, n),
        "arrival": np.arange(n),
    })
    with fresh_database(server) as url:
        app_text, env = app_with_store(APP, url, "TF_TEST_STORE_PASSWORD")
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        app, totals = run_batches(spark, tmp_path, events, [100, 200], app_text)
        assert totals.events_aggregated == n
        check_against_oracle(app, tmp_path, events)
