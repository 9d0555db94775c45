"""Reading an SQLite store creates no file, and a read that a writer's checkpoint overlapped is refused."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tiltframe.errors import StoreError
from tiltframe.store.sqlite_read import ImmutableReader, check_unchanged, open_reader


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
