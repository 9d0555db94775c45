"""SQLite, the embedded store: one file, one writer at a time, no server.

Its differences: a write takes the database's one write lock at ``BEGIN IMMEDIATE`` (two writers that both
read first would fail to upgrade their locks), which also excludes every other writer of the schema; it
stores NaN as NULL; its sums wrap instead of failing, so the merge checks them (``store.writes.upsert_merges``);
it has no time type (``AGG_TIME`` is ISO-8601 text in UTC), no ``CREATE OR REPLACE VIEW``, no way to change
a primary key, and no bulk load worth having (an upsert of a new key costs what an insert does).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pyarrow.compute as pc
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tiltframe.aggregates.layout import AggregationLayout
from tiltframe.store.dialects.base import StoreDialect, Unholdable
from tiltframe.store.writes.upsert_merges import merge_assignments


class SqliteDialect(StoreDialect):
    names = ("sqlite",)
    max_identifier_length = 1024
    #: Its statements cost no round trip, so more rows per statement gain nothing, while the text of a
    #: statement compiles in time linear in its rows (0.1 s per table at 500 rows, paid by the first
    #: batch of every run).
    rows_per_statement = 100
    bulk_loads = False
    checks_sums = True
    unholdable: Unholdable = ("SQLite would store NaN as NULL", pc.is_nan)
    alters_primary_key = False
    locks_rows = False

    def write_connection(self, conn: Connection) -> Connection:
        return self.exclusive(conn)

    def exclusive(self, conn: Connection) -> Connection:
        return conn.execution_options(tiltframe_begin="BEGIN IMMEDIATE")

    @contextmanager
    def schema_lock(self, conn: Connection) -> Iterator[None]:
        yield  # BEGIN IMMEDIATE already excludes every other writer

    def max_parameters(self) -> int:
        return 32_766 if sqlite3.sqlite_version_info >= (3, 32) else 999  # 999 before 3.32

    def upsert(self, table: sa.Table, layout: AggregationLayout, rows: Any) -> sa.Executable:
        from sqlalchemy.dialects import sqlite  # a dialect's module costs a read of another store time

        ins = sqlite.insert(table).values(rows)
        keys = [table.c[k] for k in layout.stored_key_names]
        return ins.on_conflict_do_update(index_elements=keys,
                                         set_=merge_assignments(layout, table, ins.excluded, checked=True))

    def agg_time(self, ms: sa.ColumnElement[int]) -> sa.ColumnElement[object]:
        return sa.func.strftime("%Y-%m-%dT%H:%M:%fZ", ms.op("/")(sa.literal_column("1000.0")), "unixepoch")

    def replace_view(self, conn: Connection, quoted: str, body: str) -> None:
        self.recreate_view(conn, quoted, body)  # SQLite has no OR REPLACE
