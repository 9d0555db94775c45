"""SqlStore on SQLite, PostgreSQL and MariaDB: schema, merge semantics, replay, ranges, rejected events,
isolation, URLs."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.store.conftest import MIN, SEC, SQLITE_ONLY, T0, batch, make_layout, row
from tiltframe.errors import DefinitionError, NotSupportedYet, StoreError
from tiltframe.model.aggregations import StoreSpec
from tiltframe.model.durations import Granularity, Unit
from tiltframe.store import DB_FILE_NAME, connect_store
from tiltframe.store.sql import SqlStore
from tiltframe.store.urls import store_target
from tiltframe.store.writes import commits

REPO = Path(__file__).resolve().parents[2]


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
