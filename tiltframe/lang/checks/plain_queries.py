"""Validation of plain stream queries (Siddhi's ``from S[filter] select ... insert into T``).

Each query makes every event of its source that passes the filter one event of its target.  The target is
a stream like any other: an aggregation, a continuous query, a retrieval join's requests or another stream
query reads it.  Validation types each selected expression over the source's attributes; a target written
by no ``define stream`` becomes a stream of those attributes (Siddhi's implicit output stream), and keeps
the source's ``@eventTime`` when it selects that attribute under its name.  A defined target takes the
selected values in the order of its attributes, with the same types.
"""

from __future__ import annotations

import dataclasses
from collections import Counter

from tiltframe.aggregates import registry
from tiltframe.errors import DefinitionError, unknown
from tiltframe.functions import scalars
from tiltframe.model.app import AppSpec
from tiltframe.model.expressions import Attr, Binary, Call, Expr, ListLiteral, Pos, Unary
from tiltframe.model.queries import OutputItem, StreamQuery
from tiltframe.model.streams import Attribute, AttrType, StreamDef

__all__ = ["validate_stream_queries"]


def _fail(message: str, pos: Pos | None) -> DefinitionError:
    return DefinitionError.at(message, pos)


def validate_stream_queries(app: AppSpec, joined: dict[str, StreamDef] | None = None) -> AppSpec:
    """``app`` with its stream queries' outputs filled in and their undefined targets among its streams,
    each query checked against the stream it reads (which may be another query's target).

    Queries that read a retrieval join's output are checked in a second call, once the joins are
    (``joined``: each join's output as a stream, ``validate_retrieval.output_stream``); the first leaves
    them as written."""
    if not app.stream_queries:
        return app
    streams = {s.name: s for s in app.streams}
    defined = set(streams)
    if joined is None:
        _check_writers(app)
    joins = {q.insert_into for q in app.queries if q.insert_into is not None} - defined
    later: set[str] = set()  # targets of queries that read a join's output, however far back
    for q in app.stream_queries:
        if q.source in joins | later:
            later.add(q.target)
    sources = {**streams, **(joined or {})}
    pending = [q for q in app.stream_queries if not q.outputs and (joined is not None or q.source not in joins | later)]
    checked = dict(enumerate(app.stream_queries))
    while pending:
        ready = [q for q in pending if q.source in sources]
        if not ready:
            q = pending[0]
            if q.source in joins:
                msg = (f"stream {q.source} is the output of a retrieval join that selects every attribute; list its "
                       "columns in the join's select to read them in a stream query")
                raise _fail(msg, q.pos)
            if any(a.name == q.source for a in app.aggregations):
                msg = (f"a retrieval from aggregation {q.source} needs 'within <time range> per <duration>', such as "
                       "within \"2024-01-** **:**:**\" per \"days\"")
                raise _fail(msg, q.pos)
            raise _fail(unknown("stream", q.source, sorted(sources)), q.pos)
        for q in ready:
            query, target = _validate(q, sources[q.source], streams[q.target] if q.target in defined else None)
            streams.setdefault(q.target, target)
            sources.setdefault(q.target, target)
            checked[app.stream_queries.index(q)] = query
            pending.remove(q)
    queries = tuple(checked[i] for i in range(len(app.stream_queries)))
    app = dataclasses.replace(app, streams=tuple(streams.values()), stream_queries=queries)
    for q in queries:  # a defined stream may be written by a query: not by one that reads it, however far back
        seen = {q.target}
        source: str | None = q.source
        while source is not None:
            if source in seen:
                raise _fail(f"stream {q.target} reads its own events through stream queries", q.pos)
            seen.add(source)
            writer = app.writer_of(source)
            source = writer.source if writer is not None else None
    return app


def _check_writers(app: AppSpec) -> None:
    """One stream query per target, and none into a table's input stream."""
    writers = Counter(q.target for q in app.stream_queries)
    tables = {t.stream_name: t.name for t in app.tables}
    for q in app.stream_queries:
        if writers[q.target] > 1:
            msg = f"stream {q.target} is written by {writers[q.target]} stream queries; one writer per stream is "
            raise _fail(msg + "supported yet", q.target_pos)
        if q.target in tables:
            raise _fail(f"stream {q.target} is the input of table {tables[q.target]}; insert into a table with "
                        "tiltframe insert", q.target_pos)


def _validate(q: StreamQuery, source: StreamDef, target: StreamDef | None) -> tuple[StreamQuery, StreamDef]:
    where = None
    if q.where is not None:
        where = _plain(q.where, source, "the filter")
        found = _type(where, source)
        if found is not AttrType.BOOL:
            raise _fail(f"the filter of stream {source.name} needs a condition (true or false), got a {found.value} "
                        "expression", q.where.pos)
    items = q.select if q.select is not None else tuple(OutputItem(Attr(a.name)) for a in source.attributes)
    outputs: list[tuple[str, Expr]] = []
    for item in items:
        expr = _plain(item.expr, source, "a stream query's select")
        name = item.alias or (expr.name if isinstance(expr, Attr) else None)
        if name is None:
            raise _fail(f"name the value of {item.expr} with 'as', such as {item.expr} as value", item.pos)
        if name in (n for n, _ in outputs):
            raise _fail(f"attribute '{name}' is selected twice; give one of them another name with 'as'", item.pos)
        outputs.append((name, expr))
    types = [_type(e, source) for _, e in outputs]
    if target is None:
        event_time = next((n for n, e in outputs if isinstance(e, Attr) and e.name == source.event_time == n), None)
        attributes = tuple(Attribute(n, t) for (n, _), t in zip(outputs, types, strict=True))
        target = StreamDef(q.target, attributes, event_time=event_time, pos=q.target_pos)
    else:
        if len(outputs) != len(target.attributes):
            msg = (f"stream {target.name} has {len(target.attributes)} attributes and the query selects "
                   f"{len(outputs)}: a stream query fills a defined stream's attributes in order")
            raise _fail(msg, q.target_pos)
        for (name, _), t, attribute, item in zip(outputs, types, target.attributes, items, strict=True):
            if t is not attribute.type:
                msg = (f"'{name}' is {t.value} but attribute {attribute.name} of stream {target.name} is "
                       f"{attribute.type.value}")
                raise _fail(msg, item.pos or q.pos)
        outputs = [(a.name, e) for a, (_, e) in zip(target.attributes, outputs, strict=True)]
    return dataclasses.replace(q, where=where, outputs=tuple(outputs)), target


def _plain(expr: Expr, source: StreamDef, where: str) -> Expr:
    """``expr`` over ``source``'s attributes, qualifiers dropped; aggregates refused (no window here)."""
    if isinstance(expr, Attr):
        if expr.qualifier is not None and expr.qualifier != source.name:
            raise _fail(f"'{expr}' names {expr.qualifier}, but the query reads stream {source.name}", expr.pos)
        source.attribute(expr.name, expr.pos)
        return Attr(expr.name, pos=expr.pos)
    if isinstance(expr, Call):
        if registry.is_aggregate(expr.name):
            msg = (f"aggregate {expr.name}() in {where} is not supported: a stream query has no window; aggregate "
                   "with define aggregation or a continuous query")
            raise _fail(msg, expr.pos)
        if not scalars.is_scalar(expr.name):
            raise _fail(unknown("function", expr.name, scalars.names()), expr.pos)
        return dataclasses.replace(expr, args=tuple(_plain(a, source, where) for a in expr.args))
    if isinstance(expr, Unary):
        return dataclasses.replace(expr, operand=_plain(expr.operand, source, where))
    if isinstance(expr, Binary):
        return dataclasses.replace(expr, left=_plain(expr.left, source, where), right=_plain(expr.right, source, where))
    if isinstance(expr, ListLiteral):
        return dataclasses.replace(expr, items=tuple(_plain(a, source, where) for a in expr.items))
    return expr


def _type(expr: Expr, stream: StreamDef) -> AttrType:
    """The type of ``expr``, its arithmetic checked all the way down (comparisons do not type operands)."""
    from tiltframe.aggregates.layout import expression_type  # the store builds on the spec

    if isinstance(expr, Binary):
        _type(expr.left, stream), _type(expr.right, stream)
    elif isinstance(expr, Unary):
        _type(expr.operand, stream)
    return expression_type(expr, stream)
