"""The upsert of a batch's partial rows: ``SET`` expressions merging a new partial row into the stored one,
by each state's merge kind, which each dialect's upsert statement carries (``store.dialects``).

Each state merges by its primitive's SQL (``aggregates/targets/in_sql.py``), so NULLs never win and every
dialect agrees.
A sum the state cannot hold is an error on every dialect: PostgreSQL and MySQL raise one for a long
beyond 64 bits or a double beyond its range, and so does SQLite here (it would turn the long into a
REAL, and store a double's NaN as NULL).  ``store.writes.overflow`` then names the row.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from tiltframe.aggregates.layout import AGG_ARRIVAL_BATCH, AGG_ARRIVAL_SEQ, AGG_EVENT_TIMESTAMP, AggregationLayout
from tiltframe.aggregates.registry import EVENT_ORDER
from tiltframe.aggregates.states import Merge
from tiltframe.aggregates.targets.in_sql import PAIR_MERGE, SqlOps
from tiltframe.model.streams import AttrType

#: SQLite's ways to fail a statement from an expression: ``abs`` of the smallest long raises "integer
#: overflow"; ``9e999`` reads as infinity.  Inline, since the merge statements bind row values only.
_SQLITE_FAIL = sa.literal_column("abs(-9223372036854775808)")
_SQLITE_INF = sa.literal_column("9e999")
_SQLITE_INTEGER = sa.literal_column("'integer'")


def merge_assignments(layout: AggregationLayout, old: sa.Table, new: Any, *, checked: bool = False) -> dict[str, Any]:
    """``SET`` expressions merging a new partial row into the stored one (``new``: excluded/inserted row);
    ``checked``: sums fail the statement where the state cannot hold them (SQLite).

    The order columns come last and in reverse (seq, batch, event time): MySQL evaluates assignments left
    to right with earlier ones already applied, and this order gives it the same result as everybody else.
    """
    sets: dict[str, Any] = {}
    for columns in layout.state_groups:
        fn = columns[0].function
        if fn.combine is not None:
            merged = fn.combine({s.state.suffix: old.c[s.name] for s in columns},
                                {s.state.suffix: new[s.name] for s in columns}, SqlOps())
            sets.update({s.name: merged[s.state.suffix] for s in reversed(columns)})
            continue
        for s in columns:
            if s.merge is Merge.SUM and checked:
                sets[s.name] = _checked_sum(old.c[s.name], new[s.name], integral=s.type.is_integral)
            elif s.merge not in (Merge.EARLIEST, Merge.LATEST):
                sets[s.name] = PAIR_MERGE[s.merge](old.c[s.name], new[s.name])
        for kind in (Merge.EARLIEST, Merge.LATEST):
            event = {s.state.field: s.name for s in columns if s.merge is kind}
            if event:
                order = [event[f] for f in EVENT_ORDER]
                sets.update(_pick_event(old, new, order, [event["value"]], later=kind is Merge.LATEST))
    if not layout.tracks_arrival:
        sets[AGG_EVENT_TIMESTAMP] = PAIR_MERGE[Merge.MAX](old.c[AGG_EVENT_TIMESTAMP], new[AGG_EVENT_TIMESTAMP])
        return sets
    order = [AGG_EVENT_TIMESTAMP, AGG_ARRIVAL_BATCH, AGG_ARRIVAL_SEQ]
    sets.update(_pick_event(old, new, order, [v.name for v in layout.values], later=True))
    return sets


def _pick_event(old: sa.Table, new: Any, order: list[str], values: list[str], *, later: bool) -> dict[str, Any]:
    """``SET`` expressions keeping the fields of the later (or earlier) of the stored and the new event,
    ranked by the ``order`` columns (event time, batch, seq; a NULL time never wins).

    The order columns are assigned last and in reverse, because MySQL applies assignments left to right:
    each comparison then still sees the stored values of the columns that decide it.
    """
    (o_ts, o_b, o_s), (n_ts, n_b, n_s) = (old.c[c] for c in order), (new[c] for c in order)
    if later:
        beats = sa.or_(n_ts > o_ts, sa.and_(n_ts == o_ts, sa.or_(n_b > o_b, sa.and_(n_b == o_b, n_s > o_s))))
    else:
        beats = sa.or_(n_ts < o_ts, sa.and_(n_ts == o_ts, sa.or_(n_b < o_b, sa.and_(n_b == o_b, n_s < o_s))))
    take = sa.or_(o_ts.is_(None), beats)
    return {name: sa.case((take, new[name]), else_=old.c[name]) for name in (*values, *reversed(order))}


def _checked_sum(old: Any, new: Any, *, integral: bool) -> Any:
    """SQLite's ``old + new`` that fails the statement instead of leaving the state's type: a long sum
    beyond 64 bits (SQLite would make it a REAL), a double sum of finite values beyond the double range
    or a NaN (SQLite would store NULL)."""
    total = old + new
    if integral:
        bad = sa.func.typeof(total) != _SQLITE_INTEGER
    else:
        bad = sa.or_(total.is_(None), sa.and_(sa.func.abs(total) >= _SQLITE_INF, sa.func.abs(old) < _SQLITE_INF,
                                              sa.func.abs(new) < _SQLITE_INF))
    return sa.case((new.is_(None), old), (old.is_(None), new), (bad, _SQLITE_FAIL), else_=total)


def sum_states(layout: AggregationLayout) -> list[tuple[str, AttrType]]:
    """The states merged by addition (not through a combine function), with their types."""
    return [(s.name, s.type) for group in layout.state_groups if group[0].function.combine is None
            for s in group if s.merge is Merge.SUM]
