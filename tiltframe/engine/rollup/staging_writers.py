"""How a Spark task writes rows into a server's staging table (``store.writes.staging``), in the server's own bulk
format (``store.writes.bulk_formats``, made by numpy and Arrow's C++ kernels, no Python object per value):
``COPY ... FROM STDIN`` in its binary format on PostgreSQL, ``LOAD DATA LOCAL INFILE`` with its
tab-separated text on MariaDB and MySQL.

Each writer holds one connection per Python worker (workers are reused, so one connection serves many
tasks) and commits once, after the partition's last row.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa

from tiltframe.engine.rollup.partials import LEVEL
from tiltframe.errors import StoreError
from tiltframe.store.base import StagingTarget
from tiltframe.store.writes.bulk_formats import (
    BINARY_HEADER,
    BINARY_TRAILER,
    FILE_MARK,
    binary_rows,
    check_no_warnings,
    file_literal,
    load_tsv,
)

#: The pipeline id, batch id and tag every staged row carries (before its level; ``store.writes.staging``).
Leading = tuple[str, int, str]
_CONNECTIONS: dict[str, Any] = {}


class _Copy:
    """PostgreSQL's ``COPY ... FROM STDIN`` (``FORMAT binary``) through psycopg, streamed as rows come."""

    def open(self, target: StagingTarget) -> Any:
        import psycopg

        return psycopg.connect(target.conninfo)

    def check(self, conn: Any) -> None:
        conn.execute("SELECT 1")
        conn.commit()

    @contextlib.contextmanager
    def rows(self, conn: Any, target: StagingTarget) -> Iterator[Callable[[pa.Table, Leading], None]]:
        with conn.cursor() as cursor, cursor.copy(target.copy_sql) as copy:
            copy.write(BINARY_HEADER)
            yield lambda data, leading: _copy(copy, data, target, leading)
            copy.write(BINARY_TRAILER)


class _Load:
    """MariaDB's and MySQL's ``LOAD DATA LOCAL INFILE`` through PyMySQL, of a file of the partition's rows."""

    def open(self, target: StagingTarget) -> Any:
        import pymysql
        from sqlalchemy.engine import make_url

        url = make_url(target.conninfo)
        options = {k: url.query[k] for k in ("charset", "connect_timeout") if k in url.query}
        if "connect_timeout" in options:
            options["connect_timeout"] = int(options["connect_timeout"])
        return pymysql.connect(host=url.host or "localhost", port=url.port or 3306, user=url.username,
                               password=url.password or "", database=url.database, local_infile=True,
                               autocommit=False, **{"charset": "utf8mb4", **options})

    def check(self, conn: Any) -> None:
        conn.ping(reconnect=False)

    @contextlib.contextmanager
    def rows(self, conn: Any, target: StagingTarget) -> Iterator[Callable[[pa.Table, Leading], None]]:
        with tempfile.NamedTemporaryFile(prefix="tiltframe-staged-", suffix=".tsv") as file:
            yield lambda data, leading: file.write(_tsv(data, target, leading))
            file.flush()
            if file.tell():
                _load(conn, target, file.name)


#: The bulk protocol of each kind of staging target (``StagingTarget.kind``, the store dialect's choice).
_PROTOCOLS: dict[str, _Copy | _Load] = {"copy": _Copy(), "load": _Load()}


@contextlib.contextmanager
def writer(target: StagingTarget) -> Iterator[Callable[[pa.Table, Leading], None]]:
    """A function writing data tables (stored columns and ``LEVEL``) into ``target``'s staging table;
    committed when the block ends without error, the connection forgotten when it fails."""
    protocol = _PROTOCOLS[target.kind]
    conn = _connection(target, protocol)
    try:
        with protocol.rows(conn, target) as write:
            yield write
        conn.commit()
    except BaseException:
        _forget(target.conninfo)
        raise


def _connection(target: StagingTarget, protocol: _Copy | _Load) -> Any:
    conn = _CONNECTIONS.get(target.conninfo)
    if conn is not None:
        try:
            protocol.check(conn)
            return conn
        except Exception:  # a stale connection, dropped by the server or the network: open another
            _forget(target.conninfo)
    conn = _CONNECTIONS[target.conninfo] = protocol.open(target)
    return conn


def _forget(conninfo: str) -> None:
    conn = _CONNECTIONS.pop(conninfo, None)
    if conn is not None:
        with contextlib.suppress(Exception):  # a broken connection may fail to close too
            conn.close()


def _typed_columns(data: pa.Table, target: StagingTarget, leading: Leading) -> list[pa.Array | pa.ChunkedArray]:
    """The staging table's columns: pipeline, batch, tag, level, then the stored columns in the tables'
    types (a key is never NULL)."""
    n = data.num_rows
    pipeline_id, batch_id, tag = leading
    columns: list[pa.Array | pa.ChunkedArray] = [
        pa.array([pipeline_id] * n, pa.string()), pa.array([batch_id] * n, pa.int64()),
        pa.array([tag] * n, pa.string()), data.column(LEVEL).cast(pa.int32())]
    for name, kind in target.columns:
        column = data.column(name).cast(kind)
        if name in target.keys and column.null_count:
            msg = f"partial rows hold NULL in key column {name}; keys are never NULL"
            raise StoreError(msg)
        columns.append(column)
    return columns


def _copy(copy: Any, data: pa.Table, target: StagingTarget, leading: Leading) -> None:
    for piece in binary_rows(_typed_columns(data, target, leading)):
        copy.write(piece)


def _tsv(data: pa.Table, target: StagingTarget, leading: Leading) -> bytes:
    return load_tsv(_typed_columns(data, target, leading))


def _load(conn: Any, target: StagingTarget, path: str) -> None:
    """``LOAD DATA LOCAL`` the file at ``path``; a warning (a value the server changed) fails the task."""
    with conn.cursor() as cursor:
        cursor.execute(target.copy_sql.replace(FILE_MARK, file_literal(path)))
        check_no_warnings(cursor, "staged values")
