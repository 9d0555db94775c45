"""Level tables made anew around their rows: a table given a shard column (``tiltframe migrate``), or
following a changed table definition (``store.lifecycle.table_migrations``)."""

from __future__ import annotations

from collections.abc import Callable

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tiltframe.aggregates.layout import SHARD_ID, AggregationLayout
from tiltframe.store.dialects.base import StoreDialect


def primary_key(conn: Connection, table: str) -> list[str]:
    return list(sa.inspect(conn).get_pk_constraint(table)["constrained_columns"])


def rebuild_table(conn: Connection, table: sa.Table, aside: str, fill: Callable[[str], None]) -> None:
    """Make ``table`` anew from its definition: its rows move to table ``aside``, ``fill(aside)`` puts them
    into the new table, and ``aside`` is dropped.

    A database that commits each DDL statement (MySQL) may have been interrupted mid-way: when ``aside``
    exists already it holds the rows, and a half-made ``table`` is dropped and made again.
    """
    quote = conn.dialect.identifier_preparer.quote
    if not sa.inspect(conn).has_table(aside):
        conn.exec_driver_sql(f"ALTER TABLE {quote(table.name)} RENAME TO {quote(aside)}")
    table.drop(conn, checkfirst=True)
    table.create(conn)
    fill(aside)
    conn.exec_driver_sql(f"DROP TABLE {quote(aside)}")


def copy_with_shard(conn: Connection, layout: AggregationLayout, table: sa.Table, shard_id: str) -> None:
    """SQLite: the rows of ``table`` moved into a new table of the partitioned layout, as ``shard_id``'s."""
    names = list(layout.column_types)

    def fill(aside: str) -> None:
        old = sa.table(aside, *(sa.column(n) for n in names))
        conn.execute(sa.insert(table).from_select(
            [*names, SHARD_ID], sa.select(*old.c, sa.literal(shard_id, sa.String()).label(SHARD_ID))))

    rebuild_table(conn, table, f"{table.name}__before_shards", fill)


def alter_with_shard(conn: Connection, dialect: StoreDialect, layout: AggregationLayout, table: sa.Table,
                     shard_id: str) -> None:
    """A database that alters primary keys: add ``SHARD_ID``, fill it, and make it part of the key."""
    quote = conn.dialect.identifier_preparer.quote
    if SHARD_ID not in {c["name"] for c in sa.inspect(conn).get_columns(table.name)}:
        kind = dialect.shard_column_type(conn)
        conn.exec_driver_sql(f"ALTER TABLE {quote(table.name)} ADD COLUMN {quote(SHARD_ID)} {kind} NULL")
    conn.execute(sa.update(table).where(table.c[SHARD_ID].is_(None)).values({SHARD_ID: shard_id}))
    dialect.add_shard_key(conn, layout, table)
