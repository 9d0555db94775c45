"""Validate a retrieval query against its app, and say which side every attribute comes from.

A retrieval joins at most two inputs: the aggregation's finalized rows and, in a join, one request event.
Siddhi lets a query name an attribute of either without a qualifier when only one side has it, qualify it
with the alias or the stream or aggregation name, and refuses a name both sides have.  The query returned
here carries that decision in every attribute (``RetrievalQuery.request_ref`` or ``aggregation_ref`` as its
qualifier), so retrieval never guesses; an unqualified name left in ``having`` or ``order by`` is a selected
column, as Siddhi looks there first.  Validating a resolved query again gives the same query.

Siddhi's query section over the retrieved rows is checked here too: ``group by`` attributes, aggregates
(:data:`RETRIEVAL_AGGREGATES`) in ``select`` and ``having``, ``order by``, ``limit`` and ``offset``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from tiltframe.aggregates import registry
from tiltframe.errors import DefinitionError, QueryError, unknown
from tiltframe.model.app import AppSpec
from tiltframe.model.durations import parse_per
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
    calls_of,
    output_name,
)
from tiltframe.model.queries import OrderItem, OutputItem, RetrievalQuery
from tiltframe.model.streams import Attribute, AttrType, StreamDef

__all__ = ["RETRIEVAL_AGGREGATES", "aggregate_calls", "is_grouped", "validate_query"]

#: Aggregates a retrieval's select and having compute over the retrieved rows (Siddhi's query aggregators),
#: by canonical name: whether they need a numeric argument.  ``count()`` counts rows, ``count(x)`` values.
RETRIEVAL_AGGREGATES: dict[str, bool] = {
    "sum": True, "avg": True, "min": False, "max": False, "count": False, "stdDev": True, "distinctCount": False,
}
_WORDS = ", ".join(f"{n}()" for n in RETRIEVAL_AGGREGATES)


def _fail(message: str, pos: Pos | None) -> DefinitionError:
    return DefinitionError.at(message, pos)


def aggregate_calls(expr: Expr) -> tuple[Call, ...]:
    """The calls of retrieval aggregates in ``expr``, outermost first."""
    return tuple(c for c in calls_of(expr) if _canonical(c.name) in RETRIEVAL_AGGREGATES)


def is_grouped(q: RetrievalQuery) -> bool:
    """Whether the retrieved rows are aggregated again: a ``group by``, or an aggregate in select or having."""
    exprs = [*(i.expr for i in q.select or ()), *([q.having] if q.having is not None else [])]
    return bool(q.group_by) or any(aggregate_calls(e) for e in exprs)


def _canonical(name: str) -> str:
    return registry.get(name).name if registry.is_aggregate(name) else name


def _rebuild(expr: Expr, attr: Callable[[Attr], Expr]) -> Expr:
    """``expr`` with each attribute replaced by ``attr(attribute)``."""
    if isinstance(expr, Attr):
        return attr(expr)
    if isinstance(expr, Unary):
        return Unary(expr.op, _rebuild(expr.operand, attr), pos=expr.pos)
    if isinstance(expr, Binary):
        return Binary(expr.op, _rebuild(expr.left, attr), _rebuild(expr.right, attr), pos=expr.pos)
    if isinstance(expr, Call):
        return Call(expr.name, tuple(_rebuild(a, attr) for a in expr.args), pos=expr.pos)
    if isinstance(expr, ListLiteral):
        return ListLiteral(tuple(_rebuild(i, attr) for i in expr.items), pos=expr.pos)
    return expr


class _Scope:
    """The names a query can use: the aggregation's columns, the request stream's attributes, and (in having
    and order by) the selected columns."""

    def __init__(self, app: AppSpec, q: RetrievalQuery) -> None:
        from tiltframe.aggregates.layout import AggregationLayout
        from tiltframe.timeutil import AGG_TIME

        self.q = q
        self.agg = app.aggregation(q.aggregation, q.pos)
        self.layout = AggregationLayout.of(app, self.agg.name)
        self.request: StreamDef | None = app.stream(q.request_stream, q.pos) if q.request_stream else None
        # AGG_TIME: AGG_TIMESTAMP as a datetime (retrieval/retrieve.py)
        self.types: dict[str, AttrType] = {**self.layout.output_types, AGG_TIME: AttrType.LONG}
        self.keys = self.layout.key_names
        self.outputs: set[str] = set()
        if self.request is not None and q.request_ref == q.aggregation_ref:
            msg = f"both sides of the join are called '{q.aggregation_ref}'; give them different aliases"
            raise _fail(msg, q.pos)

    def _words(self, side: str) -> str:
        if side == "request":
            assert self.request is not None
            return f"request stream {self.request.name}"
        return f"aggregation {self.agg.name}"

    def side_of(self, attr: Attr) -> str:
        """'request' or 'aggregation', from the qualifier or, without one, from the side that has the name."""
        q = self.q
        if attr.qualifier is not None:
            if self.request is not None and attr.qualifier in (q.request_alias, q.request_stream):
                return "request"
            if attr.qualifier in (q.aggregation_alias, q.aggregation):
                return "aggregation"
            refs = [r for r in (q.request_alias, q.request_stream, q.aggregation_alias, q.aggregation) if r]
            raise _fail(f"unknown alias '{attr.qualifier}' in '{attr}'" + _one_of(refs), attr.pos)
        in_request = self.request is not None and self.request.has(attr.name)
        if in_request and attr.name in self.types:
            msg = (
                f"'{attr.name}' is ambiguous: both {self._words('request')} and {self._words('aggregation')} "
                f"have it; write {q.request_ref}.{attr.name} or {q.aggregation_ref}.{attr.name}"
            )
            raise _fail(msg, attr.pos)
        if in_request:
            return "request"
        if attr.name in self.types or self.request is None:
            return "aggregation"
        names = [*self.types, *(a.name for a in self.request.attributes)]
        kind = f"attribute of {self.agg.name} or {self.request.name}"
        raise _fail(unknown(kind, attr.name, names), attr.pos)

    def resolve(self, attr: Attr, *, keys_only: bool = False, outputs: bool = False) -> Attr:
        """``attr`` qualified by its side's reference; checked against that side's names."""
        if outputs and attr.qualifier is None and attr.name in self.outputs:
            return attr
        side = self.side_of(attr)
        if side == "request":
            assert self.request is not None
            self.request.attribute(attr.name, attr.pos)
            return Attr(attr.name, self.q.request_ref, pos=attr.pos)
        allowed = self.keys if keys_only else tuple(self.types)
        if attr.name not in allowed:
            what = "group-by attribute of " if keys_only else "attribute of "
            names = [*allowed, *(self.outputs if outputs else ())]
            raise _fail(unknown(what + self.agg.name, attr.name, names), attr.pos)
        return Attr(attr.name, self.q.aggregation_ref, pos=attr.pos)

    def expr(self, expr: Expr, *, keys_only: bool = False, outputs: bool = False) -> Expr:
        return _rebuild(expr, lambda a: self.resolve(a, keys_only=keys_only, outputs=outputs))

    def type_of(self, attr: Attr) -> AttrType | None:
        """The type of a resolved attribute, when it is a column of one side."""
        if attr.qualifier == self.q.request_ref and self.request is not None and self.request.has(attr.name):
            return self.request.attribute(attr.name).type
        return self.types.get(attr.name) if attr.qualifier is not None else None


def _one_of(refs: list[str]) -> str:
    return f" (the query's inputs are: {', '.join(dict.fromkeys(refs))})" if refs else ""


def validate_query(app: AppSpec, q: RetrievalQuery) -> RetrievalQuery:
    """Check a retrieval query against the aggregations and streams of ``app``; returns it with every
    attribute resolved to its side (see the module docstring).

    Raises:
        DefinitionError: at the line and column of the first problem.
    """
    scope = _Scope(app, q)
    on = scope.expr(q.on, keys_only=True) if q.on is not None else None
    within = tuple(_range_operand(scope, w) for w in q.within)
    per = _range_operand(scope, q.per) if q.per is not None else None
    _check_range(scope, q, within, per)
    select = _select(scope, q)
    if select is not None:
        scope.outputs = {output_name(i.expr, i.alias) for i in select}
    else:
        scope.outputs = set(scope.types)
    group_by = tuple(_group_key(scope, g) for g in q.group_by)
    having = scope.expr(q.having, outputs=True) if q.having is not None else None
    order = tuple(_order_item(scope, o) for o in q.order_by)
    resolved = dataclasses.replace(
        q, on=on, within=within, per=per, select=select, group_by=group_by, having=having, order_by=order
    )
    if is_grouped(resolved):
        _check_grouped(scope, resolved)
    elif having is not None:
        _check_calls(having, "having")
    for value, word in ((q.limit, "limit"), (q.offset, "offset")):
        if value is not None and value < 0:
            raise _fail(f"{word} must not be negative, got {value}", q.pos)
    return resolved


def _range_operand(scope: _Scope, operand: Expr) -> Expr:
    """A ``within``/``per`` value: a constant, or an attribute of the request stream."""
    if isinstance(operand, Literal):
        return operand
    if not isinstance(operand, Attr):
        raise _fail("within and per take constants or request-stream attributes", operand.pos)
    if scope.request is None:
        msg = (
            f"'{operand}' in within/per: a retrieval without a request stream takes constants there "
            f"(such as within \"2024-01-** **:**:**\" per \"days\")"
        )
        raise _fail(msg, operand.pos)
    if scope.side_of(operand) != "request":
        msg = (
            f"'{operand}' in within/per is an attribute of aggregation {scope.agg.name}; within and per take "
            f"constants or attributes of request stream {scope.request.name}"
        )
        raise _fail(msg, operand.pos)
    return scope.resolve(operand)


def _check_range(scope: _Scope, q: RetrievalQuery, within: tuple[Expr, ...], per: Expr | None) -> None:
    if len(within) not in (1, 2):
        raise _fail("within takes a pattern or a start and an end", q.pos)
    if isinstance(per, Literal):
        if not isinstance(per.value, str):
            raise _fail(f"per takes a duration name such as \"days\", got {per}", per.pos)
        try:
            g, zone = parse_per(per.value)
            if zone is None:  # the aggregation's own buckets: one of its levels
                scope.agg.granularity(g)
        except DefinitionError as exc:
            raise _fail(exc.message, per.pos) from None
    if all(isinstance(w, Literal) for w in within):
        from tiltframe.timeutil.ranges import within_range

        try:
            within_range(*(w.value for w in within))  # type: ignore[union-attr]
        except QueryError as exc:
            raise _fail(str(exc), _failing_bound(within).pos) from None


def _failing_bound(within: tuple[Expr, ...]) -> Expr:
    """The ``within`` value an error is about: the first that is no valid timestamp, else the start."""
    from tiltframe.timeutil.parse import parse_timestamp

    if len(within) == 2:
        for bound in within:
            try:
                parse_timestamp(bound.value)  # type: ignore[attr-defined]
            except QueryError:
                return bound
    return within[0]


def _select(scope: _Scope, q: RetrievalQuery) -> tuple[OutputItem, ...] | None:
    """The select items resolved; without them (``select *``), every attribute, refused in a join when
    both sides have a name (Siddhi's rule)."""
    if q.select is None:
        if scope.request is not None:
            both = [a.name for a in scope.request.attributes if a.name in scope.types]
            if both:
                msg = (
                    f"select * (or no select) returns the attributes of request stream {scope.request.name} and "
                    f"of aggregation {scope.agg.name}, and both have '{both[0]}'; list the columns "
                    f"(such as select {q.aggregation_ref}.{both[0]}, ...)"
                )
                raise _fail(msg, q.pos)
        return None
    items = []
    for item in q.select:
        _check_calls(item.expr, "a retrieval select")
        items.append(OutputItem(scope.expr(item.expr), item.alias, pos=item.pos))
    seen: set[str] = set()
    for item in items:  # pointed at the second
        name = output_name(item.expr, item.alias)
        if name in seen:
            raise _fail(f"'{name}' is selected twice; rename one with 'as <name>'", item.pos)
        seen.add(name)
    return tuple(items)


def _check_calls(expr: Expr, where: str) -> None:
    """Only the retrieval aggregates, never nested, each with the argument it needs."""
    for call in calls_of(expr):
        name = _canonical(call.name)
        if name not in RETRIEVAL_AGGREGATES:
            msg = f"function {call.name}() is not available in {where} (its aggregates are {_WORDS})"
            raise _fail(msg, call.pos)
        nested = [c for c in aggregate_calls(call)[1:]]
        if nested:
            raise _fail(f"aggregate {nested[0]} cannot be used inside another aggregate", nested[0].pos)
        if len(call.args) > 1 or (name != "count" and not call.args):
            raise _fail(f"{call.name}() takes one argument, got {len(call.args)}", call.pos)


def _group_key(scope: _Scope, key: Expr) -> Attr:
    if not isinstance(key, Attr):
        msg = f"group by takes attributes of the aggregation or the request stream, got '{key}'"
        raise _fail(msg, key.pos)
    return scope.resolve(key)


def _order_item(scope: _Scope, item: OrderItem) -> OrderItem:
    """An order key: a selected column or an attribute of either side (Siddhi looks up the selection first)."""
    expr = item.expr
    if not attributes_of(expr):
        raise _fail(f"order by {expr}: order by a selected column or an attribute", expr.pos)
    if aggregate_calls(expr):
        msg = f"order by {expr}: select the aggregate with a name (sum(total) as t) and order by that name"
        raise _fail(msg, expr.pos)
    _check_calls(expr, "order by")
    return OrderItem(scope.expr(expr, outputs=True), item.ascending)


def _check_grouped(scope: _Scope, q: RetrievalQuery) -> None:
    """In a grouped retrieval, each selected value is a group-by attribute, a request attribute (one value per
    request), or computed from aggregates; aggregate arguments are attributes of the rows."""
    if q.select is None:  # a query built in Python; the parser refuses it
        raise _fail("group by needs a select list that names the columns it computes", q.pos)
    grouped = set(q.group_by)
    for item in q.select:
        _check_group_expr(scope, item.expr, grouped, outputs=False)
    if q.having is not None:
        _check_calls(q.having, "having")
        _check_group_expr(scope, q.having, grouped, outputs=True)


def _check_group_expr(scope: _Scope, expr: Expr, grouped: set[Attr], *, outputs: bool) -> None:
    for call in aggregate_calls(expr):
        fn = _canonical(call.name)
        for arg in call.args:
            for attr in attributes_of(arg):
                if attr.qualifier is None:  # a selected column inside an aggregate
                    msg = f"'{attr.name}' in {call}: aggregate an attribute of the rows, not a selected column"
                    raise _fail(msg, attr.pos)
            if RETRIEVAL_AGGREGATES[fn] and isinstance(arg, Attr):
                arg_type = scope.type_of(arg)
                if arg_type is not None and not arg_type.is_numeric:
                    raise _fail(f"{call.name}() needs a number, but '{arg}' is {arg_type.value}", arg.pos)
    for attr in _outside_aggregates(expr):
        if outputs and attr.qualifier is None:
            continue
        if attr in grouped or attr.qualifier == scope.q.request_ref:
            continue
        msg = (
            f"'{attr}' is neither in group by nor inside an aggregate; add it to group by or aggregate it "
            f"(such as max({attr}))"
        )
        raise _fail(msg, attr.pos)


def _outside_aggregates(expr: Expr) -> tuple[Attr, ...]:
    if isinstance(expr, Call) and _canonical(expr.name) in RETRIEVAL_AGGREGATES:
        return ()
    if isinstance(expr, Attr):
        return (expr,)
    if isinstance(expr, Unary):
        return _outside_aggregates(expr.operand)
    if isinstance(expr, Binary):
        return _outside_aggregates(expr.left) + _outside_aggregates(expr.right)
    if isinstance(expr, Call):
        return tuple(a for arg in expr.args for a in _outside_aggregates(arg))
    return ()


def output_stream(app: AppSpec, q: RetrievalQuery) -> StreamDef | None:
    """The rows a validated join inserts into its output stream, as a stream a stream query can read
    (``from tempStream select ... insert into ...``, as Siddhi apps chain them); None when the join selects
    no columns by name (every attribute) or inserts nowhere."""
    from tiltframe.aggregates import registry
    from tiltframe.aggregates.layout import expression_type

    if q.insert_into is None or q.select is None:
        return None
    scope = _Scope(app, q)
    sides = dict(scope.types)
    if scope.request is not None:
        sides.update({a.name: a.type for a in scope.request.attributes})
    both = StreamDef("_both", tuple(Attribute(n, t) for n, t in sides.items()))
    attributes = []
    for item in q.select:
        expr = item.expr
        found = scope.type_of(expr) if isinstance(expr, Attr) else None
        if found is None and isinstance(expr, Call) and registry.is_aggregate(expr.name):
            fn = registry.get(expr.name)
            arg = expression_type(expr.args[0], both) if expr.args else None
            found = fn.result_type(arg)
        attributes.append(Attribute(output_name(expr, item.alias), found or expression_type(expr, both)))
    return StreamDef(q.insert_into, tuple(attributes), pos=q.pos)
