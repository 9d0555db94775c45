"""The ``_FINAL`` views beside each rollup table: final values in plain SQL, for BI tools.

Each view has the bucket twice: ``AGG_TIMESTAMP`` (epoch ms, as Siddhi returns it) and ``AGG_TIME``, the
same instant as the database's own time type, so that Grafana, Superset or Metabase plot a view with no
SQL of their own: ``timestamptz`` on PostgreSQL, ``DATETIME(3)`` in UTC on MySQL/MariaDB (a DATETIME has
no zone; these tools read it as UTC, and naming the aggregation's zone would need the server's zone
tables), ISO-8601 text in UTC (``2024-01-01T00:00:00.000Z``) on SQLite, which has no time type.

Views are replaced every time a store is opened for writing (``SqlStore.ensure_schema``), so a store made
by an earlier version gets the current view: SQLite drops and creates it (it has no ``OR REPLACE``),
MySQL/MariaDB replace it, PostgreSQL replaces it or, when its columns changed (``CREATE OR REPLACE``
only appends columns), drops and creates it in the same transaction.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tiltframe.aggregates.layout import AGG_COUNT, AGG_EVENT_TIMESTAMP, AGG_TIMESTAMP, AggregationLayout
from tiltframe.aggregates.targets.in_sql import GROUP_MERGE, SqlOps
from tiltframe.model.durations import Granularity
from tiltframe.store.dialects.lookup import dialect_of
from tiltframe.timeutil.time_columns import AGG_TIME

__all__ = ["VIEW_SUFFIX", "replace_view", "view_name", "view_select"]

#: Suffix of the view of final values beside each table (``TradeAggregation_DAYS_FINAL``).
VIEW_SUFFIX = "_FINAL"

def view_name(layout: AggregationLayout, g: Granularity) -> str:
    return layout.table_name(g) + VIEW_SUFFIX


def view_select(dialect: sa.Dialect, layout: AggregationLayout, table: sa.Table,
                complete_from: Mapping[str, int] | None = None) -> str:
    """The ``SELECT`` of one table's final values: the bucket (``AGG_TIMESTAMP``, ``AGG_TIME``), the keys,
    each aggregate by its name (avg as sum / count, finalized by the registry like everywhere else), the
    latest-event values, the event count and the latest event time.

    With shards, the view first merges the shards' rows with ``GROUP BY``; only sums, minimums and
    maximums merge that way, so aggregates built on other states (stdev, first/last, sketches) and the
    latest-event values are left out of it (``tiltframe query`` merges them all).

    A measure added to a stored rollup reads NULL in the buckets that start before it is complete
    (``complete_from``, ``store.lifecycle.definitions``), as retrieval does.
    """
    c = (_merged_in_sql(layout, table) if layout.partitioned else table).c
    columns = [c[AGG_TIMESTAMP], dialect_of(dialect).agg_time(c[AGG_TIMESTAMP]).label(AGG_TIME),
               *(c[k.name] for k in layout.keys)]
    since = {out: at for measure, at in (complete_from or {}).items() for out in layout.outputs_of(measure)}

    def complete(name: str, value: sa.ColumnElement[Any]) -> sa.ColumnElement[Any]:
        return value if name not in since else sa.case((c[AGG_TIMESTAMP] >= since[name], value))

    columns += [complete(alias, value).label(alias) for alias, value in layout.finalized(c, SqlOps()).items()]
    columns += [] if layout.partitioned else [complete(v.name, c[v.name]).label(v.name) for v in layout.values]
    columns += [c[AGG_COUNT], c[AGG_EVENT_TIMESTAMP]]
    return str(sa.select(*columns).compile(dialect=dialect, compile_kwargs={"literal_binds": True}))


def replace_view(conn: Connection, layout: AggregationLayout, table: sa.Table, g: Granularity,
                 complete_from: Mapping[str, int] | None = None) -> None:
    """Create the ``_FINAL`` view of ``table``, replacing whatever view of that name an earlier version
    made; runs inside the caller's transaction."""
    quoted = conn.dialect.identifier_preparer.quote(view_name(layout, g))
    dialect_of(conn).replace_view(conn, quoted, view_select(conn.dialect, layout, table, complete_from))


def _merged_in_sql(layout: AggregationLayout, table: sa.Table) -> sa.Subquery:
    """The shards' rows of each bucket and key merged by ``GROUP BY``: the states whose whole group merges
    with a plain SQL aggregate, and the latest event time."""
    c = table.c
    keys = [c[k] for k in layout.key_names]
    states = [s for group in layout.state_groups if group[0].function.combine is None
              and all(s.merge in GROUP_MERGE for s in group) for s in group]
    return (sa.select(*keys, *(GROUP_MERGE[s.merge](c[s.name]).label(s.name) for s in states),
                      sa.func.max(c[AGG_EVENT_TIMESTAMP]).label(AGG_EVENT_TIMESTAMP))
            .group_by(*keys).subquery("merged"))
