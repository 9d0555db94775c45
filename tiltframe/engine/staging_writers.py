"""How a Spark task writes rows into a server's staging table (``store.staging``), in the server's own bulk
format: ``COPY ... FROM STDIN`` with CSV on PostgreSQL, ``LOAD DATA LOCAL INFILE`` with its tab-separated
text on MariaDB and MySQL.

Both texts are made by Arrow's C++ kernels (no Python object per value).  Each writer holds one
connection per Python worker (workers are reused, so one connection serves many tasks) and commits once,
after the partition's last row.
"""

from __future__ import annotations

import contextlib
import io
import tempfile
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from tiltframe.engine.partials import LEVEL
from tiltframe.errors import StoreError
from tiltframe.store.base import StagingTarget
from tiltframe.store.overflow import unholdable
from tiltframe.store.staging import FILE_MARK

#: The pipeline id, batch id and tag every staged row carries (before its level; ``store.staging``).
Leading = tuple[str, int, str]
_CSV = None  # pyarrow.csv, imported on first use in the worker
_CONNECTIONS: dict[str, Any] = {}


@contextlib.contextmanager
def writer(target: StagingTarget) -> Iterator[Callable[[pa.Table, Leading], None]]:
    """A function writing data tables (stored columns and ``LEVEL``) into ``target``'s staging table;
    committed when the block ends without error, the connection forgotten when it fails."""
    conn = _connection(target)
    try:
        if target.kind == "copy":
            with conn.cursor() as cursor, cursor.copy(target.copy_sql) as copy:
                yield lambda data, leading: copy.write(_csv(data, target, leading))
        else:
            with tempfile.NamedTemporaryFile(prefix="tiltframe-staged-", suffix=".tsv") as file:
                yield lambda data, leading: file.write(_tsv(data, target, leading))
                file.flush()
                if file.tell():
                    _load(conn, target, file.name)
        conn.commit()
    except BaseException:
        _forget(target.conninfo)
        raise


def _connection(target: StagingTarget) -> Any:
    conn = _CONNECTIONS.get(target.conninfo)
    if conn is not None:
        try:
            if target.kind == "copy":
                conn.execute("SELECT 1")
                conn.commit()
            else:
                conn.ping(reconnect=False)
            return conn
        except Exception:  # a stale connection, dropped by the server or the network: open another
            _forget(target.conninfo)
    conn = _open(target)
    _CONNECTIONS[target.conninfo] = conn
    return conn


def _open(target: StagingTarget) -> Any:
    if target.kind == "copy":
        import psycopg

        return psycopg.connect(target.conninfo)
    import pymysql
    from sqlalchemy.engine import make_url

    url = make_url(target.conninfo)
    options = {k: url.query[k] for k in ("charset", "connect_timeout") if k in url.query}
    if "connect_timeout" in options:
        options["connect_timeout"] = int(options["connect_timeout"])
    return pymysql.connect(host=url.host or "localhost", port=url.port or 3306, user=url.username,
                           password=url.password or "", database=url.database, local_infile=True,
                           autocommit=False, **{"charset": "utf8mb4", **options})


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


def _csv(data: pa.Table, target: StagingTarget, leading: Leading) -> memoryview:
    """The rows as COPY's CSV.  Strings are quoted, so an empty string stays one and an unquoted empty
    field is NULL."""
    global _CSV
    if _CSV is None:
        import pyarrow.csv

        _CSV = pyarrow.csv
    columns = _typed_columns(data, target, leading)
    out = io.BytesIO()
    _CSV.write_csv(pa.table(columns, names=[f"c{i}" for i in range(len(columns))]), out,
                   _CSV.WriteOptions(include_header=False, quoting_style="needed"))
    return out.getbuffer()


#: ``LOAD DATA``'s escapes (``ESCAPED BY '\\'``), the backslash first.
_ESCAPES = (("\\", "\\\\"), ("\t", "\\t"), ("\n", "\\n"), ("\r", "\\r"), ("\x00", "\\0"))


def _tsv(data: pa.Table, target: StagingTarget, leading: Leading) -> bytes:
    """The rows as ``LOAD DATA``'s text: fields by tab, rows by newline, NULL as ``\\N``, the escapes above
    in strings, booleans as 0/1, doubles in their shortest form that reads back exactly.  A double the
    server cannot hold (NaN, infinite) is refused here: ``LOAD DATA LOCAL`` would store 0 with a warning."""
    rule = unholdable("mysql")  # the doubles these servers cannot hold, as the driver path checks them
    fields = []
    for column in _typed_columns(data, target, leading):
        kind = column.type
        if rule is not None and pa.types.is_floating(kind) and pc.any(rule[1](column)).as_py():
            msg = f"a double that is NaN or infinite ({rule[0]})"
            raise StoreError(msg)
        if pa.types.is_boolean(kind):
            column = column.cast(pa.int8())
        text = column.cast(pa.string())
        if pa.types.is_string(kind):
            for old, new in _ESCAPES:
                text = pc.replace_substring(text, old, new)
        fields.append(pc.fill_null(text, "\\N"))
    lines = pc.binary_join_element_wise(*fields, "\t").cast(pa.large_string())
    if isinstance(lines, pa.ChunkedArray):
        lines = lines.combine_chunks()
    whole = pa.LargeListArray.from_arrays(pa.array([0, len(lines)], pa.int64()), lines)
    return pc.binary_join(whole, pa.scalar("\n", pa.large_string()))[0].as_buffer().to_pybytes() + b"\n"


def _load(conn: Any, target: StagingTarget, path: str) -> None:
    """``LOAD DATA LOCAL`` the file at ``path``; a warning (a value the server changed) fails the task."""
    literal = "'" + path.replace("\\", "\\\\").replace("'", "\\'") + "'"
    with conn.cursor() as cursor:
        cursor.execute(target.copy_sql.replace(FILE_MARK, literal))
        if cursor.warning_count:
            cursor.execute("SHOW WARNINGS LIMIT 3")
            said = "; ".join(str(row[2]) for row in cursor.fetchall())
            msg = f"the server changed staged values while loading them ({said})"
            raise StoreError(msg)
