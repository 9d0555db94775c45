"""A batch's rows of buckets later than everything a level table holds: inserted by the server's bulk load
(``COPY`` on PostgreSQL, ``LOAD DATA LOCAL`` on MariaDB and MySQL) instead of merged row by row.

Why: in a stream, most of a batch's rows at the finer levels are of buckets the table has not seen yet,
and such a row cannot meet a stored one, so there is nothing to merge it with.  Inserting costs a server
far less than an upsert: 1.6M rows of W1's shape took PostgreSQL 2.3 s by binary ``COPY`` into the table
against 5.1 s by ``INSERT ... ON CONFLICT`` from a staging table (and more by the driver's multi-row
upserts); MariaDB, whose driver escapes every value in Python, gains the most.

Safe because a batch's write transaction holds its aggregation's lock (``SqlConnections._write``), so no
other writer of it adds rows between reading the table's latest bucket and the load; that latest is over
every shard's rows, so it holds for a sharded table too.  A row that meets a stored one all the same fails
the batch (``COPY``'s unique violation; ``LOAD DATA``'s skipped duplicate is a warning, which fails it
too): never a row lost.  SQLite gains nothing (its upsert of a new key costs what an insert does) and keeps
its upserts.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, TypeVar

import pyarrow as pa
import pyarrow.compute as pc
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tiltframe.aggregates.layout import AGG_TIMESTAMP, AggregationLayout
from tiltframe.errors import StoreError
from tiltframe.store.writes import bulk_formats
from tiltframe.store.writes.bulk_formats import (
    carries,
    load_tsv,
)

if TYPE_CHECKING:
    from tiltframe.store.dialects.base import StoreDialect

T = TypeVar("T")


def can_append(dialect: StoreDialect, layout: AggregationLayout) -> bool:
    """Whether ``layout``'s rows can be bulk-loaded into ``dialect``'s server (``bulk_formats.carries``)."""
    return dialect.bulk_loads and carries(layout.stored_column_types.values())


def latest_bucket(conn: Connection, table: sa.Table) -> int | None:
    """The start of the latest bucket ``table`` holds (None when empty): the primary key's first column, so
    one look-up."""
    latest = conn.execute(sa.select(sa.func.max(table.c[AGG_TIMESTAMP]))).scalar()
    return None if latest is None else int(latest)


def split_new(conn: Connection, layout: AggregationLayout, table: sa.Table,
              data: pa.Table) -> tuple[pa.Table, pa.Table]:
    """Prepared ``data``'s rows of buckets later than the latest ``table`` holds (all of them when it is
    empty), and the others.  Rows sharing a key (which the engine never writes, each level being grouped
    by key) are all left to the upserts, which merge them."""
    latest = latest_bucket(conn, table)
    if latest is None:
        new, rest = data, data.slice(0, 0)
    else:
        newer = pc.greater(data.column(AGG_TIMESTAMP), latest)
        new, rest = data.filter(newer), data.filter(pc.invert(newer))
    if _repeats_a_key(new, layout.stored_key_names):
        return new.slice(0, 0), data
    return new, rest


def _repeats_a_key(data: pa.Table, keys: tuple[str, ...]) -> bool:
    """Whether two rows of ``data``, sorted by ``keys`` (``upserts.prepare_rows``), share them."""
    n = data.num_rows
    if n < 2:
        return False
    same = None
    for k in keys:
        column = data.column(k)
        equal = pc.equal(column.slice(1), column.slice(0, n - 1))
        same = equal if same is None else pc.and_(same, equal)
    return bool(pc.any(same).as_py())


def append_rows(conn: Connection, dialect: StoreDialect, layout: AggregationLayout, table: sa.Table,
                data: pa.Table) -> int:
    """Insert prepared ``data`` (``upserts.prepare_rows``), whose keys ``table`` does not hold, by the
    server's bulk load in ``conn``'s transaction; returns the row count.  Each chunk of rows is encoded
    while the server loads the one before (:func:`ahead`)."""
    if data.num_rows == 0:
        return 0
    loaded = dialect.bulk_append(conn, layout, table, data)
    if loaded != data.num_rows:
        msg = f"the server took {loaded} of {data.num_rows} rows appended to {table.name}"
        raise StoreError(msg)
    return data.num_rows


def tsv_files(data: pa.Table, folder: str) -> Iterator[str]:
    """``data`` as ``LOAD DATA``'s text, a file in ``folder`` (and a statement) per ``bulk_formats.CHUNK_ROWS``
    rows, as the binary format's pieces."""
    rows = bulk_formats.CHUNK_ROWS
    for i in range(0, data.num_rows, rows):
        path = os.path.join(folder, f"{i // rows}.tsv")
        with open(path, "wb") as file:
            file.write(load_tsv(data.slice(i, rows).columns))
        yield path


def ahead(pieces: Iterator[T]) -> Iterator[T]:
    """``pieces``, each made in a background thread while the caller uses the one before: Arrow's and
    numpy's kernels release the GIL, so the driver encodes a chunk while the server loads the last, on
    another core (about 2 s of W1's 5.5M rows into MariaDB)."""
    with ThreadPoolExecutor(1, thread_name_prefix="tiltframe-encode") as pool:
        coming = pool.submit(next, pieces, None)
        while (piece := coming.result()) is not None:
            coming = pool.submit(next, pieces, None)
            yield piece
