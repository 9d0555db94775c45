"""Validation of SELECT queries over tables: the default aggregation clause of EventQL pre-aggregation.

A pre-aggregated table holds up to ``workers`` partial rows per interval and dimension values.  A query
sees it as if it held one row per interval and dimension values, each measure merged by its own function:

- without GROUP BY and without aggregate calls, rows are merged by the time column (the interval start)
  and every dimension (the seed's default aggregation clause);
- with GROUP BY (columns among the time column and the dimensions), a measure named anywhere stands for
  its value merged over the group: ``clicks / impressions`` is the group's click rate;
- ``f(m)``, where ``m`` is a measure declared with ``f`` itself (``sum(clicks)`` for ``sum(clicked) as
  clicks``; ``sum`` also for a ``count()``), is ``m`` merged over the group, and without GROUP BY makes the
  whole table one group, as in SQL; any other aggregate call is refused, with the measure to name instead;
- WHERE filters rows before they are merged, so it reads the time column and the dimensions only;
  HAVING filters merged rows; ORDER BY reads output columns.

``FROM partials(T)`` reads the stored partial rows as they are (each measure finalized on its own row,
plus ``SHARD_ID``, the worker that wrote it), and a raw table's rows are read as they are.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import NoReturn

from tiltframe.aggregates import registry
from tiltframe.aggregates.measures import aggregate_of, measure_types, output_names
from tiltframe.errors import DefinitionError, unknown
from tiltframe.functions import scalars
from tiltframe.lang.checks.continuous_queries import aggregate_function
from tiltframe.model.aggregations import AggregateItem
from tiltframe.model.app import AppSpec
from tiltframe.model.continuous import SqlItem
from tiltframe.model.expressions import (
    Attr,
    Binary,
    Call,
    Expr,
    ListLiteral,
    Literal,
    Pos,
    Unary,
    attributes_of,
)
from tiltframe.model.queries import OrderItem
from tiltframe.model.streams import Attribute, AttrType, StreamDef
from tiltframe.model.tables import WORKER_COLUMN, Measure, TableQuery, TableSpec

__all__ = ["validate_table_query"]


def _fail(message: str, pos: Pos | None) -> NoReturn:
    raise DefinitionError.at(message, pos)


def validate_table_query(tables: AppSpec, query: TableQuery) -> TableQuery:
    """Check ``query`` against its table and fill in what the engine reads (see :class:`TableQuery`).

    Raises:
        DefinitionError: at the line and column of the offending token, with a suggestion where one helps.
    """
    table = tables.table(query.table, query.table_pos)
    if query.partials and table.preaggregation is None:
        msg = f"table {table.name} is not pre-aggregated, so it has no partial rows: read FROM {table.name}"
        _fail(msg, query.table_pos)
    if table.preaggregation is None and _groups(query):
        return _RawChecker(table, query).run()
    return _Checker(table, query).run()


def _groups(query: TableQuery) -> bool:
    """Whether ``query`` groups rows: GROUP BY, or an aggregate call in SELECT or HAVING."""
    exprs = (*(i.expr for i in query.select), *([query.having] if query.having is not None else []))
    return bool(query.group_by) or any(_has_aggregate(e) for e in exprs)


def _has_aggregate(expr: Expr) -> bool:
    if isinstance(expr, Call) and aggregate_function(expr.name) is not None:
        return True
    children: tuple[Expr, ...] = ()
    if isinstance(expr, Unary):
        children = (expr.operand,)
    elif isinstance(expr, Binary):
        children = (expr.left, expr.right)
    elif isinstance(expr, Call):
        children = expr.args
    return any(_has_aggregate(c) for c in children)


class _Checker:
    """One validation: the table's columns as the query sees them, and the measures it reads."""

    def __init__(self, table: TableSpec, query: TableQuery) -> None:
        self.table = table
        self.query = query
        pre = table.preaggregation
        self.merged = pre is not None and not query.partials
        self.measures: tuple[Measure, ...] = pre.measures if pre is not None else ()
        #: measure output name -> measure (an alias of a one-output measure is its output name)
        self.measure_of = {name: m for m in self.measures for name in output_names(m)}
        self.measure_types = measure_types(table)
        #: the time column and the dimensions: what a pre-aggregated row is keyed by
        self.row_keys: dict[str, AttrType] = {}
        if pre is not None and table.time_column is not None:
            self.row_keys[table.time_column] = AttrType.LONG
            self.row_keys.update({d: table.column(d).type for d in pre.dimensions})
        if pre is None:
            self.row_columns = {c.name: c.type for c in table.columns}
        elif query.partials:
            time_column = next(iter(self.row_keys))
            self.row_columns = {time_column: AttrType.LONG, WORKER_COLUMN: AttrType.STRING}
            self.row_columns.update(self.row_keys)
            self.row_columns.update(self.measure_types)
        else:
            self.row_columns = dict(self.row_keys)
        self.keys: tuple[str, ...] = ()
        self.aggregated = False  # an aggregate call f(m) was written

    # --- the whole query ------------------------------------------------------------------------------------

    def run(self) -> TableQuery:
        q = self.query
        if not self.merged:
            for clause, word in ((q.group_by, "GROUP BY"), (q.having, "HAVING")):
                if clause:
                    first = clause[0] if isinstance(clause, tuple) else clause
                    _fail(f"{word} needs merged rows: {self.unmerged_reason()}", first.pos)
        where = self.where(q.where) if q.where is not None else None
        self.aggregated = self.merged and any(self.has_aggregate(e) for e in self.written_exprs())
        self.keys = self.group_by() if self.merged else ()
        outputs = self.select()
        having = self.having(q.having, outputs) if q.having is not None else None
        order = tuple(self.order_item(o, outputs) for o in q.order_by)
        if q.limit is not None and q.limit < 0:
            _fail(f"LIMIT must not be negative, got {q.limit}", q.pos)
        scope = self.scope()
        output_types = tuple((name, self.typed(expr, scope)) for name, expr in outputs.items())
        if having is not None:
            self.condition(having, scope, "HAVING")
        read = (*outputs.values(), *([having] if having is not None else []))
        used = {a.name for e in read for a in attributes_of(e)}
        measures = tuple(m.alias for m in self.measures if any(n in used for n in output_names(m)))
        return dataclasses.replace(
            q,
            where=where,
            having=having,
            order_by=order,
            merged=self.merged,
            keys=self.keys,
            measures=measures,
            outputs=tuple(outputs.items()),
            output_types=output_types,
        )

    def written_exprs(self) -> tuple[Expr, ...]:
        q = self.query
        return (*(i.expr for i in q.select), *([q.having] if q.having is not None else []))

    def unmerged_reason(self) -> str:
        if self.query.partials:
            return f"partials({self.table.name}) reads the partial rows as they are; read FROM {self.table.name}"
        return (
            f"table {self.table.name} is not pre-aggregated, so its rows are read as they are; aggregate them "
            "in a continuous query, or pre-aggregate the table"
        )

    def scope(self) -> StreamDef:
        """The columns output expressions read, with their types."""
        merged = {k: self.row_keys[k] for k in self.keys} | self.measure_types
        columns = merged if self.merged else self.row_columns
        return StreamDef("_columns", tuple(Attribute(n, t) for n, t in columns.items()))

    @staticmethod
    def typed(expr: Expr, scope: StreamDef) -> AttrType:
        from tiltframe.aggregates.layout import expression_type  # the store builds on the spec

        return expression_type(expr, scope)

    def condition(self, expr: Expr, scope: StreamDef, clause: str) -> None:
        found = self.typed(expr, scope)
        if found is not AttrType.BOOL:
            _fail(f"{clause} takes a condition (such as clicks > 10), got '{expr}' of type {found.value}", expr.pos)

    # --- clauses --------------------------------------------------------------------------------------------

    def where(self, expr: Expr) -> Expr:
        """A condition over each stored row before rows are merged."""
        where = self.rewrite(expr, lambda a, _clause: self.where_column(a), "WHERE")
        self.condition(where, StreamDef("_rows", tuple(Attribute(n, t) for n, t in self.row_columns.items())),
                       "WHERE")
        return where

    def where_column(self, attr: Attr) -> Expr:
        name = attr.name
        if name in self.row_columns:
            return Attr(name, pos=attr.pos)
        if name in self.measure_of or self.is_multi_measure(name):
            msg = (
                f"WHERE filters rows before they are merged, and measure '{name}' has a value only once they are: "
                f"filter on the time column or a dimension, or move the condition to HAVING"
            )
            _fail(msg, attr.pos)
        raise self.unknown_column(attr, "WHERE")

    def group_by(self) -> tuple[str, ...]:
        q = self.query
        if not q.group_by:
            return () if self.aggregated else tuple(self.row_keys)
        keys: list[str] = []
        for expr in q.group_by:
            if not isinstance(expr, Attr):
                choices = ", ".join(self.row_keys)
                _fail(f"GROUP BY takes columns ({choices}), got '{expr}'", expr.pos)
            self.qualifier(expr)
            if expr.name in keys:
                _fail(f"column '{expr.name}' is listed twice in GROUP BY", expr.pos)
            if expr.name not in self.row_keys:
                if expr.name in self.measure_of or self.is_multi_measure(expr.name):
                    msg = (
                        f"'{expr.name}' is a measure, merged over each group; GROUP BY takes the time column and "
                        f"dimensions ({', '.join(self.row_keys)})"
                    )
                    _fail(msg, expr.pos)
                raise self.unknown_column(expr, "GROUP BY")
            keys.append(expr.name)
        return tuple(keys)

    def select(self) -> dict[str, Expr]:
        outputs: dict[str, Expr] = {}
        if not self.query.select:
            names = [*self.keys, *self.measure_types] if self.merged else list(self.row_columns)
            return {n: Attr(n) for n in names}
        for item in self.query.select:
            for name, expr in self.select_item(item):
                if name in outputs:
                    _fail(f"output column '{name}' is selected twice; give one of them another name with AS", item.pos)
                outputs[name] = expr
        return outputs

    def select_item(self, item: SqlItem) -> list[tuple[str, Expr]]:
        """One output, or one per quantile for a quantile measure selected on its own."""
        expr = item.expr
        if isinstance(expr, Attr) and self.is_multi_measure(expr.name):
            self.qualifier(expr)
            measure = self.multi_measure(expr.name)
            alias = item.alias or measure.alias
            fn = aggregate_of(measure)
            settings = fn.resolve(measure.params)
            return [
                (out, Attr(column))
                for out, column in zip(fn.output_names(alias, settings), output_names(measure), strict=True)
            ]
        return [(item.output_name, self.rewrite(item.expr, self.output_column, "SELECT"))]

    def having(self, expr: Expr, outputs: dict[str, Expr]) -> Expr:
        def column(attr: Attr, _clause: str) -> Expr:
            if attr.name not in self.row_keys and attr.name not in self.measure_of and attr.name in outputs:
                return outputs[attr.name]
            return self.output_column(attr, "HAVING")

        return self.rewrite(expr, column, "HAVING")

    def order_item(self, item: OrderItem, outputs: dict[str, Expr]) -> OrderItem:
        def column(attr: Attr) -> Expr:
            self.qualifier(attr)
            if attr.name not in outputs:
                msg = (
                    f"ORDER BY {attr.name}: only selected columns order the result "
                    f"(selected: {', '.join(outputs)}); select {attr.name} to order by it"
                )
                _fail(msg, attr.pos)
            return Attr(attr.name, pos=attr.pos)

        return OrderItem(self.rewrite(item.expr, lambda a, _clause: column(a), "ORDER BY"), item.ascending)

    # --- names ----------------------------------------------------------------------------------------------

    def output_column(self, attr: Attr, clause: str) -> Expr:
        """A column of SELECT or HAVING: a key, a measure (merged over the group) or, unmerged, any row column."""
        name = attr.name
        if not self.merged:
            if name in self.row_columns:
                return Attr(name, pos=attr.pos)
            raise self.unknown_column(attr, clause)
        if name in self.keys:
            return Attr(name, pos=attr.pos)
        if name in self.measure_of:
            return Attr(name, pos=attr.pos)
        if self.is_multi_measure(name):
            outs = output_names(self.multi_measure(name))
            msg = (
                f"measure '{name}' gives one column per quantile ({', '.join(outs)}): name one of them, or select "
                f"{name} on its own"
            )
            _fail(msg, attr.pos)
        if name in self.row_keys:
            if self.query.group_by:
                msg = (
                    f"column '{name}' in {clause} is not in GROUP BY: add it to GROUP BY, or drop it (rows are merged "
                    f"per {', '.join(self.keys)})"
                )
            else:
                msg = (
                    f"column '{name}' in {clause} is neither in GROUP BY nor a measure: with an aggregate call and no "
                    f"GROUP BY the whole table is one group; add GROUP BY {name}"
                )
            _fail(msg, attr.pos)
        raise self.unknown_column(attr, clause)

    def is_multi_measure(self, name: str) -> bool:
        return any(m.alias == name and output_names(m) != (name,) for m in self.measures)

    def multi_measure(self, name: str) -> Measure:
        return next(m for m in self.measures if m.alias == name)

    def qualifier(self, attr: Attr) -> None:
        if attr.qualifier is not None and attr.qualifier != self.table.name:
            _fail(f"'{attr}' names {attr.qualifier}, but the query reads table {self.table.name}", attr.pos)

    def unknown_column(self, attr: Attr, clause: str) -> DefinitionError:
        table = self.table
        if table.has(attr.name) and attr.name not in self.row_columns:
            users = [m.alias for m in self.measures if m.column == attr.name]
            measured = f"; its measures: {', '.join(users)}" if users else ""
            msg = (
                f"column '{attr.name}' of table {table.name} is not kept by its pre-aggregation: it is neither the "
                f"time column nor a dimension{measured}"
            )
            return DefinitionError.at(msg, attr.pos)
        if not self.merged or clause == "WHERE":
            choices = list(self.row_columns)
        elif clause == "GROUP BY":
            choices = list(self.row_keys)
        else:
            choices = [*self.keys, *self.measure_of, *(m.alias for m in self.measures)]
        return DefinitionError.at(unknown(f"column of {table.name}", attr.name, choices), attr.pos)

    # --- expressions ----------------------------------------------------------------------------------------

    def has_aggregate(self, expr: Expr) -> bool:
        return _has_aggregate(expr)

    def measure_call(self, call: Call) -> Measure | None:
        """The measure ``m`` of ``f(m)`` when ``f`` is ``m``'s own function (or sum of a count), else None."""
        fn = aggregate_function(call.name)
        if fn is None or len(call.args) != 1 or not isinstance(call.args[0], Attr):
            return None
        arg = call.args[0]
        measure = next((m for m in self.measures if m.alias == arg.name), None)
        if measure is None:
            return None
        return measure if fn.name == _own_function(measure) else None

    def aggregate(self, call: Call, clause: str) -> Expr:
        """``f(m)`` as the merged measure ``m``; any other aggregate call refused with what to write."""
        if not self.merged:
            _fail(f"aggregate {call.name}() in {clause}: {self.unmerged_reason()}", call.pos)
        measure = self.measure_call(call)
        if measure is not None:
            arg = call.args[0]
            assert isinstance(arg, Attr)
            self.qualifier(arg)
            if self.is_multi_measure(arg.name):
                msg = (
                    f"{call.name}({arg.name}) gives one column per quantile: select {arg.name} on its own, or name "
                    f"one of {', '.join(output_names(measure))}"
                )
                _fail(msg, call.pos)
            return Attr(arg.name, pos=arg.pos)
        names = [a.name for arg in call.args for a in attributes_of(arg)]
        named = next((m for n in names for m in self.measures if n in (m.alias, *output_names(m))), None)
        if named is not None:
            msg = (
                f"{call.name}({named.alias}) is not available: measure {named.alias} is {named.describe()}, merged "
                f"over each group by its own function; write {named.alias} (or {_own_function(named)}({named.alias})) "
                "for its merged value"
            )
        else:
            msg = (
                f"aggregate {call.name}() over '{', '.join(names) or call.name}': a SELECT over a table merges "
                f"its measures ({', '.join(m.alias for m in self.measures)}); write a measure's name, or declare a "
                "measure for it"
            )
        _fail(msg, call.pos)

    def rewrite(self, expr: Expr, column: Callable[[Attr, str], Expr], clause: str) -> Expr:
        """``expr`` with each column resolved by ``column`` and each call checked; qualifiers dropped."""

        def walk(e: Expr) -> Expr:
            if isinstance(e, Attr):
                self.qualifier(e)
                return column(e, clause)
            if isinstance(e, Literal):
                return e
            if isinstance(e, Unary):
                return Unary(e.op, walk(e.operand), pos=e.pos)
            if isinstance(e, Binary):
                return Binary(e.op, walk(e.left), walk(e.right), pos=e.pos)
            if isinstance(e, ListLiteral):
                _fail(f"a list such as {e} is only a constant of an aggregate function", e.pos)
            if aggregate_function(e.name) is not None:
                if clause == "WHERE":
                    _fail(f"aggregate {e.name}() in WHERE, which filters rows before they are merged; use HAVING",
                          e.pos)
                if clause == "ORDER BY":
                    _fail(f"ORDER BY reads selected columns: select {e} AS <name> and order by that name", e.pos)
                return self.aggregate(e, clause)
            if not scalars.is_scalar(e.name):
                choices = [*scalars.names(), *registry.names()]
                _fail(unknown("function", e.name, choices), e.pos)
            try:
                call = scalars.canonical_call(e)
            except DefinitionError as exc:
                _fail(exc.message, e.pos)
            return Call(call.name, tuple(walk(a) for a in call.args), pos=call.pos)

        return walk(expr)


def _own_function(measure: Measure) -> str:
    """The aggregate whose call over ``measure`` means the merged measure: its own function, but sum for a
    count (``count(m)`` would read as a count of rows)."""
    return "sum" if measure.function == "count" else measure.function



class _RawChecker(_Checker):
    """A raw table's query that groups: rows are grouped by any of the table's columns and every aggregate
    call is computed from the stored rows (``TableQuery.aggregates``), as in SQL over a table."""

    def __init__(self, table: TableSpec, query: TableQuery) -> None:
        super().__init__(table, query)
        self.merged = True
        self.row_keys = {c.name: c.type for c in table.columns}
        self.row_columns = dict(self.row_keys)
        self.stream = StreamDef(table.name, table.columns)
        self.aggregates: list[AggregateItem] = []

    def unmerged_reason(self) -> str:  # pragma: no cover - a raw table's grouped query is merged
        return ""

    def run(self) -> TableQuery:
        checked = super().run()
        return dataclasses.replace(checked, measures=(), aggregates=tuple(self.aggregates))

    def scope(self) -> StreamDef:
        columns = {k: self.row_keys[k] for k in self.keys}
        for item in self.aggregates:
            fn = registry.get(item.function)
            arg_type = self.typed(item.arg, self.stream) if item.arg is not None else None
            settings = fn.resolve(item.params)
            result = fn.result_type(arg_type)
            columns.update(dict.fromkeys(fn.output_names(item.alias, settings), result))
        return StreamDef("_columns", tuple(Attribute(n, t) for n, t in columns.items()))

    def output_column(self, attr: Attr, clause: str) -> Expr:
        if attr.name in self.keys or any(attr.name == item.alias for item in self.aggregates):
            return Attr(attr.name, pos=attr.pos)
        return super().output_column(attr, clause)

    def aggregate(self, call: Call, clause: str) -> Expr:
        """An aggregate call over the rows (its argument an expression of the table's columns), shared with
        identical calls: the column it is computed into."""
        fn = aggregate_function(call.name)
        assert fn is not None
        if fn.takes_arg and not call.args:
            _fail(f"{call.name}() needs an argument, such as {call.name}(<column>)", call.pos)
        if call.args and self.has_aggregate(call.args[0]):
            _fail(f"an aggregate inside {call.name}() is not allowed", call.pos)
        arg = self.rewrite(call.args[0], lambda a, _c: self.where_column(a), clause) if call.args else None
        params = tuple(_constant(a) for a in call.args[1:])
        try:
            settings = fn.resolve(params)
            if arg is not None:
                fn.check_arg(self.typed(arg, self.stream), where=clause)
        except DefinitionError as exc:
            _fail(exc.message, call.pos)
        if len(fn.output_names("x", settings)) != 1:
            _fail(f"{call.name}() gives several columns; it is not available in a SELECT over a raw table yet",
                  call.pos)
        for item in self.aggregates:
            if (item.function, item.arg, item.params) == (fn.name, arg, params):
                return Attr(item.alias, pos=call.pos)
        item = AggregateItem(fn.name, arg, f"_agg{len(self.aggregates)}", pos=call.pos, params=params)
        self.aggregates.append(item)
        return Attr(item.alias, pos=call.pos)


def _constant(expr: Expr) -> object:
    """A constant argument of an aggregate call (a number, a string, a list of them)."""
    if isinstance(expr, Literal):
        return expr.value
    if isinstance(expr, ListLiteral):
        return tuple(_constant(e) for e in expr.items)
    _fail(f"'{expr}' must be a constant: an aggregate takes one column or expression, then constants", expr.pos)
