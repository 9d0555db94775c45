"""Partial rows into a level table: prepared in Arrow, upserted in multi-row statements.

Merging a batch is the hot path (millions of partial rows per micro-batch at the finest level).  What
made it fast on SQLite: sort the rows by primary key first (the B-tree then fills and updates pages in
order), flatten the Arrow columns into one Python list by slice assignment, and upsert with one cached
multi-row ``INSERT ... VALUES (...), (...) ... ON CONFLICT DO UPDATE`` statement per 500 rows through the
raw DBAPI cursor.  That is about twice as fast as ``executemany`` into a staging table followed by one
``INSERT ... SELECT ... ON CONFLICT``, and keeps no temporary table around.  The merge expressions of the
upsert are ``store.writes.upsert_merges``'; sketch states, which no database can union, are merged here first.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tiltframe.aggregates.layout import AGG_TIMESTAMP, SHARD_ID, AggregationLayout
from tiltframe.aggregates.sketches.stored import MERGE, TO_STORED
from tiltframe.errors import StoreError
from tiltframe.store.dialects import mysql
from tiltframe.store.dialects.lookup import dialect_of
from tiltframe.store.reads.frames import ARROW_TYPES, fetch_all, typed_frame

#: At most this many rows per multi-row upsert statement (fewer where the dialect says,
#: ``StoreDialect.rows_per_statement``), and rows turned into Python objects at a time (bounds memory).
ROWS_PER_STATEMENT = 500
CHUNK_ROWS = 50_000
#: Upsert SQL per (dialect, server version, spec, sharding, table, rows per statement), shared by every
#: store of the process: compiling a 100-row statement takes SQLAlchemy about 10 ms, which every run (every
#: new store) would pay again.
_STATEMENTS: dict[tuple[Any, ...], tuple[str, list[int] | None]] = {}


def prepare_rows(layout: AggregationLayout, data: pa.Table, shard_id: str | None = None) -> pa.Table:
    """The table's columns in order and Arrow types, sorted by primary key (faster B-tree work).

    Partitioned rows carry their writer's ``SHARD_ID``: the rows' own column (the workers of a
    pre-aggregated table), else ``shard_id`` (the deployment's shard).
    """
    if layout.partitioned and SHARD_ID not in data.column_names:  # else each row names its writer (a worker)
        if shard_id is None:
            msg = f"aggregation {layout.name} is partitioned by shard, but the batch has no shard id"
            raise StoreError(msg)
        data = data.append_column(SHARD_ID, pa.array([shard_id] * data.num_rows, pa.string()))
    types = layout.stored_column_types
    missing = [c for c in types if c not in data.column_names]
    if missing:
        got = ", ".join(data.column_names)
        msg = f"rows for {layout.name} lack the columns {', '.join(missing)} (got {got})"
        raise StoreError(msg)
    data = data.select(list(types))
    for k in layout.stored_key_names:
        if data.column(k).null_count:
            msg = f"rows for {layout.name} hold NULL in key column {k}; keys are never NULL"
            raise StoreError(msg)
    target = pa.schema([pa.field(c, ARROW_TYPES[t]) for c, t in types.items()])
    if data.schema != target:
        data = data.cast(target)
    if data.num_rows < 2:
        return data
    return data.take(pa.array(_key_order([_sort_key(data.column(k)) for k in layout.stored_key_names])))\
        .combine_chunks()


def _key_order(keys: list[np.ndarray]) -> np.ndarray:
    """The row order sorting by ``keys``, the first most significant: by one integer that combines them
    (each key's offset from its least, scaled by the ranges of the keys after it) where all are integers
    whose ranges multiply within 62 bits, which sorts in half the time of a sort by several keys; else by
    them all."""
    if not all(k.dtype.kind in "iub" for k in keys):
        return np.lexsort(keys[::-1])
    combined = np.zeros(len(keys[0]), np.int64)
    span = 1
    for key in reversed(keys):
        if key.dtype.kind == "b":
            key = key.view(np.uint8)
        least = key.min()
        width = int(key.max()) - int(least) + 1
        if span * width >= 1 << 62:
            return np.lexsort(keys[::-1])
        combined += (key - least).astype(np.int64) * span  # in the key's own type: no overflow below 2**62
        span *= width
    return np.argsort(combined, kind="stable")


def _sort_key(col: pa.ChunkedArray) -> np.ndarray:
    """A numeric array ordering like ``col``; strings become their rank among the distinct values."""
    if pa.types.is_string(col.type):
        encoded = pc.dictionary_encode(col.combine_chunks())
        rank = pc.rank(encoded.dictionary, sort_keys="ascending", tiebreaker="dense").to_numpy()
        return rank[encoded.indices.to_numpy(zero_copy_only=False)]
    return col.to_numpy()


def _flatten(data: pa.Table) -> list[Any]:
    """Row-major Python values of ``data`` (``[r0c0, r0c1, ..., r1c0, ...]``), built by slice assignment."""
    width = data.num_columns
    flat: list[Any] = [None] * (data.num_rows * width)
    for j, col in enumerate(data.columns):
        flat[j::width] = col.to_pylist()
    return flat


#: The ``SHARD_ID`` of a row that compaction merged from several writers' rows.
COMPACTED = "*"


def after(data: pa.Table, start: int | None) -> pa.Table:
    """The rows of ``data`` whose bucket starts at or after ``start`` (all of them without one)."""
    if start is None or data.num_rows == 0:
        return data
    return data.filter(pc.greater_equal(data.column(AGG_TIMESTAMP), start))


def _bind(values: list[Any], order: list[int] | None) -> list[Any]:
    return values if order is None else [values[i] for i in order]


def upsert_rows(
    conn: Connection, layout: AggregationLayout, table: sa.Table, data: pa.Table
) -> int:
    """Upsert prepared ``data`` into ``table`` in multi-row statements; returns the row count."""
    if mysql.KEY_HASH in table.c:
        data = data.append_column(mysql.KEY_HASH, mysql.key_hashes(layout, data))
    width = data.num_columns
    dialect = dialect_of(conn)
    rows = min(ROWS_PER_STATEMENT, dialect.rows_per_statement)
    per_statement = max(1, min(rows, dialect.max_parameters() // width))
    # Compiled only where rows fill it: a new process's first small batch would pay 10-20 ms a table for a
    # statement it never runs.
    fills = data.num_rows >= per_statement
    many_sql, many_order = _statement(conn, layout, table, per_statement) if fills else ("", None)
    one_sql, one_order = _statement(conn, layout, table, 1)
    step = per_statement * width
    cursor, options = dialect.merge_cursor(conn)
    try:
        for offset in range(0, data.num_rows, CHUNK_ROWS):
            flat = _flatten(data.slice(offset, CHUNK_ROWS))
            whole = len(flat) - len(flat) % step
            for i in range(0, whole, step):
                cursor.execute(many_sql, _bind(flat[i : i + step], many_order), **options)
            if whole < len(flat):
                rest = flat[whole:]
                rows = [_bind(rest[i : i + width], one_order) for i in range(0, len(rest), width)]
                cursor.executemany(one_sql, rows)
    finally:
        cursor.close()
    return data.num_rows



def _statement(
    conn: Connection, layout: AggregationLayout, table: sa.Table, n: int
) -> tuple[str, list[int] | None]:
    """SQL text of the ``n``-row upsert into ``table`` and how to reorder row-major values for it."""
    dialect, store_dialect = conn.dialect, dialect_of(conn)
    key = (dialect.name, dialect.server_version_info, layout.spec_hash, layout.partitioned, table.name,
           len(table.columns), n)
    if key not in _STATEMENTS:
        columns = list(table.columns)
        names = [f"r{i}_{j}" for i in range(n) for j in range(len(columns))]
        rows = [{c.name: sa.bindparam(names[i * len(columns) + j]) for j, c in enumerate(columns)}
                for i in range(n)]
        compiled = store_dialect.upsert(table, layout, rows).compile(dialect=store_dialect.placeholders(dialect))
        if not compiled.positional:
            msg = f"the {dialect.name} driver uses named parameters; positional ones are needed"
            raise StoreError(msg)
        position = {name: i for i, name in enumerate(names)}
        constants = [p for p in compiled.positiontup or () if p not in position]
        if constants:  # PyMySQL's executemany binds parameters of the VALUES clause only
            msg = f"the merge of {table.name} holds constants ({', '.join(constants)}); combine must not"
            raise StoreError(msg)
        order = [position[p] for p in compiled.positiontup or ()]
        _STATEMENTS[key] = (str(compiled), None if order == list(range(len(names))) else order)
    return _STATEMENTS[key]



def merge_sketches(conn: Connection, layout: AggregationLayout, table: sa.Table, data: pa.Table) -> pa.Table:
    """``data`` with each sketch state in its stored form and already merged with the stored one of its
    bucket and key.

    No database can union DataSketches binaries, so the stored states of the batch's buckets are read
    and merged here (the upsert then writes the union).  The caller's write transaction excludes
    every other writer of the aggregation, so nothing changes between this read and the upsert.
    """
    sketches = [s for s in layout.states if s.merge.is_sketch]
    if not sketches or data.num_rows == 0:
        return data
    for s in sketches:
        if s.merge in TO_STORED:
            data = _replace(data, s.name, map(TO_STORED[s.merge], data.column(s.name).to_pylist()))
    keys = list(layout.stored_key_names)
    ts = table.c[AGG_TIMESTAMP]
    bounds = pc.min_max(data.column(AGG_TIMESTAMP)).as_py()
    query = sa.select(*(table.c[k] for k in keys), *(table.c[s.name] for s in sketches)).where(
        ts >= bounds["min"], ts <= bounds["max"])
    types = layout.stored_column_types
    stored = typed_frame(fetch_all(conn, query), {c: types[c] for c in (*keys, *(s.name for s in sketches))})
    if stored.empty:
        return data
    batch = data.select(keys).to_pandas().reset_index(names="_row")
    matched = batch.merge(stored, on=keys, how="inner")
    if matched.empty:
        return data
    rows = matched["_row"].to_numpy()
    for s in sketches:
        column = data.column(s.name).to_pylist()
        merge = MERGE[s.merge]
        for row, old in zip(rows, matched[s.name], strict=True):
            column[row] = merge(old, column[row])
        data = _replace(data, s.name, column)
    return data


def _replace(data: pa.Table, name: str, states: Iterable[bytes | None]) -> pa.Table:
    return data.set_column(data.column_names.index(name), name, pa.array(list(states), pa.binary()))
