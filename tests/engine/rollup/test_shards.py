"""Shard pipelines (Siddhi's @PartitionById): independent runs, each with its own data directory and shard
id, write one store; every retrieval equals a GROUP BY over the union of their inputs (property-based)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tiltframe as tf
from tests.engine.test_oracle import ANCHORS, event
from tests.oracle import APP, check_against_oracle
from tests.servers import SERVER_STORES, app_with_store, fresh_database
from tiltframe.engine.rollup.shards import RECORD, load_deployment
from tiltframe.errors import UsageError

SCHEMA = "symbol string, price double, quantity long, ts long"


def sharded_app(store_url: str, annotation: str = "@PartitionById") -> str:
    text, _ = app_with_store(APP, store_url)
    return text.replace("define aggregation", f"{annotation}\ndefine aggregation", 1)


def run_shards(spark, tmp: Path, app_text: str, events: pd.DataFrame, shards: list[str]) -> tf.api.AppSpec:
    """Each shard's share of ``events`` (column ``shard``) through its own run, one after the other."""
    app = tf.load_app(app_text)
    for shard in shards:
        part = events[events["shard"] == shard][["symbol", "price", "quantity", "ts"]]
        if part.empty:
            continue
        result = tf.run(app, {"TradeStream": spark.createDataFrame(part, SCHEMA)}, data_dir=tmp / shard,
                        spark=spark, shard_id=shard)
        assert result.aggregations["TradeAggregation"].events_aggregated == len(part)
    return app


@pytest.mark.slow
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.lists(st.tuples(event, st.sampled_from(["n1", "n2", "n3"])), min_size=1, max_size=50))
def test_shards_merge_to_the_group_by_over_all_input(spark, tmp_path_factory, data) -> None:
    events = pd.DataFrame([(s, p, q, a + d, shard) for (s, a, d, p, q), shard in data],
                          columns=["symbol", "price", "quantity", "ts", "shard"])
    # The latest event of a bucket is the greatest event time; among shards a tie has no arrival order.
    events = events.drop_duplicates(["symbol", "ts"]).reset_index(drop=True)
    events["arrival"] = np.arange(len(events))
    tmp = tmp_path_factory.mktemp("shards")
    app = run_shards(spark, tmp, sharded_app(f"jdbc:sqlite:{tmp / 'shared.db'}"), events, ["n1", "n2", "n3"])
    check_against_oracle(app, tmp / "reader", events)
    (info,) = tf.inspect(app, data_dir=tmp / "reader")
    assert info.shards == tuple(sorted(events["shard"].unique()))
    assert info.events_read == len(events)


@pytest.mark.slow
@pytest.mark.parametrize("server", SERVER_STORES)
def test_shards_on_a_server_store(spark, tmp_path: Path, server: str) -> None:
    """The seed's example: within one hour node 1's trades total 30 and node 2's total 40; the retrieval
    says 70.  Plus random trades shared by both shards (same keys, same buckets)."""
    rng = np.random.default_rng(5)
    n = 200
    hour = ANCHORS[0] + 1  # 2024-01-01 00:00:00
    seed_rows = pd.DataFrame({"symbol": "SEED", "price": [1.0, 2.0, 3.0, 4.0], "quantity": [10, 20, 15, 25],
                              "ts": hour + np.array([1000, 2000, 3000, 4000]), "shard": ["n1", "n1", "n2", "n2"]})
    shared = pd.DataFrame({
        "symbol": rng.choice(["IBM", "WSO2"], n), "price": rng.integers(1, 10_000, n) / 100,
        "quantity": rng.integers(1, 1000, n), "ts": hour + rng.choice(np.arange(0, 7_200_000, 7), n, replace=False),
        "shard": np.where(np.arange(n) % 2 == 0, "n1", "n2"),
    })
    events = pd.concat([seed_rows, shared], ignore_index=True)
    events["arrival"] = np.arange(len(events))
    with fresh_database(server) as url:
        app = run_shards(spark, tmp_path, sharded_app(url), events, ["n1", "n2"])
        got = tf.query(app, f'from TradeAggregation on symbol == "SEED" within {hour}L, {hour + 3_600_000}L '
                            'per "hours" select total', data_dir=tmp_path / "reader")
        assert list(got["total"]) == [70]
        check_against_oracle(app, tmp_path / "reader", events)


@pytest.mark.slow
def test_shard_id_rules(spark, tmp_path: Path) -> None:
    store = f"jdbc:sqlite:{tmp_path / 'shared.db'}"
    app = tf.load_app(sharded_app(store))
    df = spark.createDataFrame([("IBM", 1.0, 1, ANCHORS[0])], SCHEMA)
    with pytest.raises(UsageError, match=r"TradeAggregation \(line \d+\) is marked @PartitionById.*--shard-id"):
        tf.run(app, {"TradeStream": df}, data_dir=tmp_path / "a", spark=spark)
    tf.run(app, {"TradeStream": df}, data_dir=tmp_path / "a", spark=spark, shard_id="n1")
    with pytest.raises(UsageError, match=r"has run as shard 'n1' since .* this run says shard 'n2'"):
        tf.run(app, {"TradeStream": df}, data_dir=tmp_path / "a", spark=spark, shard_id="n2")
    assert (tmp_path / "a" / RECORD).exists()
    # Without the annotation, the config's partition_by_id decides; enable='false' always opts out.
    plain = tf.load_app(app_with_store(APP, store)[0])
    tf.run(plain, {"TradeStream": df}, data_dir=tmp_path / "b", spark=spark, shard_id="n2", partition_by_id=True)
    opted_out = tf.load_app(sharded_app(f"jdbc:sqlite:{tmp_path / 'own.db'}", "@PartitionById(enable='false')"))
    tf.run(opted_out, {"TradeStream": df}, data_dir=tmp_path / "c", spark=spark, shard_id="n3", partition_by_id=True)
    assert not (tmp_path / "c" / RECORD).exists()
    assert [i.shards for i in tf.inspect(app, data_dir=tmp_path)] == [("n1", "n2")]
    assert [i.shards for i in tf.inspect(opted_out, data_dir=tmp_path)] == [()]


def test_deployment_from_option_environment_and_config(tmp_path: Path) -> None:
    config = tmp_path / "deploy.toml"
    config.write_text('shard_id = "from-file"\npartition_by_id = true\n')
    assert load_deployment(config=config, env={}).shard_id == "from-file"
    assert load_deployment(config=config, env={}).partition_by_id
    env = {"TILTFRAME_SHARD_ID": "from-env", "TILTFRAME_CONFIG": str(config)}
    assert load_deployment(env=env).shard_id == "from-env"
    assert load_deployment("from-option", env=env).shard_id == "from-option"
    assert load_deployment(env={}).shard_id is None
    with pytest.raises(UsageError, match=r"\$TILTFRAME_SHARD_ID: 'node 1' is not valid"):
        load_deployment(env={"TILTFRAME_SHARD_ID": "node 1"})
    config.write_text('shard = "x"\n')
    with pytest.raises(UsageError, match=r"unknown setting 'shard' \(known: shard_id, partition_by_id\)"):
        load_deployment(config=config, env={})
    config.write_text("partition_by_id = 'yes'\n")
    with pytest.raises(UsageError, match=r"partition_by_id = 'yes' must be a bool"):
        load_deployment(config=config, env={})
    with pytest.raises(UsageError, match="does not exist"):
        load_deployment(config=tmp_path / "missing.toml", env={})
