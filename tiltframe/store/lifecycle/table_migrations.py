"""A changed definition of a pre-aggregated table, followed by its stored rows (EventQL sections 4.2, 4.7).

The store records each table's definition beside its registration.  When a later definition differs,
:func:`tiltframe.model.table_changes.plan_change` says what changes and refuses what the stored rows cannot
follow; this module makes the tables match it in the store's schema transaction:

- a measure added: its columns are NULL in the rows stored before ("no value" for those intervals);
- a measure removed, or changed under the same name: its columns go, so nothing reads a stale state;
- a dimension removed: the stored rows are merged over its values (one row per interval and remaining
  dimension values);
- columns, workers: the stored rows stay as they are.

Each table is rebuilt rather than altered in place: its rows move aside (``<table>__old``), the new table
is created from the new layout and filled from them, and the old one is dropped.  SQLite and PostgreSQL
do it in one transaction; MySQL commits each DDL statement, so a rebuild interrupted there resumes from
``<table>__old`` when run again.  Adding a dimension to a table that holds rows is refused: its key column
would need a value for the rows stored before.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd
import pyarrow as pa
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tiltframe.aggregates.layout import AGG_COUNT, SHARD_ID, AggregationLayout
from tiltframe.errors import StoreError
from tiltframe.model.durations import Granularity
from tiltframe.model.table_changes import ConfigChange, plan_change
from tiltframe.model.tables import TableSpec
from tiltframe.store.dialects.mysql import KEY_HASH, key_hash_sql
from tiltframe.store.lifecycle.table_rebuilds import rebuild_table
from tiltframe.store.reads.frames import fetch_all, typed_frame
from tiltframe.store.reads.pandas_merges import merge_rows
from tiltframe.store.views import view_name
from tiltframe.store.writes.upserts import COMPACTED, prepare_rows, upsert_rows

#: Where a table's rows wait while it is rebuilt.
ASIDE_SUFFIX = "__old"


def follow_change(
    conn: Connection, layout: AggregationLayout, tables: Mapping[Granularity, sa.Table], stored: TableSpec, zone: str
) -> ConfigChange:
    """Rebuild the tables of ``stored`` (recorded with time zone ``zone``) as ``layout``'s ``tables``; returns
    the change applied.  The caller records the new definition and registration in the same transaction.

    Raises:
        DefinitionError: a change the stored rows cannot follow (``plan_change``).
        StoreError: a dimension added, or the time zone changed, over stored rows.
    """
    assert layout.table is not None
    old = AggregationLayout.of_table(stored, zone)
    present = set(sa.inspect(conn).get_table_names())
    sources = {g: _source(old.table_name(g), present) for g in old.spec.granularities}
    holds = any(conn.execute(sa.select(sa.literal(1)).select_from(sa.table(name)).limit(1)).first()
                for name in sources.values() if name is not None)
    change = plan_change(stored, layout.table, holds_rows=holds)
    if holds and change.added_dimensions:
        msg = (f"table {layout.name} holds rows, which have no value for the new dimension(s) "
               f"{', '.join(change.added_dimensions)}; define a new table for them, or empty this one first")
        raise StoreError(msg)
    if holds and zone != layout.zone:
        msg = (f"table {layout.name} holds rows bucketed in time zone {zone}; its time zone cannot change to "
               f"{layout.zone}: keep it, or define a new table")
        raise StoreError(msg)
    quote = conn.dialect.identifier_preparer.quote
    for g in old.spec.granularities:
        conn.exec_driver_sql(f"DROP VIEW IF EXISTS {quote(view_name(old, g))}")
    if not holds:
        for name in sources.values():
            if name is not None:
                conn.exec_driver_sql(f"DROP TABLE {quote(name)}")
        return change
    removed = {m.alias for m in change.removed_measures}
    dropped = {s.name for s in old.states if s.name != AGG_COUNT and s.item.alias in removed}
    old_types = old.stored_column_types
    keep = [c for c in layout.stored_column_types if c in old_types and c not in dropped]
    for g, table in tables.items():
        if sources[g] is None:
            continue

        def fill(aside: str, table: sa.Table = table) -> None:
            rows = sa.table(aside, *(sa.column(c) for c in keep))
            if change.removed_dimensions:
                _merge_over_removed(conn, layout, table, rows, {c: old_types[c] for c in keep})
            elif KEY_HASH in table.c:  # MySQL: the digest of the string keys, as the merge computes it
                digest = key_hash_sql(layout, rows.c).label(KEY_HASH)
                conn.execute(sa.insert(table).from_select([*keep, KEY_HASH], sa.select(*rows.c, digest)))
            else:
                conn.execute(sa.insert(table).from_select(keep, sa.select(*rows.c)))

        rebuild_table(conn, table, table.name + ASIDE_SUFFIX, fill)
    return change


def _source(name: str, present: set[str]) -> str | None:
    """The table that holds the rows: the one set aside by an interrupted rebuild, else the table."""
    if name + ASIDE_SUFFIX in present:
        return name + ASIDE_SUFFIX
    return name if name in present else None


def _merge_over_removed(
    conn: Connection, layout: AggregationLayout, table: sa.Table, rows: Any, types: dict[str, Any]
) -> None:
    """The stored rows merged per interval and the remaining dimensions, under the compacted shard."""
    frame = typed_frame(fetch_all(conn, sa.select(*rows.c)), types).drop(columns=[SHARD_ID])
    for name in layout.column_types:
        if name not in frame.columns:  # a measure added: no value for the rows stored before
            frame[name] = pd.Series([None] * len(frame), dtype=object)
    merged = merge_rows(frame, layout)
    data = pa.Table.from_pandas(merged[list(layout.column_types)], preserve_index=False)
    upsert_rows(conn, layout, table, prepare_rows(layout, data, COMPACTED))
