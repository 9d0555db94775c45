"""Validation of table definitions: what makes a :class:`TableSpec` valid.

The parser and Python callers both end with :func:`validate_tables`, so both report the same errors.  The
checks a measure needs are the registry's own (``bounded``, ``check_arg``, ``resolve``), as for ``define
aggregation``; the compiled rollup then goes through :func:`tiltframe.lang.checks.cross_references.validate_app`, so a
table the engine would refuse never validates.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import NoReturn

from tiltframe.aggregates import registry
from tiltframe.aggregates.measures import output_names
from tiltframe.errors import DefinitionError
from tiltframe.lang.checks.cross_references import validate_app
from tiltframe.model.app import AppSpec
from tiltframe.model.expressions import Pos
from tiltframe.model.streams import Attribute, AttrType
from tiltframe.model.tables import WORKER_COLUMN, Measure, Preaggregation, TableSpec

__all__ = ["validate_table", "validate_tables"]

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_RESERVED_PREFIX = "AGG_"


def _fail(message: str, pos: Pos | None) -> NoReturn:
    raise DefinitionError.at(message, pos)


def validate_tables(app: AppSpec, tables: Sequence[TableSpec]) -> tuple[TableSpec, ...]:
    """Check each table, and that its names (the table's and its input stream's) are free in ``app``."""
    taken = {s.name: "stream" for s in app.streams} | {a.name: "aggregation" for a in app.aggregations}
    for table in tables:
        for name in (table.name, table.stream_name):
            if name in taken:
                what = "" if name == table.name else f" (the input stream of table {table.name})"
                _fail(f"'{name}'{what} is also the name of a {taken[name]}; names must be unique", table.pos)
        taken[table.name] = "table"
        taken[table.stream_name] = "table's input stream"
    return tuple(validate_table(t) for t in tables)


def with_tables(app: AppSpec, tables: Sequence[TableSpec]) -> AppSpec:
    """``app`` with its (checked) tables, each pre-aggregated one adding its input stream and rollup."""
    checked = validate_tables(app, tables)
    pre = [t for t in checked if t.preaggregation is not None]
    return dataclasses.replace(app, streams=(*app.streams, *(t.as_stream() for t in pre)),
                               aggregations=(*app.aggregations, *(t.as_aggregation() for t in pre)),
                               tables=checked)


def validate_table(table: TableSpec) -> TableSpec:
    """Check one table on its own; returns it when valid.

    Raises:
        DefinitionError: at the line and column of the offending part, with a 'did you mean' for names.
    """
    if not _NAME.match(table.name):
        _fail(f"table name '{table.name}' must be a plain identifier", table.pos)
    if not table.columns:
        _fail(f"table {table.name} has no columns", table.pos)
    seen: set[str] = set()
    for column in table.columns:
        if column.name in seen:
            _fail(f"column '{column.name}' is defined twice in table {table.name}", column.pos)
        seen.add(column.name)
        _check_name(column.name, f"column '{column.name}'", column.pos)
        if column.type in (AttrType.BINARY, AttrType.ARRAY):
            _fail(f"column '{column.name}' has type {column.type.value}, which a table cannot declare", column.pos)
    pre = table.preaggregation
    if pre is None:
        if table.time_column is not None:
            table.column(table.time_column, table.pos)
        return table
    _time_column(table, pre)
    _preaggregation(table, pre)
    _compiled(table)
    return table


def _check_name(name: str, what: str, pos: Pos | None) -> None:
    if name.upper().startswith(_RESERVED_PREFIX) or name.upper() == WORKER_COLUMN:
        _fail(f"{what}: names starting with {_RESERVED_PREFIX} and {WORKER_COLUMN} are tiltframe's; choose another",
              pos)


def _time_column(table: TableSpec, pre: Preaggregation) -> None:
    pos = pre.pos_of("time")
    if table.time_column is None:
        _fail(f"table {table.name} is pre-aggregated but names no time column: write 'preaggregate by <column>'",
              pos)
    column = _column(table, table.time_column, pos, "preaggregate by")
    if column.type is not AttrType.LONG:
        msg = (
            f"the time column '{column.name}' of a pre-aggregated table must be long (epoch milliseconds), "
            f"got {column.type.value}"
        )
        _fail(msg, pos)


def _preaggregation(table: TableSpec, pre: Preaggregation) -> None:
    if isinstance(pre.workers, bool) or not isinstance(pre.workers, int) or pre.workers < 1:
        _fail(f"@preaggregate(workers=...) takes a whole number of at least 1, got {pre.workers!r}",
              pre.pos_of("workers"))
    seen: set[str] = set()
    for dimension in pre.dimensions:
        pos = pre.pos_of(f"dimension:{dimension}")
        if dimension in seen:
            _fail(f"dimension '{dimension}' is listed twice", pos)
        seen.add(dimension)
        _column(table, dimension, pos, "dimension")
        if dimension == table.time_column:
            msg = (
                f"'{dimension}' is the time column, which every interval is keyed by already; "
                "list only other columns as dimensions"
            )
            _fail(msg, pos)
    if not pre.measures:
        _fail(f"table {table.name} is pre-aggregated but has no measure: add one, such as 'measures count() as rows'",
              pre.pos)
    outputs: dict[str, str] = {c: "a dimension" for c in pre.dimensions}
    if table.time_column is not None:
        outputs[table.time_column] = "the time column"
    for measure in pre.measures:
        _measure(table, measure)
        for name in output_names(measure):
            if name in outputs:
                what = "an output of measure" if name != measure.alias else "measure"
                _fail(f"{what} '{name}' has the name of {outputs[name]}; choose another name", measure.pos)
            _check_name(name, f"measure '{name}'", measure.pos)
            outputs[name] = f"measure {measure.alias}"


def _measure(table: TableSpec, measure: Measure) -> None:
    where = f"measure '{measure.alias}'"
    try:
        fn = registry.get(measure.function)
    except DefinitionError as exc:
        _fail(exc.message, measure.pos)
    if not fn.bounded:
        msg = (
            f"{fn.name}() keeps every value, so the partial rows would grow without end; a measure must merge "
            "into a state of bounded size (count, sum, mean, min, max, delta, cardinality_approx, "
            "quantiles_approx, ...)"
        )
        _fail(msg, measure.pos)
    arg_type = None
    if measure.column is not None:
        if not fn.takes_arg:
            _fail(f"{fn.name}() takes no column in {where}: write {fn.name}() as {measure.alias}", measure.pos)
        arg_type = _column(table, measure.column, measure.pos, where).type
    try:
        fn.check_arg(arg_type, where=where)
        fn.resolve(measure.params, where=where)
    except DefinitionError as exc:
        _fail(exc.message, measure.pos)


def _column(table: TableSpec, name: str, pos: Pos | None, what: str) -> Attribute:
    try:
        return table.column(name, pos)
    except DefinitionError as exc:
        _fail(f"{what}: {exc.message}", pos)


def _compiled(table: TableSpec) -> None:
    """The rollup the engine runs must be valid too (durations, reserved names); its errors are said of
    the table."""
    try:
        validate_app(AppSpec(streams=(table.as_stream(),), aggregations=(table.as_aggregation(),)))
    except DefinitionError as exc:
        message = exc.message.replace(f"aggregation {table.name}", f"table {table.name}")
        pos = Pos(exc.line, exc.column) if exc.line is not None and exc.column is not None else table.pos
        _fail(message, pos)
