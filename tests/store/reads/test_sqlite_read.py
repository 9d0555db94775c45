"""Reading an SQLite store creates no file, a read that a writer's checkpoint overlapped is refused, and a
connection is kept for the next read only while the file is unchanged and no writer is active."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
import sqlalchemy as sa

from tiltframe.errors import StoreError
from tiltframe.store.reads.sqlite_read import ImmutableReader, check_unchanged, open_reader
from tiltframe.store.sql_connections import sqlite_engine


def _database(path: Path) -> None:
    """A WAL database with one row, its writer closed (so its -wal and -shm files are gone)."""
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("CREATE TABLE t (x INTEGER)")
        db.execute("INSERT INTO t VALUES (1)")
    db.close()


def test_a_reader_of_a_closed_database_creates_nothing(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    _database(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.db"]
    reader = open_reader(path, timeout=1)
    assert isinstance(reader, ImmutableReader)
    assert reader.execute("SELECT x FROM t").fetchall() == [(1,)]
    check_unchanged(reader)
    reader.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.db"]


def test_a_read_overlapped_by_a_checkpoint_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    _database(path)
    reader = open_reader(path, timeout=1)
    writer = sqlite3.connect(path)
    writer.execute("INSERT INTO t VALUES (2)")
    writer.commit()
    writer.close()  # the last connection: its checkpoint rewrites the database file
    with pytest.raises(StoreError, match="changed while it was read"):
        check_unchanged(reader)
    reader.close()


def test_while_a_writer_is_active_the_reader_takes_the_wal_path(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    _database(path)
    writer = sqlite3.connect(path)
    writer.execute("INSERT INTO t VALUES (2)")
    writer.commit()  # in the -wal file, not yet in the database file
    reader = open_reader(path, timeout=1)
    assert not isinstance(reader, ImmutableReader)
    assert reader.execute("SELECT count(*) FROM t").fetchone() == (2,)
    reader.close()
    writer.close()


def _read(engine: sa.Engine) -> tuple[int, object]:
    """The count of ``t`` in one read transaction, and the DBAPI connection that answered it."""
    with engine.connect() as conn, conn.begin():
        return conn.exec_driver_sql("SELECT count(*) FROM t").scalar_one(), conn.connection.dbapi_connection


def test_an_immutable_reader_is_kept_until_its_file_changes(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    _database(path)
    engine = sqlite_engine(path, read_only=True)
    (n1, first), (n2, second) = _read(engine), _read(engine)
    assert (n1, n2) == (1, 1) and first is second  # one connection serves both reads
    writer = sqlite3.connect(path)
    writer.execute("INSERT INTO t VALUES (2)")
    writer.commit()
    n3, third = _read(engine)  # a writer is active: its -wal holds the row the immutable view would miss
    assert n3 == 2 and not isinstance(third, ImmutableReader)
    writer.close()  # checkpointed into the file: the kept connection's file changed
    n4, fourth = _read(engine)
    assert n4 == 2 and fourth is not first and isinstance(fourth, ImmutableReader)
    engine.dispose()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.db"]  # no reader kept the side files


def test_a_replaced_database_file_is_read_anew(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    _database(path)
    engine = sqlite_engine(path, read_only=True)
    assert _read(engine)[0] == 1
    other = tmp_path / "other.db"
    _database(other)
    with sqlite3.connect(other) as db:
        db.execute("INSERT INTO t VALUES (2), (3)")
    db.close()
    other.replace(path)
    assert _read(engine)[0] == 3
    engine.dispose()
