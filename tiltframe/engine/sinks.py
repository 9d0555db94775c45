"""Where the rows of an output stream go: console, files (JSON Lines, CSV, Parquet), a SQL table, or a callback.

Spark replays an unfinished micro-batch with the same id after a crash, so every sink that keeps rows
makes the batch id part of where they land and lets the last attempt win.  File sinks name each file after
the stream and batch and replace it atomically; :class:`StoreTableSink` deletes the batch's rows and
inserts the new ones in one transaction.  A replayed batch therefore never duplicates output.
:func:`sink_for` turns a user's target text (``csv:out/``, ``store:URL#TABLE``, ...) into a sink.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, ClassVar, Protocol

import numpy as np
import pandas as pd
import sqlalchemy as sa
from rich.console import Console
from rich.table import Table
from sqlalchemy.dialects import mysql
from sqlalchemy.engine import Connection, Engine

from tiltframe.errors import DefinitionError, StoreError, UsageError, did_you_mean
from tiltframe.functions.scalars import json_value
from tiltframe.store.dialects.lookup import dialect_of
from tiltframe.store.urls import hide_password
from tiltframe.timeutil.time_columns import aware_times, readable_frame


class Sink(Protocol):
    def write(self, stream: str, batch_id: int, rows: pd.DataFrame) -> None: ...


def rows_as_records(rows: pd.DataFrame) -> list[dict[str, object]]:
    """Plain JSON-friendly dicts (numpy scalars become Python numbers, NaN becomes null, datetimes ISO-8601
    text with their offset rather than pandas' epoch numbers)."""
    return json.loads(readable_frame(rows).to_json(orient="records", double_precision=15))


class ConsoleSink:
    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console()

    def write(self, stream: str, batch_id: int, rows: pd.DataFrame) -> None:
        table = Table(title=f"{stream} (batch {batch_id}, {len(rows)} rows)")
        rows = readable_frame(rows)
        for c in rows.columns:
            table.add_column(str(c))
        for rec in rows.itertuples(index=False):
            table.add_row(*(str(v) for v in rec))
        self.console.print(table)


# --- files ------------------------------------------------------------------------------------------------


class BatchFileSink(ABC):
    """A directory with one file per (stream, batch): ``<stream>-batch-<batch:06d>.<extension>``.

    The file is written under a hidden temporary name (``.<name>.tmp``, which directory readers such as
    Spark skip), flushed to disk and renamed over the target, so readers see the old file or the whole new
    one, and a replayed batch replaces its earlier file instead of adding a second one.  An empty frame
    still writes its (empty) file: the batch's output is whatever its last attempt produced.
    """

    extension: ClassVar[str]

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def file_for(self, stream: str, batch_id: int) -> Path:
        return self.path / f"{stream}-batch-{batch_id:06d}.{self.extension}"

    def write(self, stream: str, batch_id: int, rows: pd.DataFrame) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        target = self.file_for(stream, batch_id)
        tmp = target.with_name(f".{target.name}.tmp")
        try:
            with tmp.open("wb") as fh:
                self.write_file(fh, rows)
                fh.flush()
                os.fsync(fh.fileno())  # the rename must never expose a file whose data is not on disk
            os.replace(tmp, target)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        _fsync_directory(self.path)

    @abstractmethod
    def write_file(self, fh: IO[bytes], rows: pd.DataFrame) -> None:
        """Write ``rows`` in this sink's format to the open binary file ``fh``."""


def _fsync_directory(path: Path) -> None:
    """Make a rename in ``path`` durable (POSIX); platforms that cannot open a directory skip it."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)


class JsonLinesSink(BatchFileSink):
    """One JSON object per row; NaN and missing values become ``null``."""

    extension = "jsonl"

    def write_file(self, fh: IO[bytes], rows: pd.DataFrame) -> None:
        fh.write("".join(json.dumps(rec) + "\n" for rec in rows_as_records(rows)).encode("utf-8"))


class JsonTextSink(BatchFileSink):
    """Lines already in JSON (column ``json``), one a line as given: events of any JSON value (a trickle
    query's outputs), written as their query made them."""

    extension = "jsonl"

    def write_file(self, fh: IO[bytes], rows: pd.DataFrame) -> None:
        fh.write("".join(f"{line}\n" for line in rows["json"]).encode("utf-8"))


class CsvSink(BatchFileSink):
    """CSV with a header row (also for an empty frame); missing values are empty fields, datetimes ISO-8601."""

    extension = "csv"

    def write_file(self, fh: IO[bytes], rows: pd.DataFrame) -> None:
        lists_as_json(readable_frame(rows)).to_csv(fh, index=False, lineterminator="\n", encoding="utf-8")


def lists_as_json(rows: pd.DataFrame) -> pd.DataFrame:
    """List cells (``group_array``) as JSON arrays in text, for CSV fields and SQL columns."""

    def listy(value: object) -> bool:
        return isinstance(value, list | tuple | np.ndarray)

    columns = [c for c in rows.columns if rows[c].dtype == object and any(map(listy, rows[c]))]
    if not columns:
        return rows
    out = rows.copy()
    for c in columns:
        out[c] = [json.dumps(json_value(v), ensure_ascii=False) if listy(v) else v for v in rows[c]]
    return out


class ParquetSink(BatchFileSink):
    """Parquet through pyarrow, with pandas' schema metadata so that reading the file back with pandas gives
    the same dtypes (nullable ``Int64``/``Float64``/``boolean``, strings, timestamps with their zone)."""

    extension = "parquet"

    def write_file(self, fh: IO[bytes], rows: pd.DataFrame) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_pandas(rows, preserve_index=False), fh)


# --- SQL table --------------------------------------------------------------------------------------------

#: Columns :class:`StoreTableSink` adds to every row: which output stream and micro-batch wrote it.
STREAM_COLUMN = "_stream"
BATCH_COLUMN = "_batch_id"
#: Rows turned into Python objects and sent per ``executemany`` (bounds memory on big batches).
INSERT_CHUNK_ROWS = 10_000


def _sql_type(name: str, values: pd.Series) -> sa.types.TypeEngine[Any]:
    """The column type for a frame column, from its dtype (or, for ``object`` columns, from its values)."""
    dtype = values.dtype
    if pd.api.types.is_bool_dtype(dtype):
        return sa.Boolean()
    if pd.api.types.is_integer_dtype(dtype):
        return sa.BigInteger()
    if pd.api.types.is_float_dtype(dtype):
        return sa.Float() if str(dtype).lower() == "float32" else sa.Double()
    if isinstance(dtype, pd.DatetimeTZDtype) or pd.api.types.is_datetime64_dtype(dtype):
        return _timestamp()
    if pd.api.types.is_string_dtype(dtype) or pd.api.types.is_object_dtype(dtype):
        inferred = pd.api.types.infer_dtype(values, skipna=True)
        by_values: dict[str, sa.types.TypeEngine[Any]] = {
            "string": sa.Text(),
            "empty": sa.Text(),
            "integer": sa.BigInteger(),
            "floating": sa.Double(),
            "mixed-integer-float": sa.Double(),
            "boolean": sa.Boolean(),
            "datetime": _timestamp(),
            "bytes": sa.LargeBinary().with_variant(mysql.LONGBLOB(), "mysql", "mariadb"),
        }
        if inferred in by_values:
            return by_values[inferred]
        dtype = f"object holding {inferred} values"
    msg = (
        f"column {name!r} has dtype {dtype}, which has no SQL column type here; "
        f"expected integers, floats, booleans, strings, bytes or timestamps"
    )
    raise StoreError(msg)


def _timestamp() -> sa.types.TypeEngine[Any]:
    """Timestamps in UTC without a zone; MySQL's DATETIME keeps only whole seconds unless told otherwise."""
    return sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")


def _python_values(values: pd.Series) -> list[Any]:
    """The column's values as Python objects the drivers accept (psycopg and PyMySQL refuse numpy scalars
    and pandas' ``NA``): missing values (``NA``, ``NaN``, ``NaT``) become ``None``, timestamps naive UTC."""
    missing = values.isna().to_numpy()
    out: list[Any] = []
    for v, gone in zip(values.tolist(), missing, strict=True):
        if gone:
            out.append(None)
        elif isinstance(v, datetime):
            out.append(_naive_utc(v))
        elif isinstance(v, np.generic):
            out.append(v.item())
        else:
            out.append(v)
    return out


def _naive_utc(v: datetime) -> datetime:
    """``v`` in UTC without its zone (a naive ``v`` is taken to be UTC already), to the microsecond."""
    if isinstance(v, pd.Timestamp):
        v = v.floor("us").to_pydatetime()
    return v if v.tzinfo is None else v.astimezone(UTC).replace(tzinfo=None)


def _index_name(table: str) -> str:
    """A name for the table's (stream, batch) index, within every dialect's identifier limit (63)."""
    name = f"ix_{table}_batch"
    if len(name) <= 60:
        return name
    return f"ix_{table[:40]}_{hashlib.sha1(table.encode()).hexdigest()[:8]}_batch"


class StoreTableSink:
    """Appends each micro-batch's rows to a table in an SQLite file, PostgreSQL or MySQL/MariaDB database.

    ``url`` is what ``@store`` takes (see ``tiltframe.store.urls``): an SQLite file path or ``sqlite:///``
    URL, a SQLAlchemy URL (``postgresql+psycopg://...``, ``mysql+pymysql://...``) or a JDBC URL.  The
    table is created on the first non-empty batch from the frame's dtypes, plus ``_stream`` and
    ``_batch_id`` columns.  Each write deletes the rows earlier attempts of the same (stream, batch) left
    and inserts the new ones in one transaction, so a replayed batch replaces its rows.  An empty frame
    inserts nothing (nor creates the table), but still removes an earlier attempt's rows.
    """

    def __init__(self, url: str | Path, table: str) -> None:
        from tiltframe.model.aggregations import StoreSpec
        from tiltframe.store.urls import store_target

        if not table or "." in table:
            msg = f"output table name {table!r} must be a plain name (no schema, not empty)"
            raise UsageError(msg)
        self.table_name = table
        try:  # "sqlite": a bare path is a file; URLs with a scheme are still servers or sqlite:///
            target = store_target(StoreSpec("sqlite", str(url)))
        except DefinitionError as e:
            msg = f"cannot write output table {table} to {hide_password(str(url))!r}: {e.message}"
            raise UsageError(msg) from None
        self._engine = _engine(target)
        self.url = hide_password(self._engine.url)
        self._table: sa.Table | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"StoreTableSink({self.url!r}, {self.table_name!r})"

    def __enter__(self) -> StoreTableSink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._engine.dispose()

    def write(self, stream: str, batch_id: int, rows: pd.DataFrame) -> None:
        for name in (STREAM_COLUMN, BATCH_COLUMN):
            if name in rows.columns:
                msg = f"stream {stream} has a column {name!r}, which output table {self.table_name} keeps for itself"
                raise StoreError(msg)
        rows = lists_as_json(rows)
        with self._errors(f"write batch {batch_id} of stream {stream} to"):
            table = self._ensure_table(stream, rows) if len(rows) else self._existing_table()
            if table is None:  # an empty frame and no table yet: nothing to replace
                return
            if len(rows):
                self._check_columns(table, stream, [str(c) for c in rows.columns])
            with self._transaction() as conn:
                c = table.c
                conn.execute(sa.delete(table).where(c[STREAM_COLUMN] == stream, c[BATCH_COLUMN] == batch_id))
                for start in range(0, len(rows), INSERT_CHUNK_ROWS):
                    chunk = rows.iloc[start : start + INSERT_CHUNK_ROWS]
                    names = [str(name) for name in chunk.columns]
                    columns = [_python_values(chunk.iloc[:, i]) for i in range(len(names))]
                    records = [
                        {**dict(zip(names, values, strict=True)), STREAM_COLUMN: stream, BATCH_COLUMN: batch_id}
                        for values in zip(*columns, strict=True)
                    ]
                    conn.execute(sa.insert(table), records)

    def stored_columns(self) -> list[str] | None:
        """The columns of the table as the database has it, or None when it does not exist yet."""
        with self._errors("read the columns of"):
            table = self._existing_table()
        return None if table is None else [c.name for c in table.columns]

    # --- the table ------------------------------------------------------------------------------------

    def _existing_table(self) -> sa.Table | None:
        """The table as the database has it (reflected once), or None when it does not exist yet."""
        with self._lock:
            if self._table is None:
                with self._engine.connect() as conn:
                    if sa.inspect(conn).has_table(self.table_name):
                        self._table = sa.Table(self.table_name, sa.MetaData(), autoload_with=conn)
            return self._table

    def _ensure_table(self, stream: str, rows: pd.DataFrame) -> sa.Table:
        """The table, created from ``rows``' columns if missing.  Created in its own transaction (MySQL
        commits DDL implicitly); when another writer created it meanwhile, the existing table is used."""
        table = self._existing_table()
        if table is not None:
            return table
        md = sa.MetaData()
        new = sa.Table(
            self.table_name,
            md,
            *(sa.Column(str(name), _sql_type(str(name), rows.iloc[:, i])) for i, name in enumerate(rows.columns)),
            sa.Column(STREAM_COLUMN, sa.String(255), nullable=False),
            sa.Column(BATCH_COLUMN, sa.BigInteger(), nullable=False),
        )
        sa.Index(_index_name(self.table_name), new.c[STREAM_COLUMN], new.c[BATCH_COLUMN])
        with self._lock:
            try:
                with self._transaction() as conn:
                    md.create_all(conn, checkfirst=True)
            except sa.exc.DBAPIError:
                with self._engine.connect() as conn:
                    if not sa.inspect(conn).has_table(self.table_name):
                        raise
        table = self._existing_table()
        if table is None:  # dropped again between creating and reading it
            msg = f"output table {self.table_name} in {self.url} disappeared right after it was created"
            raise StoreError(msg)
        return table

    def _check_columns(self, table: sa.Table, stream: str, columns: list[str]) -> None:
        """Refuse rows whose columns are not the table's, before writing any of them."""
        stored = [c.name for c in table.columns if c.name not in (STREAM_COLUMN, BATCH_COLUMN)]
        missing = [c for c in columns if c not in stored]
        extra = [c for c in stored if c not in columns]
        lacks_keys = [c for c in (STREAM_COLUMN, BATCH_COLUMN) if c not in table.c]
        if not (missing or extra or lacks_keys):
            return
        parts = []
        if missing:
            parts.append(f"the rows have {', '.join(missing)}, which the table lacks")
        if extra:
            parts.append(f"the table has {', '.join(extra)}, which the rows lack")
        if lacks_keys:
            parts.append(f"the table lacks {', '.join(lacks_keys)}, so it was not made by this sink")
        msg = (
            f"output table {self.table_name} in {self.url} does not match the rows of stream {stream}: "
            f"{'; '.join(parts)}; drop or rename the table, or write to another one"
        )
        raise StoreError(msg)

    # --- connections ----------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[Connection]:
        """One write transaction, exclusive from its start where the database needs telling (SQLite's ``BEGIN
        IMMEDIATE``: two writers must never both read and then fail to upgrade their lock)."""
        with self._engine.connect() as conn:
            conn = dialect_of(conn).exclusive(conn)
            with conn.begin():
                yield conn

    @contextlib.contextmanager
    def _errors(self, action: str) -> Iterator[None]:
        """Database failures become a ``StoreError`` naming the table and the database (no password)."""
        try:
            yield
        except sa.exc.SQLAlchemyError as e:
            cause = getattr(e, "orig", None) or e
            msg = f"could not {action} output table {self.table_name} in {self.url}: {cause}"
            raise StoreError(msg) from e


def _engine(target: Path | sa.URL) -> Engine:
    """The store's engine conventions: ``sqlite_engine`` for a file (WAL, busy timeout), and for a server a
    pooled engine that checks connections first and writes in READ COMMITTED."""
    from tiltframe.store.sql_connections import sqlite_engine

    if isinstance(target, Path):
        target.parent.mkdir(parents=True, exist_ok=True)
        return sqlite_engine(target, read_only=False)
    return sa.create_engine(target, pool_pre_ping=True, isolation_level="READ COMMITTED")


# --- callback ---------------------------------------------------------------------------------------------


class CallbackSink:
    """Hands each batch's rows to ``fn(stream, rows)``; replays are the callback's to handle."""

    def __init__(self, fn: Callable[[str, pd.DataFrame], None]) -> None:
        self.fn = fn

    def write(self, stream: str, batch_id: int, rows: pd.DataFrame) -> None:
        self.fn(stream, rows)


# --- readable window times -------------------------------------------------------------------------------

#: Suffix of the readable twin of an epoch-ms window column (``window_start`` -> ``window_start_time``).
TIME_SUFFIX = "_time"


class ReadableTimesSink:
    """Writes each batch to ``inner`` with, right after each epoch-ms column of ``columns`` (a continuous
    query's ``window_start``/``window_end``), its readable twin ``<column>_time``: a datetime in ``zone``,
    which JSON Lines, CSV and the console write as ISO-8601 with the offset, Parquet and SQL tables as
    their timestamp type.  The numbers stay: expressions, HAVING and existing readers use them."""

    def __init__(self, inner: Sink, columns: tuple[str, ...], zone: str) -> None:
        self.inner, self.columns, self.zone = inner, columns, zone

    def __repr__(self) -> str:
        return f"ReadableTimesSink({self.inner!r}, {self.columns!r}, {self.zone!r})"

    def write(self, stream: str, batch_id: int, rows: pd.DataFrame) -> None:
        columns = self.columns
        if isinstance(self.inner, StoreTableSink):  # a table an earlier version made keeps its columns
            stored = self.inner.stored_columns()
            if stored is not None:
                columns = tuple(c for c in columns if c + TIME_SUFFIX in stored)
        self.inner.write(stream, batch_id, with_readable_times(rows, columns, self.zone))


def with_readable_times(rows: pd.DataFrame, columns: tuple[str, ...], zone: str) -> pd.DataFrame:
    """``rows`` with ``<column>_time`` (a zone-aware datetime) after each of ``columns`` it has, unless a
    column of that name is there already."""
    out = rows
    for c in columns:
        twin = c + TIME_SUFFIX
        if c in out.columns and twin not in out.columns:
            out = out.copy() if out is rows else out
            out.insert(out.columns.get_loc(c) + 1, twin, aware_times(out[c], zone))
    return out


def readable_times(sink: Sink, columns: tuple[str, ...], zone: str) -> Sink:
    """``sink`` writing readable twins of ``columns``; a callback keeps the rows as computed (code reads
    the numbers), and without columns there is nothing to add."""
    if not columns or isinstance(sink, CallbackSink):
        return sink
    return ReadableTimesSink(sink, columns, zone)


# --- targets ----------------------------------------------------------------------------------------------

#: The forms :func:`sink_for` accepts, as shown in its errors.
TARGET_FORMS = "console, PATH or jsonl:PATH, csv:PATH, parquet:PATH, store:URL#TABLE"
_FILE_SINKS: dict[str, type[BatchFileSink]] = {"jsonl": JsonLinesSink, "csv": CsvSink, "parquet": ParquetSink}
#: A leading ``scheme:`` (two characters at least, so that ``C:\\out`` stays a path).
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+):")


def sink_for(target: str) -> Sink:
    """The sink a user's output target names (the value of ``--output STREAM=TARGET``).

    ``console``; ``PATH`` or ``jsonl:PATH`` (a JSON Lines directory); ``csv:PATH``; ``parquet:PATH``;
    ``store:URL#TABLE`` with ``URL`` an SQLite file or ``sqlite:///`` URL, a ``postgresql+psycopg://`` or
    ``mysql+pymysql://`` URL, or a JDBC URL.  Checked here, before any stream starts.
    """
    text = target.strip()
    if text.lower() == "console":
        return ConsoleSink()
    match = _SCHEME.match(text)
    if match is None:
        if not text:
            raise UsageError(_bad_target(target, "it is empty"))
        return JsonLinesSink(text)
    scheme, rest = match.group(1).lower(), text[match.end() :]
    if scheme in _FILE_SINKS:
        if not rest:
            raise UsageError(_bad_target(target, f"{scheme}: needs a directory, as in {scheme}:out/alerts"))
        return _FILE_SINKS[scheme](rest)
    if scheme == "store":
        url, hash_, table = rest.rpartition("#")
        if not hash_ or not url or not table:
            raise UsageError(_bad_target(target, "store: needs a database and a table, as in store:URL#TABLE"))
        return StoreTableSink(url, table)
    schemes = ["console", *_FILE_SINKS, "store"]
    raise UsageError(_bad_target(target, f"unknown kind '{scheme}:'{did_you_mean(scheme, schemes)}"))


def _bad_target(target: str, problem: str) -> str:
    match = _SCHEME.match(target.strip())
    if match is not None:  # a URL's password is never shown (the #TABLE of store:URL#TABLE stays as written)
        url, hash_, table = target.strip()[match.end():].partition("#")
        target = match.group(0) + hide_password(url) + hash_ + table
    return f"output target '{target}': {problem}; expected one of: {TARGET_FORMS}"
