"""SqlStore on SQLite, PostgreSQL and MariaDB: schema, merge semantics, replay, ranges, rejected events,
isolation, URLs."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import tiltframe.store.writes.upserts as upserts
from tests.store.conftest import MIN, SEC, T0, batch, by_symbol, make_layout, row, rows_table
from tiltframe.errors import DefinitionError, StoreError
from tiltframe.model.durations import Granularity, Unit
from tiltframe.store.base import REJECTED_COLUMNS, REJECTED_TIMES, BatchStats, BatchWrite, PipelineState
from tiltframe.store.sql import SqlStore

REPO = Path(__file__).resolve().parents[2]


def test_two_overlapping_batches_merge_column_by_column(store: SqlStore, layout) -> None:
    b1 = [row(T0, "IBM", T0 + 100, 1, 0, 10.0, 5), row(T0, "WSO2", T0 + 200, 1, 1, 20.0, 1),
          row(T0 + 1000, "IBM", T0 + 1500, 1, 2, 11.0, 2)]
    b2 = [row(T0, "IBM", T0 + 900, 2, 0, 8.0, 3, avgPrice_SUM=16.0, avgPrice_COUNT=2, high_MAX=9.0),
          row(T0 + 2000, "IBM", T0 + 2100, 2, 1, 12.0, 1)]
    assert store.write_batch(layout, batch(layout, 1, b1))
    assert store.write_batch(layout, batch(layout, 2, b2))
    got = by_symbol(store.read(layout, SEC))
    assert len(got) == 4
    ibm = got[(T0, "IBM")]
    assert ibm["avgPrice_SUM"] == 26.0 and ibm["avgPrice_COUNT"] == 3  # sums add
    assert ibm["total_SUM"] == 8
    assert ibm["low_MIN"] == 8.0 and ibm["high_MAX"] == 10.0  # min smaller, max larger
    assert ibm["AGG_EVENT_TIMESTAMP"] == T0 + 900 and ibm["value"] == 24.0  # latest event wins
    assert (ibm["AGG_ARRIVAL_BATCH"], ibm["AGG_ARRIVAL_SEQ"]) == (2, 0)
    assert got[(T0, "WSO2")]["total_SUM"] == 1  # untouched key keeps its row
    assert got[(T0 + 2000, "IBM")]["value"] == 12.0


def test_latest_value_ties_break_by_batch_then_seq_and_older_events_never_win(store: SqlStore, layout):
    same = T0 + 500
    store.write_batch(layout, batch(layout, 5, [
        row(T0, "A", same, 5, 3, 1.0, 1),
        row(T0, "B", same, 5, 3, 1.0, 1),
        row(T0, "C", T0 + 900, 5, 0, 1.0, 1),
    ]))
    store.write_batch(layout, batch(layout, 6, [
        row(T0, "A", same, 6, 0, 2.0, 1),      # same event time, later batch -> wins
        row(T0, "B", same, 5, 2, 3.0, 1),      # same time and batch, smaller seq -> loses
        row(T0, "C", T0 + 100, 9, 9, 4.0, 1),  # older event arriving later -> loses
    ]))
    store.write_batch(layout, batch(layout, 7, [row(T0, "B", same, 5, 4, 5.0, 1)]))  # larger seq -> wins
    got = by_symbol(store.read(layout, SEC))
    assert (got[(T0, "A")]["value"], got[(T0, "A")]["AGG_ARRIVAL_BATCH"]) == (2.0, 6)
    assert (got[(T0, "B")]["value"], got[(T0, "B")]["AGG_ARRIVAL_SEQ"]) == (5.0, 4)
    c = got[(T0, "C")]
    assert (c["value"], c["AGG_EVENT_TIMESTAMP"], c["AGG_ARRIVAL_BATCH"]) == (1.0, T0 + 900, 5)
    assert c["avgPrice_SUM"] == 5.0 and c["low_MIN"] == 1.0 and c["high_MAX"] == 4.0  # states still merge


def test_nulls_never_win_min_max_or_sum(store: SqlStore, layout) -> None:
    first = [row(T0, "A", T0, 1, 0, 3.0, 1, low_MIN=None, total_SUM=None), row(T0, "B", T0, 1, 1, 1.0, 1)]
    store.write_batch(layout, batch(layout, 1, first))
    with_nulls = store.read(layout, SEC)  # a NULL long reads as a nullable Int64, a NULL double as NaN
    assert str(with_nulls["total_SUM"].dtype) == "Int64"
    assert with_nulls["total_SUM"].isna().tolist() == [True, False]
    assert np.isnan(with_nulls["low_MIN"][0]) and with_nulls["AGG_TIMESTAMP"].dtype == np.int64
    store.write_batch(layout, batch(layout, 2, [row(T0, "A", T0, 2, 0, 2.0, 1, high_MAX=None)]))
    a = store.read(layout, SEC).iloc[0]
    assert (a["low_MIN"], a["high_MAX"], a["total_SUM"]) == (2.0, 3.0, 1)


def test_random_batches_match_pandas(store: SqlStore, layout, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(upserts, "ROWS_PER_STATEMENT", 7)  # exercise multi-row statements and remainders
    monkeypatch.setattr(upserts, "CHUNK_ROWS", 50)
    rng = np.random.default_rng(7)
    everything = []
    for b in range(4):
        keys = {(T0 + 1000 * int(rng.integers(0, 6)), f"S{int(rng.integers(0, 9))}") for _ in range(40)}
        shuffled = sorted(keys, key=lambda _: rng.random())
        rows = [row(ts, sym, ts + int(rng.integers(5)), b, i, float(rng.integers(50)), int(rng.integers(9)))
                for i, (ts, sym) in enumerate(shuffled)]
        everything += rows
        assert store.write_batch(layout, batch(layout, b, rows))
    df = pd.DataFrame(everything).sort_values(["AGG_EVENT_TIMESTAMP", "AGG_ARRIVAL_BATCH", "AGG_ARRIVAL_SEQ"])
    expected = df.groupby(["AGG_TIMESTAMP", "symbol"]).agg(
        AGG_COUNT=("AGG_COUNT", "sum"), avgPrice_SUM=("avgPrice_SUM", "sum"),
        avgPrice_COUNT=("avgPrice_COUNT", "sum"), total_SUM=("total_SUM", "sum"),
        low_MIN=("low_MIN", "min"), high_MAX=("high_MAX", "max"),
        value=("value", "last"), AGG_EVENT_TIMESTAMP=("AGG_EVENT_TIMESTAMP", "last"),
        AGG_ARRIVAL_BATCH=("AGG_ARRIVAL_BATCH", "last"), AGG_ARRIVAL_SEQ=("AGG_ARRIVAL_SEQ", "last"),
    ).reset_index()
    got = store.read(layout, SEC)
    pd.testing.assert_frame_equal(got, expected[list(got.columns)], check_dtype=False)


def test_replayed_batch_is_a_no_op(store: SqlStore, layout, monkeypatch: pytest.MonkeyPatch) -> None:
    rej = pa.table({c: ["x"] for c in REJECTED_COLUMNS})
    one = [row(T0, "A", T0, 3, 0, 1.0, 1)]
    first = batch(layout, 3, one, rejected=rej, min_rows=one)
    assert not store.is_committed(layout, "p1", 3)
    assert store.write_batch(layout, first)
    assert store.is_committed(layout, "p1", 3) and not store.is_committed(layout, "p2", 3)
    before = (store.read(layout, SEC), store.read(layout, MIN), store.info(layout))
    assert store.write_batch(layout, first) is False
    pd.testing.assert_frame_equal(store.read(layout, SEC), before[0])
    pd.testing.assert_frame_equal(store.read(layout, MIN), before[1])
    assert store.info(layout) == before[2]
    monkeypatch.setattr(store, "is_committed", lambda *_: False)  # the check inside the transaction holds too
    assert store.write_batch(layout, first) is False
    pd.testing.assert_frame_equal(store.read(layout, SEC), before[0])
    monkeypatch.undo()
    assert store.write_batch(layout, batch(layout, 3, [row(T0, "A", T0, 3, 0, 1.0, 1)], pipeline="p2"))
    assert store.read(layout, SEC)["total_SUM"].tolist() == [2]  # another pipeline's batch 3 counts


def test_read_ranges_are_half_open_and_typed(store: SqlStore, layout) -> None:
    store.write_batch(layout, batch(layout, 1, [row(T0 + 1000 * i, "A", T0 + 1000 * i, 1, i, 1.0, 1)
                                                for i in range(5)]))
    stamps = lambda df: [(t - T0) // 1000 for t in df["AGG_TIMESTAMP"]]  # noqa: E731
    assert stamps(store.read(layout, SEC, T0 + 1000, T0 + 3000)) == [1, 2]
    assert stamps(store.read(layout, SEC, T0 + 3000)) == [3, 4]
    assert stamps(store.read(layout, SEC, None, T0 + 1000)) == [0]
    assert stamps(store.read(layout, SEC, T0 + 1500, T0 + 1999)) == []
    full = store.read(layout, SEC)
    assert full["AGG_TIMESTAMP"].dtype == np.int64 and full["total_SUM"].dtype == np.int64
    assert full["value"].dtype == np.float64 and full["symbol"].tolist() == ["A"] * 5
    empty = store.read(layout, MIN)
    assert empty.empty and list(empty.columns) == list(layout.column_types)
    assert empty["AGG_TIMESTAMP"].dtype == np.int64 and empty["symbol"].dtype == full["symbol"].dtype
    with pytest.raises(DefinitionError, match="not aggregated per hours"):
        store.read(layout, Granularity(Unit.HOURS))


def test_rejected_events_are_stored_and_counted(store: SqlStore, layout) -> None:
    rej = pa.table({"stream": ["TradeStream"] * 4, "kind": ["invalid", "invalid", "invalid", "moved"],
                    "reason": ["null price", "bad type", "null price", "moved into 51"],
                    "field": ["price", "quantity", None, None], "value": [None, "abc", None, None],
                    "raw": ["{}", "{a}", "{b}", "{c}"], "event_timestamp": [None, None, None, T0 - 9000],
                    "adjusted_timestamp": [None, None, None, T0]})
    store.write_batch(layout, batch(layout, 1, [row(T0, "A", T0 + 5, 1, 0, 1.0, 1)], rejected=rej))
    store.write_batch(layout, batch(layout, 2, [row(T0 + 60_000, "A", T0 + 60_001, 2, 0, 1.0, 1)]))
    got = store.rejected(layout, limit=2)
    assert got["raw"].tolist() == ["{c}", "{b}"] and got["batch_id"].tolist() == [1, 1]
    assert list(got.columns) == ["batch_id", *REJECTED_COLUMNS, *REJECTED_TIMES, "recorded_at"]
    assert (got["event_timestamp"][0], got["adjusted_timestamp"][0]) == (T0 - 9000, T0)
    info = store.info(layout)
    assert info.batches == 2 and info.events_read == 6 and info.events_aggregated == 2
    # Moved events are recorded but not rejected: they count by kind only.
    assert info.events_rejected == 3 and info.rejected_by_reason == (("null price", 2), ("bad type", 1))
    assert dict(info.recorded_by_kind) == {"invalid": 3, "moved": 1} and info.events_moved == 1
    assert (info.min_event_ts, info.max_event_ts) == (T0 + 5, T0 + 60_001)
    sec, minute = info.tables
    assert (sec.table, sec.granularity, sec.rows, sec.first_bucket, sec.last_bucket) == (
        "TradeAggregation_SECONDS", "seconds", 2, T0, T0 + 60_000)
    assert minute.rows == 0 and minute.first_bucket is None
    assert info.spec_hash == layout.spec_hash and info.zone == "UTC"


def test_bad_rows_are_refused_before_writing(store: SqlStore, layout) -> None:
    lacking = rows_table(layout, [row(T0, "A", T0, 1, 0, 1.0, 1)]).drop_columns(["value"])
    with pytest.raises(StoreError, match="lack the columns value"):
        store.write_batch(layout, BatchWrite("p", 1, BatchStats(1, 1, 0), {SEC: lacking}))
    nulls = rows_table(layout, [row(T0, None, T0, 1, 0, 1.0, 1)])  # type: ignore[arg-type]
    with pytest.raises(StoreError, match="NULL in key column symbol"):
        store.write_batch(layout, BatchWrite("p", 1, BatchStats(1, 1, 0), {SEC: nulls}))
    assert not store.is_committed(layout, "p", 1)


def test_too_long_table_names_are_a_definition_error(store: SqlStore) -> None:
    limit = store.capabilities.max_identifier_length  # 1024 SQLite, 63 PostgreSQL, 64 MySQL
    longest = len("_SECONDS_FINAL")  # the view beside the table
    fits = make_layout(name="T" * (limit - longest))
    store.ensure_schema(fits)
    long = make_layout(name="T" * (limit - longest + 1))
    with pytest.raises(DefinitionError, match=f"allows at most {limit}"):
        store.ensure_schema(long)


def test_pipeline_state_carries_over_and_recovers(store: SqlStore, layout) -> None:
    assert store.pipeline_state(layout, "p1") == PipelineState(None, None)  # empty store: nothing to recover
    first = batch(layout, 1, [row(T0 + 2000, "A", T0 + 2500, 1, 0, 1.0, 1)], pipeline="p1")
    store.write_batch(layout, dataclasses.replace(first, state=PipelineState(T0 + 2500, None)))
    # The pipeline itself continues from its last commit ...
    assert store.pipeline_state(layout, "p1") == PipelineState(T0 + 2500, None)
    # ... a new one over the same tables starts at the recovery point: the latest finest bucket.
    assert store.pipeline_state(layout, "p2") == PipelineState(None, T0 + 2000)
    second = batch(layout, 1, [row(T0 + 1000, "A", T0 + 1000, 1, 0, 1.0, 1)], pipeline="p2")
    store.write_batch(layout, dataclasses.replace(second, state=PipelineState(T0 + 1000, T0 + 2000)))
    assert store.pipeline_state(layout, "p2") == PipelineState(T0 + 1000, T0 + 2000)


def test_views_give_final_values(store: SqlStore, layout) -> None:
    """``<table>_FINAL``: what a dashboard reads, avg finalized from its sum and count."""
    store.write_batch(layout, batch(layout, 1, [row(T0, "IBM", T0 + 100, 1, 0, 10.0, 5),
                                                row(T0 + 1000, "WSO2", T0 + 1100, 1, 1, 3.0, 2)]))
    store.write_batch(layout, batch(layout, 2, [row(T0, "IBM", T0 + 900, 2, 0, 20.0, 1)]))
    store.ensure_schema(layout)  # idempotent, views included
    with store._engine.connect() as conn:  # a BI tool's plain SQL
        rows = conn.exec_driver_sql(
            'SELECT "AGG_TIMESTAMP", symbol, "avgPrice", total, low, high, value, "AGG_COUNT" '
            'FROM "TradeAggregation_SECONDS_FINAL" ORDER BY "AGG_TIMESTAMP"'.replace(
                '"', "`" if store._engine.dialect.name in ("mysql", "mariadb") else '"')).all()
    assert [tuple(r) for r in rows] == [
        (T0, "IBM", 15.0, 6, 10.0, 20.0, 20.0, 2),
        (T0 + 1000, "WSO2", 3.0, 2, 3.0, 3.0, 6.0, 1),
    ]
