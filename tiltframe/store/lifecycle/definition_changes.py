"""A plan of ``store.lifecycle.definitions`` carried out on an aggregation's tables, inside the caller's schema
transaction (``SqlSchema.change_definition``).

Views go first (PostgreSQL and SQLite refuse to drop a column a view reads) and are made again by the
caller.  Each step looks before it acts, so that on MySQL, which commits every DDL statement by itself, a
migration interrupted half way completes when run again: a column already gone is not dropped twice, one
already there is not added twice.
"""

from __future__ import annotations

from collections.abc import Mapping

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tiltframe.aggregates.layout import AggregationLayout
from tiltframe.model.durations import Granularity
from tiltframe.store.lifecycle.definitions import DefinitionPlan
from tiltframe.store.schema import BATCHES_TABLE, PURGES_TABLE
from tiltframe.store.views import VIEW_SUFFIX

__all__ = ["apply_plan", "complete_from"]


def apply_plan(conn: Connection, layout: AggregationLayout, change: DefinitionPlan,
               tables: Mapping[Granularity, sa.Table]) -> None:
    """Make the stored tables of ``change.stored`` those of ``layout`` (``tables``: its tables), except for
    levels added, which the caller creates and fills."""
    quote = conn.dialect.identifier_preparer.quote
    present = set(sa.inspect(conn).get_table_names())
    for suffix in change.stored.levels:
        conn.exec_driver_sql(f"DROP VIEW IF EXISTS {quote(f'{layout.name}_{suffix}{VIEW_SUFFIX}')}")
    for suffix in change.removed_levels:
        name = f"{layout.name}_{suffix}"
        if name in present:
            conn.exec_driver_sql(f"DROP TABLE {quote(name)}")
        p = PURGES_TABLE.c
        conn.execute(sa.delete(PURGES_TABLE).where(p.aggregation == layout.name, p.granularity == suffix))
    for g, table in tables.items():
        if g.table_suffix not in change.stored.levels or table.name not in present:
            continue
        have = {c["name"] for c in sa.inspect(conn).get_columns(table.name)}
        for column in change.dropped_columns:
            if column in have:
                conn.exec_driver_sql(f"ALTER TABLE {quote(table.name)} DROP COLUMN {quote(column)}")
                have.discard(column)
        for column in change.added_columns:
            if column not in have:
                spec = sa.schema.CreateColumn(table.c[column]).compile(dialect=conn.dialect)
                conn.exec_driver_sql(f"ALTER TABLE {quote(table.name)} ADD COLUMN {spec}")


def complete_from(conn: Connection, layout: AggregationLayout) -> int | None:
    """The instant from which a measure added now is complete: just after the latest event any committed
    batch aggregated (a bucket that starts later holds none of the events before the change); None
    when no batch has been committed (it is complete from the start)."""
    b = BATCHES_TABLE.c
    latest = conn.execute(sa.select(sa.func.max(b.max_event_ts)).where(b.aggregation == layout.name)).scalar()
    return None if latest is None else int(latest) + 1
