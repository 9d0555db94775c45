"""SqlStore on SQLite, PostgreSQL and MariaDB: schema, merge semantics, replay, ranges, rejected events,
isolation, URLs."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import tiltframe.store.writes.upserts as upserts
from tiltframe.aggregates.layout import AggregationLayout
from tiltframe.errors import DefinitionError, NotSupportedYet, StoreError
from tiltframe.model.aggregations import StoreSpec
from tiltframe.model.durations import Granularity, Unit
from tiltframe.store import DB_FILE_NAME, connect_store
from tiltframe.store.base import REJECTED_COLUMNS, REJECTED_TIMES, BatchStats, BatchWrite, PipelineState
from tiltframe.store.sql import SqlStore
from tiltframe.store.urls import store_target
from tiltframe.store.writes import commits

from .conftest import MIN, SEC, SQLITE_ONLY, make_layout, rows_table

T0 = 1_700_000_000_000
REPO = Path(__file__).resolve().parents[2]


def row(ts: int, sym: str, ev: int, batch: int, seq: int, price: float, qty: int, **extra: Any) -> dict:
    """The partial row of one trade (as the engine would produce it for a single event)."""
    r = {"AGG_TIMESTAMP": ts, "symbol": sym, "AGG_EVENT_TIMESTAMP": ev, "AGG_ARRIVAL_BATCH": batch,
         "AGG_ARRIVAL_SEQ": seq, "AGG_COUNT": 1, "avgPrice_SUM": price, "avgPrice_COUNT": 1, "total_SUM": qty,
         "low_MIN": price, "high_MAX": price, "value": price * qty}
    r.update(extra)
    return r


def batch(layout: AggregationLayout, batch_id: int, sec_rows: list[dict], *, rejected: pa.Table | None = None,
          pipeline: str = "p1", min_rows: list[dict] | None = None) -> BatchWrite:
    levels = {SEC: rows_table(layout, sec_rows)}
    if min_rows is not None:
        levels[MIN] = rows_table(layout, min_rows)
    n_rej = 0 if rejected is None else rejected.num_rows
    n_moved = 0 if rejected is None or "kind" not in rejected.column_names else rejected["kind"].to_pylist().count(
        "moved")
    stats = BatchStats(len(sec_rows) + n_rej, len(sec_rows), n_rej - n_moved,
                       min((r["AGG_EVENT_TIMESTAMP"] for r in sec_rows), default=None),
                       max((r["AGG_EVENT_TIMESTAMP"] for r in sec_rows), default=None), n_moved)
    return BatchWrite(pipeline, batch_id, stats, levels, rejected)


def by_symbol(df: pd.DataFrame) -> dict[tuple[int, str], dict]:
    return {(r["AGG_TIMESTAMP"], r["symbol"]): r for r in df.to_dict("records")}


@SQLITE_ONLY
def test_schema_is_created_once_in_wal_mode_without_rowid(store: SqlStore, layout, db_path: Path) -> None:
    store.ensure_schema(layout)
    with SqlStore.sqlite(db_path) as again:
        again.ensure_schema(layout)  # same definition: accepted
    con = sqlite3.connect(db_path)
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    ddl = dict(con.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'").fetchall())
    assert {"TradeAggregation_SECONDS", "TradeAggregation_MINUTES", "TILTFRAME_AGGREGATIONS",
            "TILTFRAME_BATCHES", "TILTFRAME_REJECTED"} <= set(ddl)
    assert "WITHOUT ROWID" in ddl["TradeAggregation_SECONDS"]
    assert 'PRIMARY KEY ("AGG_TIMESTAMP", symbol)' in ddl["TradeAggregation_SECONDS"]
    assert con.execute("SELECT granularities FROM TILTFRAME_AGGREGATIONS").fetchone()[0] == "SECONDS,MINUTES"
    con.close()
    assert store.url == f"sqlite:///{db_path.resolve()}"


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


def test_without_latest_items_event_time_is_a_max(tmp_path: Path) -> None:
    layout = make_layout(with_latest=False)
    assert not layout.tracks_arrival
    with SqlStore.sqlite(tmp_path / "db") as store:
        store.ensure_schema(layout)
        for b, ev in ((1, T0 + 700), (2, T0 + 300)):
            r = {k: v for k, v in row(T0, "A", ev, b, 0, 1.0, 1).items() if k in layout.column_types}
            store.write_batch(layout, batch(layout, b, [r]))
        got = store.read(layout, SEC)
    assert list(got.columns) == list(layout.column_types)
    assert got["AGG_EVENT_TIMESTAMP"].tolist() == [T0 + 700] and got["total_SUM"].tolist() == [2]


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


@SQLITE_ONLY
def test_a_different_definition_is_refused(store: SqlStore, layout, db_path: Path) -> None:
    store.write_batch(layout, batch(layout, 1, [row(T0, "A", T0, 1, 0, 1.0, 1)]))
    other = make_layout(granularities=(SEC, MIN, Granularity(Unit.HOURS)))
    assert other.spec_hash != layout.spec_hash
    with SqlStore.sqlite(db_path) as s2, pytest.raises(StoreError) as err:
        s2.ensure_schema(other)
    text = str(err.value)
    assert "made for an earlier definition of it (level HOURS added" in text
    assert "tiltframe validate APP -d DIR" in text and "tiltframe migrate APP -d DIR" in text
    with SqlStore.sqlite(db_path, read_only=True) as r, pytest.raises(StoreError, match="earlier defin"):
        r.read(other, SEC)


@SQLITE_ONLY
def test_a_table_dropped_after_a_read_is_looked_up_again(store: SqlStore, layout, db_path: Path) -> None:
    """A reader remembers the tables it has seen; one dropped meanwhile by another process reads as empty,
    as a table never made does, instead of failing."""
    store.write_batch(layout, batch(layout, 1, [row(T0, "A", T0, 1, 0, 1.0, 1)]))
    with SqlStore.sqlite(db_path, read_only=True) as reader:
        assert len(reader.read(layout, SEC)) == 1
        with sqlite3.connect(db_path) as db:
            db.execute(f'DROP TABLE "{layout.table_name(SEC)}"')
        db.close()
        assert reader.read(layout, SEC).empty


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


def test_never_written_store_says_run_the_app_first(tmp_path: Path, layout) -> None:
    missing = tmp_path / "nothing" / "tiltframe.db"
    with SqlStore.sqlite(missing, read_only=True) as r:
        with pytest.raises(StoreError, match=r"no data for aggregation TradeAggregation in .*; run the app"):
            r.read(layout, SEC)
        with pytest.raises(StoreError, match="opened read-only"):
            r.ensure_schema(layout)
        assert not r.is_committed(layout, "p", 1)
    assert not missing.parent.exists()  # a reader creates nothing
    with SqlStore.sqlite(tmp_path / "other.db") as w:
        w.ensure_schema(make_layout(name="Other"))
    with SqlStore.sqlite(tmp_path / "other.db", read_only=True) as r:
        with pytest.raises(StoreError, match="run the app"):
            r.info(layout)
        assert not r.is_committed(layout, "p", 1)


READER = """
import json, sys
from tiltframe.store import connect_store
from tiltframe.aggregates.layout import AggregationLayout
sys.path.insert(0, sys.argv[2])
from conftest import SEC, make_layout
with connect_store(None, sys.argv[1], read_only=True) as store:
    print(json.dumps(sorted(store.read(make_layout(), SEC)["total_SUM"].tolist())))
"""


@SQLITE_ONLY
def test_readers_see_only_committed_batches(store: SqlStore, layout, db_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    store.write_batch(layout, batch(layout, 1, [row(T0, "A", T0, 1, 0, 1.0, 1)]))
    inside, release = threading.Event(), threading.Event()
    original = commits.record_commit

    def paused(*args: Any) -> None:
        original(*args)
        inside.set()  # everything of batch 2 is written, the transaction is still open
        assert release.wait(30)

    monkeypatch.setattr(commits, "record_commit", paused)
    writer = threading.Thread(target=store.write_batch, args=(layout, batch(layout, 2, [
        row(T0, "A", T0, 2, 0, 1.0, 10), row(T0 + 1000, "B", T0, 2, 1, 1.0, 100)])))
    writer.start()
    try:
        assert inside.wait(30)
        with connect_store(None, db_path.parent, read_only=True) as reader:
            assert reader.read(layout, SEC)["total_SUM"].tolist() == [1]
            assert not reader.is_committed(layout, "p1", 2)
            env = {**os.environ, "PYTHONPATH": str(REPO)}
            args = [sys.executable, "-c", READER, str(db_path.parent), str(Path(__file__).parent)]
            out = subprocess.run(args, capture_output=True, text=True, env=env, timeout=60, check=True)
            assert json.loads(out.stdout) == [1]
            release.set()
            writer.join(30)
            assert sorted(reader.read(layout, SEC)["total_SUM"]) == [11, 100]
            assert reader.is_committed(layout, "p1", 2)
    finally:
        release.set()
        writer.join(30)


def test_connect_store_urls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, layout) -> None:
    with connect_store(None, tmp_path / "d") as s:
        assert isinstance(s, SqlStore) and s.url.endswith(f"/d/{DB_FILE_NAME}")
        s.ensure_schema(layout)
    assert (tmp_path / "d" / DB_FILE_NAME).exists()
    monkeypatch.chdir(tmp_path)
    with connect_store(StoreSpec("rdbms", "jdbc:sqlite:rel/r.db"), "ignored") as s:
        s.ensure_schema(layout)
    assert (tmp_path / "rel" / "r.db").exists() and not (tmp_path / "ignored").exists()
    with connect_store(StoreSpec("sqlite", str(tmp_path / "abs.db")), "x") as s:
        assert s.url == f"sqlite:///{tmp_path / 'abs.db'}"
    with connect_store(StoreSpec("RDBMS", f"jdbc:sqlite:{tmp_path}/q.db?journal_mode=wal"), "x") as s:
        assert s.url.endswith("/q.db")
    with pytest.raises(NotSupportedYet, match="unknown database 'oracle'"):
        connect_store(StoreSpec("rdbms", "jdbc:oracle://h/db"), tmp_path)
    with pytest.raises(NotSupportedYet, match="type='mongodb'"):
        connect_store(StoreSpec("mongodb", "mongodb://h"), tmp_path)
    with pytest.raises(DefinitionError, match=r"needs jdbc\.url"):
        connect_store(StoreSpec("rdbms"), tmp_path)


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


def test_store_of_an_earlier_version_is_named(db_path: Path, layout) -> None:
    db_path.parent.mkdir(parents=True)
    with sqlite3.connect(db_path) as conn:
        conn.execute("CREATE TABLE TILTFRAME_REJECTED (id INTEGER PRIMARY KEY, aggregation TEXT)")
    with SqlStore.sqlite(db_path) as s, pytest.raises(StoreError, match="earlier version of tiltframe"):
        s.ensure_schema(layout)


@pytest.mark.parametrize(
    ("url", "user", "password", "expected"),
    [
        # Seed 000's MySQL URL as written, with its Java-only options left out.
        ("jdbc:mysql://localhost:3306/TestDB", "root", "root", "mysql+pymysql://root:root@localhost:3306/TestDB"),
        ("jdbc:mysql://h/db?useSSL=false&serverTimezone=UTC", "u", None, "mysql+pymysql://u@h:3306/db"),
        ("jdbc:mariadb://h:3307/db", None, None, "mariadb+pymysql://h:3307/db"),
        ("jdbc:postgresql://db.local/roll?user=u&password=p&sslmode=disable", None, None,
         "postgresql+psycopg://u:p@db.local:5432/roll?sslmode=disable"),
        ("postgresql://u:p@h:6543/roll", "other", None, "postgresql+psycopg://other:p@h:6543/roll"),
        ("jdbc:postgresql://h/db", "${TF_TEST_USER}", "${TF_TEST_PASSWORD}", "postgresql+psycopg://me:s%40cret@h:5432/db"),
    ],
)
def test_server_urls(url: str, user: str | None, password: str | None, expected: str,
                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TF_TEST_USER", "me")
    monkeypatch.setenv("TF_TEST_PASSWORD", "s@cret")
    target = store_target(StoreSpec("rdbms", url, user, password))
    assert target.render_as_string(hide_password=False) == expected


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (StoreSpec("rdbms", "jdbc:postgresql://h/db", "u", "${TF_UNSET_VARIABLE}"),
         "password=...) reads the environment variable TF_UNSET_VARIABLE, which is not set"),
        (StoreSpec("rdbms", "jdbc:postgresql://h/"), "must name one database"),
        (StoreSpec("rdbms", "jdbc:mysql://h:port/db"), "the port is not a number"),
    ],
)
def test_bad_server_urls(spec: StoreSpec, message: str) -> None:
    with pytest.raises(DefinitionError, match=re.escape(message)):
        store_target(spec)


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
