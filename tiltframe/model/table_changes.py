"""A table's new definition against its stored one: what changes, and whether it can be honoured.

EventQL lets the pre-aggregation config change at any time, and requires that it never refer to a column
the table does not have (sections 4.2 and 4.7): dropping a column drops the measures and dimensions that
read it.  :func:`plan_change` is that rule as a pure function, so the store can apply its result in one
transaction and the CLI can show it first.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, NoReturn

from tiltframe.errors import DefinitionError
from tiltframe.model.durations import Granularity
from tiltframe.model.expressions import Pos
from tiltframe.model.tables import Measure, Preaggregation, TableSpec

__all__ = ["ConfigChange", "plan_change"]


@dataclass(frozen=True, slots=True)
class ConfigChange:
    """What :func:`plan_change` found.

    ``table`` is the definition to store: the new one, its pre-aggregation cut to the columns the table
    still has.  A measure whose function, column or parameters changed is in both ``removed_measures`` and
    ``added_measures``; measures are told apart by their names.  ``granularity`` and ``workers`` are
    ``(stored, new)`` when they change.  ``notes`` say each change in words, for the CLI.
    """

    table: TableSpec
    added_measures: tuple[Measure, ...] = ()
    removed_measures: tuple[Measure, ...] = ()
    added_dimensions: tuple[str, ...] = ()
    removed_dimensions: tuple[str, ...] = ()
    added_columns: tuple[str, ...] = ()
    dropped_columns: tuple[str, ...] = ()
    granularity: tuple[Granularity, Granularity] | None = None
    workers: tuple[int, int] | None = None
    #: Pre-aggregation turned on (a new table counts) or off.
    enabled: bool = False
    disabled: bool = False
    notes: tuple[str, ...] = ()

    @property
    def changed(self) -> bool:
        return bool(
            self.added_measures or self.removed_measures or self.added_dimensions or self.removed_dimensions
            or self.added_columns or self.dropped_columns or self.granularity or self.workers
            or self.enabled or self.disabled or self.notes
        )


def _fail(message: str, pos: Pos | None) -> NoReturn:
    raise DefinitionError.at(message, pos)


def plan_change(stored: TableSpec | None, new: TableSpec, *, holds_rows: bool = True) -> ConfigChange:
    """The change from ``stored`` (None for a new table) to ``new``.

    ``stored`` is a whole table, not only its pre-aggregation config, because a column's type change is
    judged against the stored schema.  ``holds_rows`` says whether the table has rows already: an empty
    table can change anything.

    Raises:
        DefinitionError: a change the stored rows cannot follow (the granularity, the time column or a
            column's type of a table that holds rows; pre-aggregation turned off over partial rows), or a
            definition left without measures once the measures of dropped columns are gone.
    """
    table, cut_measures, cut_dimensions = _consistent(new)
    notes = [f"measure {m.alias} removed: column {m.column} is not in table {new.name}" for m in cut_measures]
    notes += [f"dimension {d} removed: column {d} is not in table {new.name}" for d in cut_dimensions]
    cut = {m.alias for m in cut_measures} | set(cut_dimensions)
    pre = table.preaggregation
    if stored is None:
        return ConfigChange(
            table,
            added_measures=pre.measures if pre else (),
            added_dimensions=pre.dimensions if pre else (),
            added_columns=tuple(c.name for c in table.columns),
            enabled=pre is not None,
            notes=(f"table {table.name} is new", *notes),
        )
    if stored.name != new.name:
        _fail(f"table {new.name} is compared with the stored definition of table {stored.name}", new.pos)
    old_types = {c.name: c.type for c in stored.columns}
    for column in table.columns:
        before = old_types.get(column.name)
        if before is not None and before is not column.type:
            if holds_rows:
                msg = (
                    f"column {column.name} of table {table.name} is {before.value} in the stored rows and "
                    f"{column.type.value} here; a table that holds rows cannot change a column's type: add a "
                    "column under a new name instead"
                )
                _fail(msg, column.pos or table.pos)
            notes.append(f"column {column.name} changes type from {before.value} to {column.type.value}")
    new_names = {c.name for c in table.columns}
    fields: dict[str, Any] = {
        "added_columns": tuple(c.name for c in table.columns if c.name not in old_types),
        "dropped_columns": tuple(c.name for c in stored.columns if c.name not in new_names),
    }
    notes += [f"column {name} added" for name in fields["added_columns"]]
    notes += [f"column {name} dropped" for name in fields["dropped_columns"]]
    old = stored.preaggregation
    if old is None and pre is not None:
        fields |= {"enabled": True, "added_measures": pre.measures, "added_dimensions": pre.dimensions}
        folded = ": rows stored raw before are folded into the rollup by tiltframe migrate or the next insert"
        notes.append("pre-aggregation enabled" + (folded if holds_rows else ""))
    elif old is not None and pre is None:
        if holds_rows:
            msg = (
                f"table {table.name} holds pre-aggregated rows, which cannot become raw rows again: keep its "
                "pre-aggregation, or define a new table"
            )
            _fail(msg, table.pos)
        fields |= {"disabled": True, "removed_measures": old.measures, "removed_dimensions": old.dimensions}
        notes.append("pre-aggregation disabled")
    elif old is not None and pre is not None:
        fields |= _config_change(stored, table, old, pre, holds_rows=holds_rows, cut=cut, notes=notes)
    return ConfigChange(table, notes=tuple(notes), **fields)


def _consistent(new: TableSpec) -> tuple[TableSpec, tuple[Measure, ...], tuple[str, ...]]:
    """``new`` without the measures and dimensions of columns it does not have (and those cut)."""
    pre = new.preaggregation
    if pre is None:
        return new, (), ()
    if new.time_column is None or not new.has(new.time_column):
        msg = (
            f"the time column {new.time_column} of table {new.name} is not among its columns; a pre-aggregated "
            "table keeps its time column"
        )
        _fail(msg, pre.pos_of("time"))
    cut_measures = tuple(m for m in pre.measures if m.column is not None and not new.has(m.column))
    cut_dimensions = tuple(d for d in pre.dimensions if not new.has(d))
    if not cut_measures and not cut_dimensions:
        return new, (), ()
    measures = tuple(m for m in pre.measures if m not in cut_measures)
    if not measures:
        columns = ", ".join(sorted({m.column for m in cut_measures if m.column}))
        msg = (
            f"table {new.name} would keep no measure once those of column(s) {columns} are dropped: declare one, "
            "such as count() as rows, or remove the pre-aggregation"
        )
        _fail(msg, pre.pos)
    dimensions = tuple(d for d in pre.dimensions if d not in cut_dimensions)
    positions = tuple((k, p) for k, p in pre.positions if k.removeprefix("dimension:") not in cut_dimensions)
    cut = dataclasses.replace(pre, measures=measures, dimensions=dimensions, positions=positions)
    return dataclasses.replace(new, preaggregation=cut), cut_measures, cut_dimensions


def _config_change(
    stored: TableSpec, table: TableSpec, old: Preaggregation, pre: Preaggregation, *, holds_rows: bool,
    cut: set[str], notes: list[str],
) -> dict[str, Any]:
    """Both definitions pre-aggregated: the config's own changes, with ``notes`` for each."""
    fields: dict[str, Any] = {}
    if stored.time_column != table.time_column:
        if holds_rows:
            msg = (
                f"table {table.name} holds rows keyed by time column {stored.time_column}; it cannot be "
                f"pre-aggregated by {table.time_column} instead: keep 'preaggregate by {stored.time_column}'"
            )
            _fail(msg, pre.pos_of("time"))
        notes.append(f"time column changes from {stored.time_column} to {table.time_column}")
    if old.granularity != pre.granularity:
        if holds_rows:
            msg = (
                f"table {table.name} holds rows pre-aggregated per {old.granularity}; its granularity cannot "
                f"change to {pre.granularity}: keep it, or define a new table"
            )
            _fail(msg, pre.pos_of("granularity"))
        fields["granularity"] = (old.granularity, pre.granularity)
        notes.append(f"granularity changes from {old.granularity} to {pre.granularity}")
    if old.workers != pre.workers:
        fields["workers"] = (old.workers, pre.workers)
        notes.append(f"workers change from {old.workers} to {pre.workers}; stored partial rows keep merging")
    added_dims = tuple(d for d in pre.dimensions if d not in old.dimensions)
    removed_dims = tuple(d for d in old.dimensions if d not in pre.dimensions)
    merged_over = ": rows stored before are merged over its values" if holds_rows else ""
    no_value = ": rows stored before have no value (NULL) for it" if holds_rows else ""
    notes += [f"dimension {d} removed{_with_column(table, d) or merged_over}" for d in removed_dims if d not in cut]
    notes += [f"dimension {d} added{no_value}" for d in added_dims]
    old_by_alias = {m.alias: m for m in old.measures}
    new_by_alias = {m.alias: m for m in pre.measures}
    removed = tuple(m for m in old.measures if new_by_alias.get(m.alias) != m)
    added = tuple(m for m in pre.measures if old_by_alias.get(m.alias) != m)
    since = ": intervals stored before hold no value (NULL) for it" if holds_rows else ""
    for m in removed:
        if m.alias in new_by_alias:
            notes.append(f"measure {m.alias} changes from {m.describe()} to {new_by_alias[m.alias].describe()}{since}")
        elif m.alias not in cut:
            notes.append(f"measure {m.alias} removed{_with_column(table, m.column)}")
    notes += [f"measure {m.alias} added{since}" for m in added if m.alias not in old_by_alias]
    return fields | {
        "added_measures": added,
        "removed_measures": removed,
        "added_dimensions": added_dims,
        "removed_dimensions": removed_dims,
    }


def _with_column(table: TableSpec, column: str | None) -> str:
    """Why a measure or dimension went, when its column went with it."""
    return f": column {column} is not in table {table.name}" if column is not None and not table.has(column) else ""
