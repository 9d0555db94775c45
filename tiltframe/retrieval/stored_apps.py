"""An app read against a store that holds an earlier definition of one of its aggregations (a measure or a
level added or removed, not migrated yet; docs/lifecycle.md): what the store holds can still be looked at.

The aggregation is read as far as the store holds it: the measures it stores unchanged and the levels it
keeps.  A query that names a measure or level the store lacks is refused by the usual checks, with the
command that adds it.  A change that every stored row depends on (zone, keys) is not read this way: the
store refuses it, naming the plan.
"""

from __future__ import annotations

import dataclasses
from typing import TypeGuard

from tiltframe.aggregates.layout import AggregationLayout
from tiltframe.model.aggregations import AggregateItem, ExpressionItem
from tiltframe.model.app import AppSpec
from tiltframe.store.base import Store

__all__ = ["as_stored", "not_stored_yet"]


def as_stored(app: AppSpec, store: Store, name: str) -> AppSpec:
    """``app`` with aggregation ``name`` cut down to the measures and levels ``store`` holds of it."""
    layout = AggregationLayout.of(app, name)
    if layout.table is not None:
        return app
    change = store.definition_plan(layout)
    if change is None or change.rebuild or change.other_app or not (change.added or change.added_levels):
        return app
    added = {m.name for m in change.added}
    agg = app.aggregation(name)
    kept = dataclasses.replace(
        agg, select=tuple(i for i in agg.select if not (_is_measure(i) and i.alias in added)),
        granularities=tuple(g for g in agg.granularities if g.table_suffix not in change.added_levels))
    return dataclasses.replace(app, aggregations=tuple(kept if a.name == name else a for a in app.aggregations))


def not_stored_yet(app: AppSpec, stored: AppSpec, name: str) -> str:
    """What of aggregation ``name`` the app defines and the store does not hold yet, in words ('' for nothing)."""
    if stored is app:
        return ""
    mine, theirs = app.aggregation(name), stored.aggregation(name)
    measures = [i.alias for i in mine.select if _is_measure(i) and i not in theirs.select]
    levels = [str(g) for g in mine.granularities if g not in theirs.granularities]
    parts = ([f"measures {', '.join(measures)}"] if measures else []) + ([f"levels {', '.join(levels)}"] if levels
                                                                          else [])
    backfill = (f"; with --input {app.root_stream(mine.source)}=PATH, the measures get their history from the "
                f"inputs" if measures else "")
    return (f"{' and '.join(parts)} of aggregation {name} are defined by the app but not stored yet: add them with "
            f"tiltframe migrate APP -d DIR{backfill} (docs/lifecycle.md)")


def _is_measure(item: object) -> TypeGuard[AggregateItem | ExpressionItem]:
    """An aggregate or a latest-event value (a measure of ``store.lifecycle.definitions``), not a key."""
    return isinstance(item, AggregateItem | ExpressionItem)
