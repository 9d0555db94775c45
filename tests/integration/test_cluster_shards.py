"""Shards (Siddhi's ``@PartitionById``) on a standalone cluster: two pipelines, each its own Spark application
with its own ``--shard-id`` and data dir, write one aggregation into one PostgreSQL database.

The input is split by alternating events, so both shards write every key and every bucket: each stored
bucket then has a partial row per shard, and only a retrieval that merges the shards equals the oracle
over all the input.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import sqlalchemy as sa

from tests.integration.cluster import (
    Cluster,
    cluster,
    make_events,
    run_summary,
    spark_submit_together,
    write_parts,
)
from tests.oracle import APP, rollup
from tests.servers import app_with_store, fresh_database
from tiltframe.model.aggregations import StoreSpec
from tiltframe.store.urls import store_target

__all__ = ["cluster"]  # the module-scoped fixture: pytest finds it here by name

SHARDS = ("node1", "node2")
PERS = ("seconds", "minutes", "hours", "days", "months", "years")
#: The seed's example: in one hour, shard 1's trades total 30 and shard 2's total 40; retrieval says 70.
EXAMPLE_HOUR = pd.Timestamp("2024-01-01 05:00", tz="UTC").value // 1_000_000


def shard_events() -> pd.DataFrame:
    """The cluster test's trades with distinct event times (so the latest event of a bucket is the same
    whichever shard holds it), alternated between the shards, and the seed's example hour."""
    events = make_events(distinct_times=True)
    events["shard"] = np.arange(len(events)) % 2
    example = pd.DataFrame({
        "symbol": "EXAMPLE",
        "price": [10.0, 20.0, 30.0, 40.0],
        "quantity": [10, 20, 15, 25],
        "ts": EXAMPLE_HOUR + np.array([60_000, 120_000, 180_000, 240_000]),
        "shard": [0, 0, 1, 1],
    })
    events = pd.concat([events, example], ignore_index=True)
    events["arrival"] = np.arange(len(events))
    return events


def run_command(app_file: Path, inputs: Path, data_dir: Path, shard: str) -> list[str]:
    return ["run", str(app_file), "--input", f"TradeStream={inputs}", "--data-dir", str(data_dir),
            "--shard-id", shard, "--max-files-per-trigger", "2"]


def stored_hours(jdbc_url: str) -> pd.DataFrame:
    """The raw ``TradeAggregation_HOURS`` rows: one per bucket, symbol and shard."""
    engine = sa.create_engine(store_target(StoreSpec("rdbms", jdbc_url)))
    try:
        table = sa.Table("TradeAggregation_HOURS", sa.MetaData(), autoload_with=engine)
        query = sa.select(table.c.AGG_TIMESTAMP, table.c.symbol, table.c.SHARD_ID, table.c.total_SUM)
        with engine.connect() as conn:
            return pd.DataFrame(conn.execute(query).all(), columns=["AGG_TIMESTAMP", "symbol", "SHARD_ID", "total"])
    finally:
        engine.dispose()


@pytest.mark.slow
@pytest.mark.cluster
def test_two_shards_on_a_cluster_merge_into_one_answer(cluster: Cluster, tmp_path: Path) -> None:
    import tiltframe as tf

    events = shard_events()
    for i in range(len(SHARDS)):
        write_parts(events[events["shard"] == i], tmp_path / f"in{i}", 3)
    with fresh_database("postgresql") as url:
        text, env = app_with_store(APP.replace("define aggregation", "@PartitionById\ndefine aggregation", 1), url)
        assert not env
        app_file = tmp_path / "app.siddhi"
        app_file.write_text(text)
        registered = cluster.apps_registered()
        # Both applications at once, as independent deployments run: each takes one of the two one-core
        # workers (spark.cores.max=1), so neither waits for the other's executors.
        runs = [run_command(app_file, tmp_path / f"in{i}", tmp_path / f"data{i}", shard)
                for i, shard in enumerate(SHARDS)]
        outs = spark_submit_together(cluster.url, runs, tmp_path / "submit", conf={"spark.cores.max": "1"})
        assert cluster.apps_registered() == registered + len(SHARDS), "a driver did not run on the cluster's master"
        for i, out in enumerate(outs):
            n = int((events["shard"] == i).sum())
            assert run_summary(out.stdout) == {"micro-batches": 2, "events read": n, "events aggregated": n,
                                               "events rejected": 0}, out.stdout

        app = tf.load_app(text)
        for per in PERS:
            got = tf.query(app, f'from TradeAggregation within 0L, 4102444800000L per "{per}" select *',
                           data_dir=tmp_path / "reader")
            got = got.sort_values(["AGG_TIMESTAMP", "symbol"]).reset_index(drop=True)
            want = rollup(events, per)
            assert len(got) == len(want), per
            for col in ("AGG_TIMESTAMP", "symbol", "total", "trades", "low", "high", "last"):
                assert list(got[col]) == list(want[col]), (per, col)
            np.testing.assert_allclose(got["avgPrice"], want["avgPrice"], rtol=1e-12)

        example = tf.query(app, f'from TradeAggregation on symbol == "EXAMPLE" within {EXAMPLE_HOUR}L, '
                                f'{EXAMPLE_HOUR + 3_600_000}L per "hours" select AGG_TIMESTAMP, total',
                           data_dir=tmp_path / "reader")
        assert example.to_dict(orient="records") == [{"AGG_TIMESTAMP": EXAMPLE_HOUR, "total": 70}]

        stored = stored_hours(url)
    assert set(stored["SHARD_ID"]) == set(SHARDS)
    shards_per_key = stored.groupby(["AGG_TIMESTAMP", "symbol"])["SHARD_ID"].nunique()
    assert (shards_per_key == 2).all(), "alternated events put every hour and symbol in both shards"
    by_shard = stored[stored["symbol"] == "EXAMPLE"].set_index("SHARD_ID")["total"].to_dict()
    assert by_shard == {"node1": 30, "node2": 40}
