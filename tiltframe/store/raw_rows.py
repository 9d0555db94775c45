"""The rows of a raw table (``define table`` without a ``preaggregate`` clause), stored as they are.

EventQL makes pre-aggregation optional per table: a raw table keeps every row inserted into it and answers
SELECTs over them.  Its rows live in ``<Name>_RAW``, in the table's store: the declared columns (nullable,
as inserted) plus ``AGG_INSERT_ID`` and ``AGG_ROW``, the insert that wrote a row and its position in it.
An insert writes all its rows, and the rows it could not store (recorded in ``TILTFRAME_REJECTED`` under
the table's name), in one transaction: a failed insert leaves nothing behind, and two inserts of the same
rows store them twice, as two SQL INSERTs would.
"""

from __future__ import annotations

import pandas as pd
import pyarrow as pa
import sqlalchemy as sa

from tiltframe.aggregates.layout import AggregationLayout
from tiltframe.errors import StoreError
from tiltframe.model.tables import TableSpec
from tiltframe.store.base import Store
from tiltframe.store.dialects.mysql import StoredText
from tiltframe.store.reads.frames import fetch_all, typed_frame
from tiltframe.store.retries import retried
from tiltframe.store.schema import SHARED, sql_type
from tiltframe.store.sql import SqlStore
from tiltframe.store.writes.recorded import insert_recorded_rows

__all__ = [
    "INSERT_ID",
    "RAW_FOLD",
    "RAW_SUFFIX",
    "ROW",
    "count_raw_rows",
    "raw_table_name",
    "read_raw_rows",
    "unfolded_raw_rows",
    "write_raw_rows",
]

RAW_SUFFIX = "_RAW"
#: The pipeline (one batch) that folds a table's raw rows into its rollup once pre-aggregation is enabled.
RAW_FOLD = "raw-rows"
INSERT_ID = "AGG_INSERT_ID"
ROW = "AGG_ROW"


def raw_table_name(table: str) -> str:
    return f"{table}{RAW_SUFFIX}"


def _sql_table(table: TableSpec) -> sa.Table:
    return sa.Table(
        raw_table_name(table.name), sa.MetaData(),
        sa.Column(INSERT_ID, StoredText(64), primary_key=True),
        sa.Column(ROW, sa.BigInteger, primary_key=True, autoincrement=False),
        *(sa.Column(c.name, sql_type(c.type), nullable=True) for c in table.columns),
    )


def _sql_store(store: Store, table: TableSpec) -> SqlStore:
    if not isinstance(store, SqlStore):  # pragma: no cover - every store is an SQL store today
        raise StoreError(f"table {table.name}: raw rows need an SQL store, not {store!r}")
    return store


@retried
def write_raw_rows(store: Store, table: TableSpec, rows: pa.Table, insert_id: str, recorded: pa.Table) -> int:
    """Store ``rows`` (the table's columns) and ``recorded`` (rows that could not be stored) of one insert
    in one transaction; returns the rows stored."""
    sql_store = _sql_store(store, table)
    sql = _sql_table(table)
    columns = [c.name for c in table.columns]
    records = [{INSERT_ID: insert_id, ROW: i, **row} for i, row in enumerate(rows.select(columns).to_pylist())]
    action = f"insert rows into table {table.name}"
    with sql_store.write_transaction(action, schema=True) as conn:
        SHARED.create_all(conn, checkfirst=True)  # the rejected rows' table
        sql.create(conn, checkfirst=True)  # apart: MySQL commits a CREATE at once
    with sql_store.write_transaction(action) as conn:
        _check_columns(conn, sql, table)
        if records:
            conn.execute(sa.insert(sql), records)
        insert_recorded_rows(conn, table.name, insert_id, 0, recorded)
    return len(records)


@retried
def read_raw_rows(store: Store, table: TableSpec) -> pd.DataFrame:
    """Every stored row of ``table``: its declared columns, in the order they were inserted (an empty frame
    before the first insert)."""
    sql = _sql_table(table)
    columns = [c.name for c in table.columns]
    with _sql_store(store, table).read_transaction(f"read table {table.name}") as conn:
        if conn is None or not sa.inspect(conn).has_table(sql.name):
            return pd.DataFrame({c: pd.Series(dtype=object) for c in columns})
        _check_columns(conn, sql, table)
        query = sa.select(*(sql.c[c] for c in columns)).order_by(sql.c[INSERT_ID], sql.c[ROW])
        return typed_frame(fetch_all(conn, query), {c.name: c.type for c in table.columns})


def count_raw_rows(store: Store, table: TableSpec) -> int:
    """How many rows ``table`` holds raw (0 when it never held any)."""
    sql = _sql_table(table)
    with _sql_store(store, table).read_transaction(f"count the raw rows of table {table.name}") as conn:
        if conn is None or not sa.inspect(conn).has_table(sql.name):
            return 0
        return int(conn.execute(sa.select(sa.func.count()).select_from(sql)).scalar_one())


def unfolded_raw_rows(store: Store, table: TableSpec, layout: AggregationLayout) -> int:
    """The rows ``table`` stored raw before its pre-aggregation was enabled, while its rollup does not hold
    them yet (``engine.lifecycle.inserts.fold_raw_rows`` folds them in, once: its commit record says so)."""
    held = count_raw_rows(store, table)
    return 0 if held == 0 or store.is_committed(layout, RAW_FOLD, 0) else held


def _check_columns(conn: sa.Connection, sql: sa.Table, table: TableSpec) -> None:
    """The stored table must have the declared columns: a changed definition is named, never guessed."""
    stored = {c["name"] for c in sa.inspect(conn).get_columns(sql.name)}
    missing = [c.name for c in sql.columns if c.name not in stored]
    if missing:
        msg = (f"the stored rows of table {table.name} ({sql.name}) have no column {', '.join(missing)}: the "
               f"table was defined with other columns when its rows were inserted")
        raise StoreError(msg)
