"""Shards in the store (Siddhi's @PartitionById) on SQLite, PostgreSQL and MariaDB: each shard writes its own
rows, readers merge them, the recovery point is per shard, and old tables are migrated in place."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import sqlalchemy as sa

from tests.store.conftest import MIN, SEC, T0, fresh_store, row, rows_table
from tiltframe.aggregates.layout import SHARD_ID, AggregationLayout
from tiltframe.errors import StoreError
from tiltframe.store.base import BatchStats, BatchWrite, PipelineState
from tiltframe.store.dialects.mysql import KEY_HASH
from tiltframe.store.reads.pandas_merges import finalize, merge_rows
from tiltframe.store.sql import SqlStore
from tiltframe.store.views import view_name

HOUR_ROWS = [  # the seed's example: within one bucket, node 1's trades total 30 and node 2's total 40
    ("node1", [row(T0, "IBM", T0 + 100, 1, 0, 10.0, 10), row(T0, "IBM", T0 + 300, 1, 1, 30.0, 20)]),
    ("node2", [row(T0, "IBM", T0 + 200, 1, 0, 20.0, 15), row(T0, "IBM", T0 + 250, 1, 1, 5.0, 25)]),
]


def shard_batch(layout: AggregationLayout, shard: str, batch_id: int, rows: list[dict]) -> BatchWrite:
    stats = BatchStats(len(rows), len(rows), 0, T0, max(r["AGG_EVENT_TIMESTAMP"] for r in rows))
    table = rows_table(layout, rows)
    return BatchWrite(f"pipeline-{shard}", batch_id, stats, {SEC: table, MIN: table}, shard_id=shard)


def stored_rows(store: SqlStore, table: str, *columns: str) -> list[tuple]:
    with store._engine.connect() as conn:
        t = sa.table(table, *(sa.column(c) for c in columns))
        return sorted(tuple(r) for r in conn.execute(sa.select(*t.c)))


def test_each_shard_writes_its_own_row_and_readers_merge_them(sharded: SqlStore, partitioned) -> None:
    for shard, rows in HOUR_ROWS:
        assert sharded.write_batch(partitioned, shard_batch(partitioned, shard, 7, rows))  # same batch id
    raw = stored_rows(sharded, "TradeAggregation_SECONDS", SHARD_ID, "total_SUM")
    assert raw == [("node1", 30), ("node2", 40)]
    read = sharded.read(partitioned, SEC)
    assert SHARD_ID not in read.columns and len(read) == 2  # partial rows, as any reader sees them
    merged = finalize(merge_rows(read, partitioned), partitioned)
    assert merged[["symbol", "total"]].to_dict("records") == [{"symbol": "IBM", "total": 70}]
    assert merged["avgPrice"][0] == pytest.approx(65.0 / 4)
    assert (merged["low"][0], merged["high"][0]) == (5.0, 30.0)
    assert merged["value"][0] == 30.0 * 20  # the latest event over both shards
    # A replay of one shard's batch is a no-op; the other shard's batch of the same id is its own.
    assert not sharded.write_batch(partitioned, shard_batch(partitioned, "node1", 7, HOUR_ROWS[0][1]))


def test_the_view_of_final_values_merges_the_shards(sharded: SqlStore, partitioned) -> None:
    for shard, rows in HOUR_ROWS:
        sharded.write_batch(partitioned, shard_batch(partitioned, shard, 1, rows))
    view = view_name(partitioned, MIN)
    got = stored_rows(sharded, view, "symbol", "total", "avgPrice", "low", "high", "AGG_COUNT")
    assert got == [("IBM", 70, pytest.approx(65.0 / 4), 5.0, 30.0, 4)]


def test_a_new_pipeline_recovers_from_its_own_shard_only(sharded: SqlStore, partitioned) -> None:
    later = [row(T0 + 5000, "IBM", T0 + 5000, 0, 0, 1, 1)]
    sharded.write_batch(partitioned, shard_batch(partitioned, "node1", 0, later))
    assert sharded.pipeline_state(partitioned, "fresh", "node2") == PipelineState(None, None)
    assert sharded.pipeline_state(partitioned, "fresh", "node1") == PipelineState(None, T0 + 5000)


def test_a_partitioned_batch_needs_a_shard_id(sharded: SqlStore, partitioned) -> None:
    unnamed = dataclasses.replace(shard_batch(partitioned, "x", 0, HOUR_ROWS[0][1]), shard_id=None)
    with pytest.raises(StoreError, match="partitioned by shard, but the batch has no shard id"):
        sharded.write_batch(partitioned, unnamed)


def test_tables_and_deployment_must_agree_on_shards(store_kind: str, db_path: Path, partitioned, layout) -> None:
    with fresh_store(store_kind, db_path, layout) as (store, _):
        store.write_batch(layout, shard_batch(layout, "-", 0, HOUR_ROWS[0][1]))
        with pytest.raises(StoreError, match=r"created without a SHARD_ID column.*tiltframe migrate APP --shard-id"):
            store.ensure_schema(partitioned)
    with (fresh_store(store_kind, db_path.with_name("other.db"), partitioned) as (store, _),
          pytest.raises(StoreError, match=r"are partitioned by shard .*add @PartitionById")):
        store.ensure_schema(layout)


def test_add_shards_upgrades_old_tables_once(store_kind: str, db_path: Path, partitioned, layout) -> None:
    with fresh_store(store_kind, db_path, layout) as (store, reopen):
        store.write_batch(layout, shard_batch(layout, "-", 0, HOUR_ROWS[0][1]))
        before = store.read(layout, SEC)
        assert store.add_shards(partitioned, "node1") == ["TradeAggregation_SECONDS", "TradeAggregation_MINUTES"]
        assert store.add_shards(partitioned, "node1") == []  # nothing left to do
        with store._engine.connect() as conn:
            key = sa.inspect(conn).get_pk_constraint("TradeAggregation_SECONDS")["constrained_columns"]
        # MySQL keys string columns by their digest (tiltframe.store.dialects.mysql).
        assert key == ["AGG_TIMESTAMP", KEY_HASH if store_kind == "mysql" else "symbol", SHARD_ID]
        # The migrated rows are node1's, unchanged; a second shard now writes beside them.
        assert stored_rows(store, "TradeAggregation_SECONDS", SHARD_ID, "total_SUM") == [("node1", 30)]
        with reopen() as reader:
            assert reader.read(layout, SEC).equals(before)
        again = SqlStore(store._engine)  # as a new process would: nothing cached
        again.ensure_schema(partitioned)
        assert again.write_batch(partitioned, shard_batch(partitioned, "node2", 0, HOUR_ROWS[1][1]))
        merged = finalize(merge_rows(store.read(layout, SEC), layout), layout)
        assert list(merged["total"]) == [70]
        view = view_name(partitioned, SEC)
        assert stored_rows(store, view, "symbol", "total") == [("IBM", 70)]


def test_add_shards_refuses_an_unpartitioned_layout(store: SqlStore, layout) -> None:
    with pytest.raises(StoreError, match="not partitioned by shard"):
        store.add_shards(layout, "node1")


def test_inspect_lists_the_shards(sharded: SqlStore, partitioned, layout) -> None:
    for shard, rows in HOUR_ROWS:
        sharded.write_batch(partitioned, shard_batch(partitioned, shard, 1, rows))
    assert sharded.info(layout).shards == ("node1", "node2")  # whoever asks, partitioned or not
