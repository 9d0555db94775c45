"""Reading an SQLite store without creating or writing anything, even on a read-only disk.

A database in WAL mode makes every reader create (or register in) the ``-wal`` and ``-shm`` files beside
it, so a query on a read-only data directory would fail with "unable to open database file", and a query
on a writable one would leave those files behind.  When no writer holds uncommitted-to-file data (no
``-wal`` file, or an empty one), every committed transaction is in the database file itself: a reader then
opens it as ``immutable`` (no locks, no side files) and checks, when its transaction ends, that the file did
not change meanwhile (a writer's checkpoint); if it did, the read is refused rather than answered from a
torn state.  While a writer is active (a non-empty ``-wal``), the reader takes SQLite's usual WAL path.

An immutable connection is kept for the next read while it is not :func:`stale` (the same
file, unchanged, and still no writer), which spares a server opening the file and parsing its schema for
every request; a connection on the WAL path is closed after its read, so that no reader keeps the side files.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from tiltframe.errors import StoreError


class ImmutableReader(sqlite3.Connection):
    """A connection on a database file read as immutable, with the file's state when it was opened."""

    path: Path
    opened_as: tuple[int, ...]


def _state(path: Path) -> tuple[int, ...]:
    st = os.stat(path)
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def _wal_is_empty(path: Path) -> bool:
    try:
        return os.stat(f"{path}-wal").st_size == 0
    except FileNotFoundError:
        return True


def open_reader(path: Path, timeout: float) -> sqlite3.Connection:
    """A read-only connection on ``path`` that creates no file (immutable while no writer is active)."""
    uri = f"{path.resolve().as_uri()}?mode=ro"
    if path.exists():
        opened_as = _state(path)  # before the -wal check, so a checkpoint in between is seen at the end
        if _wal_is_empty(path):
            conn = sqlite3.connect(f"{uri}&immutable=1", uri=True, timeout=timeout, isolation_level=None,
                                   check_same_thread=False, factory=ImmutableReader)
            conn.path, conn.opened_as = path, opened_as
            return conn
    return sqlite3.connect(uri, uri=True, timeout=timeout, isolation_level=None, check_same_thread=False)


def stale(conn: object) -> bool:
    """Whether an immutable connection may no longer serve a read: its file changed or was replaced since it
    was opened, or a writer is using it now (its -wal holds what the immutable view would not see)."""
    if not isinstance(conn, ImmutableReader):
        return False
    try:
        return _state(conn.path) != conn.opened_as or not _wal_is_empty(conn.path)
    except FileNotFoundError:
        return True


def kept(conn: object) -> bool:
    """Whether a connection given back may be kept for the next read: only an immutable one, not stale."""
    return isinstance(conn, ImmutableReader) and not stale(conn)


def check_unchanged(conn: object) -> None:
    """Refuse the end of a read on an immutable connection whose file changed since it was opened."""
    if isinstance(conn, ImmutableReader) and (not conn.path.exists() or _state(conn.path) != conn.opened_as):
        msg = (f"the database {conn.path} changed while it was read (a writer committed meanwhile); "
               f"nothing was answered, ask again")
        raise StoreError(msg)


#: The WAL-index header at the start of the ``-shm`` file: two copies of 48 bytes holding the counter of
#: transactions, the last valid frame and the WAL's salts (sqlite.org/walformat.html, "The WAL-Index Header").
_WAL_INDEX_HEADER = 96


def change_token(path: Path) -> tuple[object, ...] | None:
    """A value that differs whenever a transaction was committed to the database ``path`` (or the file was
    replaced) since it was last taken: the file's identity, size and modification time, and the WAL-index
    header that every commit rewrites.  Read without opening the database, so without creating any file.
    None when there is no database."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    parts: list[object] = [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns]
    for suffix in ("-wal", "-shm"):
        try:
            side = os.stat(f"{path}{suffix}")
        except FileNotFoundError:
            parts.append(None)
            continue
        parts.append((side.st_ino, side.st_size, side.st_mtime_ns))
    try:
        with open(f"{path}-shm", "rb") as shm:
            parts.append(shm.read(_WAL_INDEX_HEADER))
    except FileNotFoundError:
        parts.append(None)
    return tuple(parts)
