"""A rollup rebuilt under a new definition beside the one it replaces, then swapped in (``tiltframe migrate``
of a changed zone, key or time attribute; docs/lifecycle.md).

The new levels are written to tables of their own (:func:`build`), while the old ones stay readable and
their pipeline goes on writing.  The swap (:func:`swap`) then renames them into place inside the caller's
write transaction of the aggregation, which also moves the registration and the recorded definition on:
PostgreSQL and SQLite change tables inside a transaction, so readers and writers see the old rollup or the
new one, never a mix; MySQL renames every table in one ``RENAME TABLE`` statement, which is atomic there.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

import pyarrow as pa
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tiltframe.aggregates.layout import AggregationLayout
from tiltframe.model.durations import Granularity
from tiltframe.store.dialects.lookup import dialect_of
from tiltframe.store.views import VIEW_SUFFIX
from tiltframe.store.writes.upserts import merge_sketches, prepare_rows, upsert_rows

__all__ = ["build", "drop_built", "swap"]


def _name(kind: str, layout: AggregationLayout, level: str) -> str:
    """A short name, unique per aggregation, definition and level (a server's limit is 63 characters, and
    PostgreSQL names a table's primary key after it, which must not meet another's)."""
    digest = hashlib.sha256(f"{layout.name}\0{layout.spec_hash}\0{level}".encode()).hexdigest()[:24]
    return f"tf{kind}_{digest}"


def _built(layout: AggregationLayout, table: sa.Table, g: Granularity) -> sa.Table:
    return table.to_metadata(sa.MetaData(), name=_name("next", layout, g.table_suffix))


def build(conn: Connection, layout: AggregationLayout, tables: Mapping[Granularity, sa.Table],
          levels: Mapping[Granularity, pa.Table]) -> dict[Granularity, int]:
    """Write each level's rows to a new table beside ``tables`` (``layout``'s); returns the rows per level."""
    written = {}
    for g, table in tables.items():
        built = _built(layout, table, g)
        built.drop(conn, checkfirst=True)  # one a try before left behind
        built.create(conn)
        rows = prepare_rows(layout, levels[g])
        written[g] = upsert_rows(conn, layout, built, merge_sketches(conn, layout, built, rows))
    return written


def drop_built(conn: Connection, layout: AggregationLayout, tables: Mapping[Granularity, sa.Table]) -> None:
    for g, table in tables.items():
        _built(layout, table, g).drop(conn, checkfirst=True)


def swap(conn: Connection, layout: AggregationLayout, tables: Mapping[Granularity, sa.Table],
         stored_levels: tuple[str, ...]) -> None:
    """Put the tables :func:`build` wrote in place of the stored levels ``stored_levels`` (their views
    dropped; the caller makes ``layout``'s)."""
    quote = conn.dialect.identifier_preparer.quote
    present = set(sa.inspect(conn).get_table_names())
    for suffix in stored_levels:
        conn.exec_driver_sql(f"DROP VIEW IF EXISTS {quote(f'{layout.name}_{suffix}{VIEW_SUFFIX}')}")
    old = {f"{layout.name}_{s}" for s in stored_levels} | {t.name for t in tables.values()}
    renames = [(name, _name("old", layout, name)) for name in sorted(old & present)]
    renames += [(_built(layout, t, g).name, t.name) for g, t in tables.items()]
    dialect_of(conn).rename_tables(conn, renames)
    for name in sorted(old & present):
        conn.exec_driver_sql(f"DROP TABLE {quote(_name('old', layout, name))}")
