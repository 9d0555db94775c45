"""Validation of continuous queries: every name checked against the stream, the EMIT defaults resolved,
and the select list split into the aggregates the engine keeps state for and the expressions over them.

:func:`validate_continuous` fills the fields of :class:`ContinuousQuery` after ``annotations``:

- ``keys``: the GROUP BY stream attributes (``window_start``/``window_end`` there only mean "the window"); without
  GROUP BY, the stream attributes selected on their own (the seed's ``SELECT device, count(*) FROM s``);
- ``aggregates``: each distinct aggregate call once, as ``AggregateItem(function, arg, "_agg<i>", params)``
  with the registry's canonical function name and the argument over stream attributes;
- ``outputs``: ``(name, expression)`` in select order, over keys, window columns and ``_agg<i>`` only.  A
  function with several outputs (a quantile sketch: ``kll(x, [0.5, 0.99]) AS lat``) must be selected on
  its own with a name and gives one output each, ``lat_p50`` -> ``Attr("_agg0_p50")``: the registry's
  ``output_names`` of the output name and of ``_agg<i>``;
- ``having``: rewritten the same way; an output name in it stands for that output's expression.

Also set: ``window.time_attribute`` (the window call's column, else the stream's ``@eventTime``, else
None for arrival time; for a global aggregation the stream's), ``emit.policy`` (AFTER WINDOW CLOSE for
windows, PERIODIC 2s for a global aggregation), ``emit.interval_ms`` of PERIODIC (2s when not written) and
``emit.identified_by`` of AFTER KEY EXPIRE (the time attribute when not written); qualifiers such as
``s.device`` are dropped.  Validating a validated query gives it back unchanged (its ``_agg<i>`` names in
HAVING stand for its aggregates).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable
from typing import Any

from tiltframe.aggregates import registry
from tiltframe.aggregates.registry import AggregateFunction
from tiltframe.errors import DefinitionError, unknown
from tiltframe.functions import scalars
from tiltframe.lang.checks.emit import DEFAULT_PERIODIC_MS, validate_emit
from tiltframe.lang.checks.windows import partition_keys, validate_window
from tiltframe.model.aggregations import AggregateItem
from tiltframe.model.app import AppSpec
from tiltframe.model.continuous import (
    EMIT_VERSION,
    EMIT_VERSION_FUNCTION,
    WINDOW_COLUMNS,
    ContinuousQuery,
    Projection,
    Setting,
    SqlItem,
)
from tiltframe.model.expressions import (
    Attr,
    Binary,
    Call,
    Expr,
    ListLiteral,
    Literal,
    Pos,
    Unary,
    constant_value,
)
from tiltframe.model.streams import Attribute, AttrType, StreamDef
from tiltframe.model.windows import Window

__all__ = [
    "DEFAULT_PERIODIC_MS",
    "SETTINGS",
    "SQL_FUNCTION_ALIASES",
    "aggregate_function",
    "output_scope",
    "validate_continuous",
]

#: Timeplus names of aggregates that the registry knows by another name (the registry already takes
#: stddev_pop, stddev_samp, var_pop and var_samp).
SQL_FUNCTION_ALIASES = {
    "earliest": "first",
    "latest": "last",
    "uniq": "distinctCount",
}

_AGG_NAME = re.compile(r"_agg([0-9]+)(_.*)?")


def _fail(message: str, pos: Pos | None) -> DefinitionError:
    return DefinitionError.at(message, pos)


def aggregate_function(name: str) -> AggregateFunction | None:
    """The registry's function for a SQL name (case-insensitive, Timeplus aliases included), else None."""
    canonical = SQL_FUNCTION_ALIASES.get(name.lower(), name)
    return registry.get(canonical) if registry.is_aggregate(canonical) else None


def _function_names() -> list[str]:
    return [*registry.names(), *SQL_FUNCTION_ALIASES, *scalars.names()]


def _hash_table(value: Any) -> str | None:
    return None if value in ("memory", "hybrid") else "'memory' or 'hybrid'"


def _count(value: Any) -> str | None:
    ok = isinstance(value, int) and not isinstance(value, bool) and value > 0
    return None if ok else "a whole number above 0"


def _flag(value: Any) -> str | None:
    return None if value in (True, False, 0, 1) else "true or false"


#: The Timeplus SETTINGS a continuous query takes, each with a check of its value (the message says what
#: it takes).  They tune how Timeplus holds its state; tiltframe always keeps the groups in Spark's
#: RocksDB state store (memory-cached, spilled to disk: Timeplus's 'hybrid' table) and each key-hash bucket
#: of groups apart, so they are checked and then change nothing (docs/continuous.md, "SETTINGS").
SETTINGS: dict[str, Callable[[Any], str | None]] = {
    "default_hash_table": _hash_table,
    "max_hot_keys": _count,
    "allow_independent_shard_processing": _flag,
}


def validate_continuous(app: AppSpec, query: ContinuousQuery) -> ContinuousQuery:
    """Check ``query`` against the streams of ``app`` and fill in what the engine reads (module docstring).

    Raises:
        DefinitionError: at the line and column of the offending token, with a suggestion where one helps.
    """
    try:
        stream = app.stream(query.stream, query.window.pos_of("stream"))
    except DefinitionError as exc:
        raise _fail(f"continuous query reads from {exc.message}", query.window.pos_of("stream")) from None
    window = validate_window(query.window, stream)
    for setting in query.settings:
        _setting(setting)
    return _Checker(query, stream, window).run()


def _setting(setting: Setting) -> None:
    check = SETTINGS.get(setting.name.lower())
    if check is None:
        raise _fail(unknown("setting", setting.name, SETTINGS), setting.pos)
    wanted = check(setting.value)
    if wanted is not None:
        raise _fail(f"setting {setting.name} takes {wanted}, got {setting.value!r}", setting.pos)


def output_scope(query: ContinuousQuery, stream: StreamDef) -> StreamDef:
    """The columns an output expression of a validated ``query`` reads, with their types: the keys,
    ``window_start``/``window_end`` (epoch ms) and each finalized aggregate (``_agg<i>``, or one column
    per quantile)."""
    from tiltframe.aggregates.layout import expression_type  # the store builds on the spec

    columns = {k: stream.attribute(k).type for k in query.keys}
    columns.update(dict.fromkeys(WINDOW_COLUMNS, AttrType.LONG))
    columns[EMIT_VERSION] = AttrType.LONG
    for item in query.aggregates:
        fn = registry.get(item.function)
        arg_type = expression_type(item.arg, stream) if item.arg is not None else None
        columns.update(dict.fromkeys(fn.output_names(item.alias, fn.resolve(item.params)), fn.result_type(arg_type)))
    return StreamDef("_outputs", tuple(Attribute(n, t) for n, t in columns.items()))


class _Checker:
    """The state of one validation: the aggregates found so far and the output expressions."""

    def __init__(self, query: ContinuousQuery, stream: StreamDef, window: Window) -> None:
        self.query = query
        self.stream = stream
        self.window = window
        self.aggregates: list[AggregateItem] = []
        self.outputs: dict[str, Expr] = {}
        self.keys: tuple[str, ...] = ()

    # --- the whole query ----------------------------------------------------------------------------------

    def run(self) -> ContinuousQuery:
        q = self.query
        where = None
        if q.where is not None:
            where = self.plain(q.where, "WHERE", "filters events before they are aggregated: use HAVING")
            self.condition(where, "WHERE")
        self.window = self.bounds(self.window)
        self.keys = self.group_by()
        partitions = partition_keys(q.partition_by, self.stream, self.window)
        self.keys += tuple(k for k in partitions if k not in self.keys)
        output_pos: dict[str, Pos | None] = {}
        for item in q.select:
            name = item.output_name
            if _AGG_NAME.fullmatch(name):
                raise _fail(f"'{name}' is a name tiltframe keeps for its aggregates; choose another", item.pos)
            expansions = self.select_item(item.expr, name, item.alias, item.pos)
            for out_name, expr in expansions:
                if out_name in self.outputs:
                    msg = f"output column '{out_name}' is selected twice; give one of them another name with AS"
                    raise _fail(msg, item.pos)
                self.outputs[out_name] = expr
                output_pos[out_name] = item.pos
        having = self.grouped(q.having, "HAVING", outputs=True) if q.having is not None else None
        if not self.aggregates and not self.window.is_windowed:
            msg = (
                "a continuous query needs an aggregate function (count, sum, avg, min, max, ...) or a window "
                f"(tumble, hop or session); this one only selects columns of {self.stream.name}"
            )
            raise _fail(msg, q.pos)
        outputs, row_filter = self.outputs, None
        if q.projection is not None:
            outputs, row_filter = self.project(q.projection)
        validated = dataclasses.replace(
            q,
            window=self.window,
            where=where,
            emit=validate_emit(q.emit, self.window, self.stream, self.keys),
            keys=self.keys,
            aggregates=tuple(self.aggregates),
            outputs=tuple(outputs.items()),
            having=having,
            filter=row_filter,
        )
        self.typed(validated)
        return validated

    def typed(self, query: ContinuousQuery) -> None:
        """Every output typed (a function given arguments it cannot take is refused here, at its place)."""
        from tiltframe.aggregates.layout import expression_type  # the store builds on the spec

        scope = output_scope(query, self.stream)
        for _, expr in query.outputs:
            expression_type(expr, scope)
        for clause, condition in (("HAVING", query.having), ("WHERE", query.filter)):
            if condition is not None:
                self.condition(condition, clause, scope)

    def group_by(self) -> tuple[str, ...]:
        if not self.query.group_by:
            return self.implicit_keys()
        keys: list[str] = []
        seen: set[str] = set()
        for expr in self.query.group_by:
            if not isinstance(expr, Attr):
                msg = (
                    f"GROUP BY takes columns (stream attributes, window_start or window_end), got '{expr}'; "
                    "grouping by an expression is not supported yet"
                )
                raise _fail(msg, expr.pos)
            self.qualifier(expr)
            if expr.name in seen:
                raise _fail(f"column '{expr.name}' is listed twice in GROUP BY", expr.pos)
            seen.add(expr.name)
            if self.window_column(expr):
                continue
            self.attribute(expr)
            keys.append(expr.name)
        return tuple(keys)

    def implicit_keys(self) -> tuple[str, ...]:
        """Without GROUP BY, the stream attributes selected on their own are the keys: the seed writes a
        global aggregation as ``SELECT <column1>, <column2>, <aggregate> FROM <stream>``."""
        # A column's qualifier is checked with its select item.
        columns = (i.expr for i in self.query.select if isinstance(i.expr, Attr))
        keys = [c.name for c in columns if not self.window_column(c) and self.stream.has(c.name)]
        return tuple(dict.fromkeys(keys))

    # --- select items and HAVING --------------------------------------------------------------------------

    def select_item(self, expr: Expr, name: str, alias: str | None, pos: Pos | None) -> list[tuple[str, Expr]]:
        """The outputs of one item: one, or one per output of a multi-output aggregate, or the number of
        the emit (``emit_version()``, filled in as rows are emitted)."""
        if isinstance(expr, Call) and expr.name.lower() == EMIT_VERSION_FUNCTION:
            if expr.args:
                raise _fail("emit_version() takes no arguments", expr.args[0].pos or pos)
            return [(name, Attr(EMIT_VERSION, pos=expr.pos))]
        if isinstance(expr, Call) and (fn := aggregate_function(expr.name)) is not None and fn.outputs is not None:
            if alias is None:
                written = f"{expr.name}(...)"
                msg = f"{written} gives one column per quantile: name it, such as {written} AS latency"
                raise _fail(msg, pos)
            agg = self.aggregate(expr, "SELECT")
            settings = fn.resolve(agg.params)
            return [
                (out, Attr(state))
                for out, state in zip(
                    fn.output_names(alias, settings), fn.output_names(agg.alias, settings), strict=True
                )
            ]
        return [(name, self.grouped(expr, "SELECT", outputs=True))]

    def grouped(self, expr: Expr, clause: str, *, outputs: bool) -> Expr:
        """An expression over aggregates, keys and window columns (and output names in HAVING)."""
        if isinstance(expr, Attr):
            return self.grouped_column(expr, clause, outputs=outputs)
        if isinstance(expr, Call):
            fn = aggregate_function(expr.name)
            if fn is None:
                return self.scalar(expr, lambda e: self.grouped(e, clause, outputs=outputs))
            if fn.outputs is not None:
                msg = (
                    f"{expr.name}() gives one column per quantile and cannot be part of an expression: select it "
                    f"on its own, such as {expr.name}(...) AS latency, and use latency_p99 in HAVING"
                )
                raise _fail(msg, expr.pos)
            return Attr(self.aggregate(expr, clause).alias, pos=expr.pos)
        return self.map_children(expr, lambda e: self.grouped(e, clause, outputs=outputs))

    def grouped_column(self, attr: Attr, clause: str, *, outputs: bool) -> Expr:
        self.qualifier(attr)
        if outputs and attr.qualifier is None and attr.name in self.outputs:
            return self.outputs[attr.name]
        if outputs and (found := _AGG_NAME.fullmatch(attr.name)) and int(found.group(1)) < len(self.query.aggregates):
            # A validated query's HAVING, validated again: its _agg<i> stand for its own aggregates.
            old = self.query.aggregates[int(found.group(1))]
            args = (old.arg,) if old.arg is not None else ()
            call = Call(old.function, args + tuple(_literal(p) for p in old.params), pos=attr.pos)
            return Attr(self.aggregate(call, clause).alias + (found.group(2) or ""), pos=attr.pos)
        if self.window_column(attr):
            return Attr(attr.name, pos=attr.pos)
        if attr.name in self.keys:
            return Attr(attr.name, pos=attr.pos)
        if self.stream.has(attr.name):
            if self.query.group_by:
                msg = (
                    f"column '{attr.name}' in {clause} is neither in GROUP BY nor inside an aggregate function: "
                    f"add it to GROUP BY or aggregate it, such as max({attr.name})"
                )
            else:
                msg = (
                    f"column '{attr.name}' in {clause} is neither a key nor inside an aggregate function: without "
                    f"GROUP BY the keys are the columns selected on their own; select {attr.name} on its own, "
                    f"write GROUP BY or aggregate it, such as max({attr.name})"
                )
            raise _fail(msg, attr.pos)
        if clause == "SELECT" and attr.name in {item.alias for item in self.query.select}:
            msg = f"'{attr.name}' is the name of a select item further on: an item can use the names of those before it"
            raise _fail(msg, attr.pos)
        raise self.unknown_column(attr, extra=self.outputs if outputs else ())

    def aggregate(self, call: Call, clause: str) -> AggregateItem:
        """The ``_agg<i>`` item of an aggregate call: checked, its constants read, shared with identical calls."""
        fn = aggregate_function(call.name)
        assert fn is not None
        written = f"{call.name}()"
        if fn.takes_arg and not call.args:
            raise _fail(f"{written} needs an argument, such as {call.name}(<column>)", call.pos)
        arg = self.plain(call.args[0], f"the argument of {written}", "") if call.args else None
        params = tuple(self.constant(a) for a in call.args[1:])
        try:
            fn.resolve(params)
        except DefinitionError as exc:
            raise _fail(exc.message, call.args[1].pos if len(call.args) > 1 else call.pos) from None
        if arg is not None:
            from tiltframe.aggregates.layout import expression_type  # the store builds on the spec

            try:
                fn.check_arg(expression_type(arg, self.stream), where=clause)
            except DefinitionError as exc:
                raise _fail(exc.message, _exc_pos(exc) or call.pos) from None
        for item in self.aggregates:
            if (item.function, item.arg, item.params) == (fn.name, arg, params):
                return item
        item = AggregateItem(fn.name, arg, f"_agg{len(self.aggregates)}", pos=call.pos, params=params)
        self.aggregates.append(item)
        return item

    def constant(self, expr: Expr) -> Any:
        try:
            return constant_value(expr)
        except DefinitionError as exc:
            raise _fail(exc.message, expr.pos) from None

    # --- expressions over stream attributes (WHERE, aggregate arguments) -----------------------------------

    def plain(self, expr: Expr, where: str, aggregate_hint: str) -> Expr:
        """An expression over stream attributes only: no window column, no aggregate; qualifiers dropped."""
        if isinstance(expr, Attr):
            self.qualifier(expr)
            if self.window_column(expr):  # refuses it in a global aggregation
                msg = f"{expr.name} is only known once events are in windows; it cannot be used in {where}"
                raise _fail(msg, expr.pos)
            self.attribute(expr)
            return Attr(expr.name, pos=expr.pos)
        if isinstance(expr, Call):
            if aggregate_function(expr.name) is None:
                return self.scalar(expr, lambda e: self.plain(e, where, aggregate_hint))
            inside = f"inside {where}" if where.startswith("the argument") else f"in {where}"
            msg = f"aggregate {expr.name}() cannot be used {inside}"
            raise _fail(f"{msg}, which {aggregate_hint}" if aggregate_hint else msg, expr.pos)
        return self.map_children(expr, lambda e: self.plain(e, where, aggregate_hint))

    def scalar(self, call: Call, inside: Callable[[Expr], Expr]) -> Expr:
        """A scalar function call (json_encode written as json_object), its arguments mapped by ``inside``."""
        if not scalars.is_scalar(call.name):
            raise self.unknown_function(call)
        canonical = scalars.canonical_call(call)
        return Call(canonical.name, tuple(inside(a) for a in canonical.args), pos=call.pos)

    def bounds(self, window: Window) -> Window:
        """A session's start and end conditions: true/false expressions over one event's attributes."""
        conditions = window.conditions
        if conditions is None:
            return window
        checked = []
        for expr, what in zip(conditions, ("start", "end"), strict=True):
            clause = f"the session's {what} condition"
            plain = self.plain(expr, clause, "is checked on each event before it is aggregated")
            self.condition(plain, clause)
            checked.append(plain)
        return dataclasses.replace(window, start_condition=checked[0], end_condition=checked[1])

    def condition(self, expr: Expr, clause: str, scope: StreamDef | None = None) -> None:
        """A true/false expression whose arithmetic is typed (comparisons do not type their operands), over
        the stream's attributes or another ``scope``."""
        from tiltframe.aggregates.layout import expression_type  # the store builds on the spec

        def typed(e: Expr) -> AttrType:
            if isinstance(e, Binary):
                typed(e.left), typed(e.right)
            elif isinstance(e, Unary):
                typed(e.operand)
            return expression_type(e, scope or self.stream)

        found = typed(expr)
        if found is not AttrType.BOOL:
            msg = f"{clause} needs a condition (true or false), such as cpu_usage > 99; got a {found.value} expression"
            raise _fail(msg, expr.pos)

    # --- WITH name AS (...) SELECT ... FROM name [WHERE ...] ---------------------------------------------------

    def project(self, projection: Projection) -> tuple[dict[str, Expr], Expr | None]:
        """The outer query's outputs and WHERE, the aggregation's output names replaced by their expressions."""
        items = projection.select or tuple(SqlItem(Attr(name)) for name in self.outputs)
        outputs: dict[str, Expr] = {}
        for item in items:
            name = item.output_name
            if _AGG_NAME.fullmatch(name):
                raise _fail(f"'{name}' is a name tiltframe keeps for its aggregates; choose another", item.pos)
            if name in outputs:
                msg = f"output column '{name}' is selected twice; give one of them another name with AS"
                raise _fail(msg, item.pos)
            outputs[name] = self.over_rows(item.expr, projection)
        where = projection.where
        return outputs, self.over_rows(where, projection) if where is not None else None

    def over_rows(self, expr: Expr, projection: Projection) -> Expr:
        """An expression over the rows of the WITH query, as an expression over its keys and aggregates."""
        if isinstance(expr, Attr):
            if expr.qualifier not in (None, projection.name):
                msg = f"'{expr}' names {expr.qualifier}, but the query reads the rows of {projection.name}"
                raise _fail(msg, expr.pos)
            if expr.name not in self.outputs:
                raise _fail(unknown(f"column of {projection.name}", expr.name, self.outputs), expr.pos)
            return self.outputs[expr.name]
        if isinstance(expr, Call) and aggregate_function(expr.name) is not None:
            msg = (
                f"aggregating the rows of {projection.name} again is not supported yet: "
                f"aggregate inside WITH {projection.name} AS (...)"
            )
            raise _fail(msg, expr.pos)
        if isinstance(expr, Call):
            return self.scalar(expr, lambda e: self.over_rows(e, projection))
        return self.map_children(expr, lambda e: self.over_rows(e, projection))

    @staticmethod
    def map_children(expr: Expr, fn: Callable[[Expr], Expr]) -> Expr:
        if isinstance(expr, Unary):
            return Unary(expr.op, fn(expr.operand), pos=expr.pos)
        if isinstance(expr, Binary):
            return Binary(expr.op, fn(expr.left), fn(expr.right), pos=expr.pos)
        if isinstance(expr, ListLiteral):
            msg = f"a list such as {expr} is only a constant of an aggregate function (kll(x, [0.5, 0.99]))"
            raise _fail(msg, expr.pos)
        return expr  # Literal

    # --- names ----------------------------------------------------------------------------------------------

    def qualifier(self, attr: Attr) -> None:
        if attr.qualifier is not None and attr.qualifier != self.stream.name:
            msg = f"'{attr}' names {attr.qualifier}, but the query reads stream {self.stream.name}"
            raise _fail(msg, attr.pos)

    def window_column(self, attr: Attr) -> bool:
        """True for window_start/window_end of a windowed query (unless the stream has such an attribute)."""
        if attr.name not in WINDOW_COLUMNS or self.stream.has(attr.name):
            return False
        if not self.window.is_windowed:
            msg = (
                f"{attr.name} exists only in windowed queries: read FROM tumble({self.stream.name}, 5s), "
                f"hop(...) or session(...)"
            )
            raise _fail(msg, attr.pos)
        return True

    def attribute(self, attr: Attr) -> None:
        if not self.stream.has(attr.name):
            raise self.unknown_column(attr)

    def unknown_column(self, attr: Attr, extra: Iterable[str] = ()) -> DefinitionError:
        choices = [a.name for a in self.stream.attributes]
        if self.window.is_windowed:
            choices += WINDOW_COLUMNS
        return _fail(unknown("column", attr.name, [*choices, *extra]), attr.pos)

    @staticmethod
    def unknown_function(call: Call) -> DefinitionError:
        if call.name.lower() == EMIT_VERSION_FUNCTION:
            msg = (
                "emit_version() is supported as a select item on its own (SELECT emit_version() AS v, ...), "
                "not inside an expression, WHERE or HAVING"
            )
            return _fail(msg, call.pos)
        return _fail(unknown("function", call.name, [*_function_names(), EMIT_VERSION_FUNCTION]), call.pos)


def _exc_pos(exc: DefinitionError) -> Pos | None:
    return Pos(exc.line, exc.column) if exc.line is not None and exc.column is not None else None


def _literal(value: Any) -> Expr:
    """A constant parameter back as an expression (re-validation of a validated query)."""
    if isinstance(value, tuple):
        return ListLiteral(tuple(_literal(v) for v in value))
    kind = {bool: "bool", int: "long", float: "double", str: "string"}.get(type(value), "string")
    return Literal(value, kind)
