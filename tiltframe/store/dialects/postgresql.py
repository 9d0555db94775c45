"""PostgreSQL: a server store whose executors load rows by binary ``COPY``.

Its differences: a session-level advisory lock guards schema changes; the merge statements run on a
psycopg ``RawCursor`` with server-side placeholders (``$1``), prepared once per connection (psycopg's
default cursor re-parses thousands of ``%s`` on every execute, which took most of the merge time); it
keeps NaN apart from NULL (a read maps NaN to NULL as every other store holds it); ``SUM`` of BIGINT is
NUMERIC (cast back: beyond 64 bits an error); ``<`` on text follows the database's collation unless told
``COLLATE "C"``; ``CREATE OR REPLACE VIEW`` only appends columns; the staging table is UNLOGGED (a crash of
the server loses only uncommitted batches, and skipping the WAL halves the copy).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tiltframe.aggregates.layout import AGG_TIMESTAMP, SHARD_ID, AggregationLayout
from tiltframe.store.dialects.base import StoreDialect
from tiltframe.store.writes.appends import ahead, latest_bucket
from tiltframe.store.writes.bulk_formats import BINARY_HEADER, BINARY_TRAILER, binary_rows
from tiltframe.store.writes.upsert_merges import merge_assignments

_SCHEMA_LOCK_KEY = 0x7469_6C74  # advisory locks take a number
_NAN = sa.literal_column("'NaN'::float8")


class PostgresqlDialect(StoreDialect):
    names = ("postgresql",)

    def _take_schema_lock(self, conn: Connection) -> str:
        conn.exec_driver_sql(f"SELECT pg_advisory_lock({_SCHEMA_LOCK_KEY})")
        return f"SELECT pg_advisory_unlock({_SCHEMA_LOCK_KEY})"

    def upsert(self, table: sa.Table, layout: AggregationLayout, rows: Any) -> sa.Executable:
        from sqlalchemy.dialects import postgresql  # 0.1 s (its async drivers' too): not for every store

        ins = postgresql.insert(table)
        ins = ins.from_select(list(rows.selected_columns.keys()), rows) if isinstance(rows, sa.Select) \
            else ins.values(rows)
        keys = [table.c[k] for k in layout.stored_key_names]
        return ins.on_conflict_do_update(index_elements=keys, set_=merge_assignments(layout, table, ins.excluded))

    def placeholders(self, dialect: sa.Dialect) -> sa.Dialect:
        return _numeric_dollar()

    def merge_cursor(self, conn: Connection) -> tuple[Any, dict[str, Any]]:
        import psycopg

        return psycopg.RawCursor(conn.connection.dbapi_connection), {"prepare": True}

    def agg_time(self, ms: sa.ColumnElement[int]) -> sa.ColumnElement[object]:
        epoch = sa.literal_column("TIMESTAMPTZ '1970-01-01 00:00:00+00'")
        return epoch.op("+")(ms.op("*")(sa.literal_column("INTERVAL '1 millisecond'")))

    def replace_view(self, conn: Connection, quoted: str, body: str) -> None:
        try:
            with conn.begin_nested():
                super().replace_view(conn, quoted, body)
        except sa.exc.DBAPIError:  # columns renamed, moved or retyped: CREATE OR REPLACE cannot follow
            self.recreate_view(conn, quoted, body)

    def stored_double(self, column: sa.ColumnElement[Any]) -> sa.ColumnElement[Any]:
        return sa.func.nullif(column, _NAN)

    def long_sum(self, merged: sa.ColumnElement[Any]) -> sa.ColumnElement[Any]:
        return sa.cast(merged, sa.BigInteger)  # NUMERIC otherwise; beyond 64 bits an error (22003)

    def ordered_text(self, column: sa.ColumnElement[Any]) -> sa.ColumnElement[Any]:
        return column.collate("C")

    def add_shard_key(self, conn: Connection, layout: AggregationLayout, table: sa.Table) -> None:
        quote = conn.dialect.identifier_preparer.quote
        name, key = quote(table.name), ", ".join(quote(k) for k in layout.stored_key_names)
        constraint = sa.inspect(conn).get_pk_constraint(table.name)["name"]
        conn.exec_driver_sql(f"ALTER TABLE {name} ALTER COLUMN {quote(SHARD_ID)} SET NOT NULL")
        conn.exec_driver_sql(f"ALTER TABLE {name} DROP CONSTRAINT {quote(constraint)}, ADD PRIMARY KEY ({key})")

    def bulk_append(self, conn: Connection, layout: AggregationLayout, table: sa.Table, data: pa.Table) -> int:
        quote = conn.dialect.identifier_preparer.quote
        names = ", ".join(quote(c) for c in data.column_names)
        with conn.connection.dbapi_connection.cursor() as cursor:
            with cursor.copy(f"COPY {quote(table.name)} ({names}) FROM STDIN (FORMAT binary)") as copy:
                copy.write(BINARY_HEADER)
                for piece in ahead(binary_rows(data.columns)):
                    copy.write(piece)
                copy.write(BINARY_TRAILER)
            return int(cursor.rowcount)

    def staging_table(self, name: str, columns: Sequence[sa.Column[Any]], tag: str, level: str) -> sa.Table:
        return sa.Table(name, sa.MetaData(), *columns, sa.Index(f"{name}_tag", tag, level), prefixes=["UNLOGGED"])

    def staging_load(self, quoted_table: str, names: str) -> tuple[str, str]:
        return f"COPY {quoted_table} ({names}) FROM STDIN (FORMAT binary)", "copy"

    def staging_conninfo(self, url: sa.URL) -> str:
        return super().staging_conninfo(url.set(drivername="postgresql"))  # psycopg's conninfo

    def merge_staged(self, conn: Connection, layout: AggregationLayout, staged: sa.Table, target: sa.Table,
                     where: Sequence[sa.ColumnElement[bool]]) -> int:
        """In primary-key order (the B-tree then fills pages in order), in two statements: the rows of
        buckets newer than the table's by a plain insert (half the upsert's time; they meet no stored row),
        the others by an upsert."""
        columns = list(layout.stored_column_types)
        order = [staged.c[k] for k in layout.stored_key_names]
        select = sa.select(*(staged.c[c] for c in columns)).order_by(*order)
        latest = latest_bucket(conn, target)
        newer = [] if latest is None else [staged.c[AGG_TIMESTAMP] > latest]
        merged = max(conn.execute(sa.insert(target).from_select(columns, select.where(*where, *newer))).rowcount, 0)
        if latest is None:
            return merged
        upsert = self.upsert(target, layout, select.where(*where, staged.c[AGG_TIMESTAMP] <= latest))
        return merged + max(conn.execute(upsert).rowcount, 0)


@functools.cache
def _numeric_dollar() -> sa.Dialect:
    """psycopg's dialect binding ``$1, $2, ...``, made on the first merge into PostgreSQL."""
    from sqlalchemy.dialects import postgresql

    return postgresql.psycopg.dialect(paramstyle="numeric_dollar")
