"""Commit records as the store's identity, and the rebuild that drops an aggregation, on every store."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
import sqlalchemy as sa

from tests.store.conftest import SEC, T0, batch, make_layout, row
from tests.store.contract.test_shards import HOUR_ROWS, shard_batch
from tiltframe.errors import StoreError
from tiltframe.store.sql import SqlStore


def test_last_committed_batch_per_pipeline(store: SqlStore, layout) -> None:
    assert store.last_committed_batch(layout, "p1") is None
    for b in (0, 3, 2):
        store.write_batch(layout, batch(layout, b, [row(T0, "A", T0, b, 0, 1.0, 1)]))
    store.write_batch(layout, batch(layout, 9, [row(T0, "A", T0, 9, 0, 1.0, 1)], pipeline="p2"))
    assert store.last_committed_batch(layout, "p1") == 3
    assert store.last_committed_batch(layout, "p2") == 9
    assert store.last_committed_batch(make_layout(name="Other"), "p1") is None


def test_no_store_holds_no_batch_and_nothing_is_created(tmp_path: Path, layout) -> None:
    missing = tmp_path / "gone" / "tiltframe.db"
    with SqlStore.sqlite(missing, read_only=True) as reader:
        assert reader.last_committed_batch(layout, "p1") is None
    assert not missing.parent.exists()
    missing.parent.mkdir()
    missing.write_bytes(b"")  # an emptied file
    with SqlStore.sqlite(missing) as writer:
        assert writer.last_committed_batch(layout, "p1") is None


def test_reset_drops_the_aggregation_and_keeps_the_others(store: SqlStore, layout) -> None:
    other = make_layout(name="Other")
    store.ensure_schema(other)
    rej = pa.table({"kind": ["invalid"], "reason": ["bad"]})
    store.write_batch(layout, batch(layout, 1, [row(T0, "A", T0, 1, 0, 1.0, 1)], rejected=rej))
    store.write_batch(other, batch(other, 1, [row(T0, "B", T0, 1, 0, 1.0, 1)]))
    store.purge(layout, {SEC: T0 - 1000}, T0)
    store.reset(layout)
    with store._engine.connect() as conn:
        names = set(sa.inspect(conn).get_table_names())
        assert "TradeAggregation_SECONDS" not in names and "Other_SECONDS" in names
        for table in ("TILTFRAME_BATCHES", "TILTFRAME_REJECTED", "TILTFRAME_PURGES"):
            agg = sa.table(table, sa.column("aggregation"))
            left = conn.execute(sa.select(agg.c.aggregation).where(agg.c.aggregation == layout.name)).first()
            assert left is None, table
    assert store.last_committed_batch(layout, "p1") is None
    assert store.last_committed_batch(other, "p1") == 1
    store.ensure_schema(layout)  # made anew, empty, and written as a new store would be
    assert store.read(layout, SEC).empty and store.info(layout).batches == 0
    assert store.write_batch(layout, batch(layout, 1, [row(T0, "A", T0, 1, 0, 1.0, 5)]))
    assert store.read(layout, SEC)["total_SUM"].tolist() == [5]
    assert store.read(other, SEC)["total_SUM"].tolist() == [1]


def test_reset_of_one_shard_refuses_to_drop_another_shards_rows(sharded: SqlStore, partitioned) -> None:
    shard, rows = HOUR_ROWS[0]
    sharded.write_batch(partitioned, shard_batch(partitioned, shard, 1, rows))
    sharded.reset(partitioned, shard)  # only its own rows: allowed
    assert sharded.last_committed_batch(partitioned, f"pipeline-{shard}") is None
    for shard, rows in HOUR_ROWS:
        sharded.write_batch(partitioned, shard_batch(partitioned, shard, 1, rows))
    with pytest.raises(StoreError, match=r"also hold rows of shard 'node2'.*stop every shard's pipeline"):
        sharded.reset(partitioned, "node1")
    assert sharded.last_committed_batch(partitioned, "pipeline-node1") == 1  # nothing dropped
