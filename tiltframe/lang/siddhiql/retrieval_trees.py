"""Build retrieval queries (Siddhi's on-demand queries and aggregation joins) from their parse trees.

Kept apart from :mod:`tiltframe.lang.siddhiql.trees` so that each module stays one job: this one knows the clauses of
``query`` in ``grammar.lark`` (``from``, ``join``, ``on``, ``within``/``per``, ``select``, ``group by``,
``having``, ``order by``, ``limit``, ``offset``, ``insert into``).  Which attribute belongs to which side is
decided later, by :mod:`tiltframe.lang.checks.retrieval`, which knows the app.  A query Siddhi accepts but
tiltframe cannot answer yet (a plain stream query, a filter or window on a stream) is refused here with a
:class:`~tiltframe.errors.NotSupportedYet` at the construct.
"""

from __future__ import annotations

from lark import Token

from tiltframe.errors import DefinitionError, NotSupportedYet
from tiltframe.lang.siddhiql.trees import ParseTree, SpecBuilder, _kids, _present, _str_or_none, snippet
from tiltframe.lang.siddhiql.vocabulary import RawAnnotation, check_annotations
from tiltframe.model.expressions import Pos
from tiltframe.model.queries import OrderItem, OutputItem, RetrievalQuery, StreamQuery

__all__ = ["build_query"]

_RUNS = (
    "tiltframe runs aggregations (define aggregation), retrievals over them "
    "(from <aggregation> within ... per ...) and continuous queries in streaming SQL (SELECT ... FROM ...)"
)


def build_query(
    b: SpecBuilder, tree: ParseTree, annotations: list[RawAnnotation]
) -> RetrievalQuery | StreamQuery:
    """A retrieval, or a plain stream query, as written; sides, names and types are checked by
    ``validate_retrieval`` and ``stream_queries``."""
    source, join, on, within, per, select, group_by, having, order_by, limit, offset, insert = _kids(tree)
    check_annotations(annotations, "a retrieval query", "a retrieval query", b.error)
    if within is None and join is None and _is_stream(b, source, insert is not None):
        return _stream_query(b, tree, annotations)
    _refuse_stream_query(b, tree, source, join, within)
    aggregation, request = _sides(b, source, _kids(join)[0] if join is not None else None)
    for side in (aggregation, request):
        if side is not None:
            _refuse_handlers(b, side, is_aggregation=side is aggregation)
    info = next((a.annotation for a in annotations if a.annotation.name.lower() == "info"), None)
    output = _kids(select)[0] if select is not None else None
    if output is None and having is not None:  # Siddhi's grammar too: having belongs to a select clause
        raise b.error("'having' needs a select clause before it", b.pos(having))
    if group_by is not None and (output is None or output.data == "select_all"):
        raise b.error("'group by' needs a select list that names the columns it computes", b.pos(group_by))
    order = []
    for item in _kids(order_by) if order_by is not None else []:
        expr, direction = _kids(item)
        order.append(OrderItem(b.checked_expr(expr), str(direction or "asc").lower() == "asc"))
    events, target = _kids(insert) if insert is not None else (None, None)
    if events is not None:
        events = _kids(events)[0]
    name, alias = _name_and_alias(aggregation)
    if target is not None:  # a stream from here on: stream queries may read it
        b.known_streams.add(str(target))
    return RetrievalQuery(
        aggregation=name,
        aggregation_alias=alias,
        request_stream=_name_and_alias(request)[0] if request is not None else None,
        request_alias=_name_and_alias(request)[1] if request is not None else None,
        within=tuple(b.checked_expr(e) for e in _present(_kids(within))),
        per=b.checked_expr(_kids(per)[0]) if per is not None else None,
        on=b.checked_expr(_kids(on)[0]) if on is not None else None,
        select=_select_list(b, output),
        order_by=tuple(order),
        limit=b.whole_number(_kids(limit)[0], "limit") if limit is not None else None,
        group_by=tuple(b.checked_expr(e) for e in _kids(group_by)) if group_by is not None else (),
        having=b.checked_expr(_kids(having)[0]) if having is not None else None,
        offset=b.whole_number(_kids(offset)[0], "offset") if offset is not None else None,
        insert_into=_str_or_none(target),
        output_events=str(events).lower() if events is not None else None,
        name=info.get("name") if info is not None else None,
        annotations=tuple(a.annotation for a in annotations),
        pos=b.pos(tree),
    )


def _is_stream(b: SpecBuilder, source: ParseTree, inserts: bool) -> bool:
    """Whether a query reads a stream: one defined or written before, or any name but an aggregation's with a
    filter after it or an ``insert into`` (a stream a later statement may write)."""
    name = _name_and_alias(source)[0]
    return name in b.known_streams or ((bool(_handlers(source)) or inserts) and name not in b.known_aggregations)


def _stream_query(b: SpecBuilder, tree: ParseTree, annotations: list[RawAnnotation]) -> StreamQuery:
    """``from S[filter] select ... insert into T``: one filter at most, and none of a retrieval's clauses."""
    source, _, on, _, _, select, group_by, having, order_by, limit, offset, insert = _kids(tree)
    name, alias = _name_and_alias(source)
    if b.one_query:
        msg = (f"a stream query (from {name} ...) runs as part of an app, with its streams: put it in the app "
               "file and run the app; a query given alone retrieves from an aggregation (within ... per ...)")
        raise b.error(msg, b.pos(tree))
    handlers = _handlers(source)
    for handler in handlers:
        if handler.data != "stream_filter":
            msg = f"{_handler_words(handler)} on stream {name} is not supported yet: a stream query filters and selects"
            raise _not_supported(b, msg, b.pos(handler))
    if len(handlers) > 1:
        raise _not_supported(b, f"a second filter on stream {name} is not supported yet: join them with 'and'",
                             b.pos(handlers[1]))
    for clause, words in ((on, "'on'"), (group_by, "'group by'"), (having, "'having'"), (order_by, "'order by'"),
                          (limit, "'limit'"), (offset, "'offset'")):
        if clause is not None:
            msg = (f"{words} in a stream query over {name} is not supported yet: a stream query filters and selects "
                   "each event; aggregate with define aggregation or a continuous query")
            raise _not_supported(b, msg, b.pos(clause))
    if insert is None:
        msg = f"a stream query over {name} needs 'insert into <stream>' to say where its events go"
        raise b.error(msg, b.pos(tree))
    if alias is not None:
        raise _not_supported(b, f"an alias of stream {name} in a stream query is not supported yet", b.pos(source))
    events, target = _kids(insert)
    if events is not None and str(_kids(events)[0]).lower() != "current":
        msg = "a stream query inserts its current events: 'insert expired events' needs a window, not supported yet"
        raise _not_supported(b, msg, b.pos(events))
    info = next((a.annotation for a in annotations if a.annotation.name.lower() == "info"), None)
    output = _kids(select)[0] if select is not None else None
    b.known_streams.add(str(target))
    return StreamQuery(
        source=name,
        target=str(target),
        where=b.checked_expr(_kids(handlers[0])[0]) if handlers else None,
        select=_select_list(b, output),
        name=info.get("name") if info is not None else None,
        annotations=tuple(a.annotation for a in annotations),
        pos=b.pos(tree),
        target_pos=b.pos(target),
    )


def _select_list(b: SpecBuilder, output: ParseTree | None) -> tuple[OutputItem, ...] | None:
    """The select items, or None for ``select *`` and for a query without a select clause (every attribute)."""
    if output is None or output.data == "select_all":
        return None
    items = []
    for item in _kids(output):
        expr, alias = _kids(item)
        items.append(OutputItem(b.checked_expr(expr), _str_or_none(alias), pos=b.pos(item)))
    return tuple(items)


def _name_and_alias(source: ParseTree) -> tuple[str, str | None]:
    """``Name [handlers] [as alias]``: the name is the first child and the alias (or None) the last."""
    kids = _kids(source)
    return str(kids[0]), _str_or_none(kids[-1])


def _handlers(source: ParseTree) -> list[ParseTree]:
    return [k for k in _kids(source)[1:-1] if k is not None]


def _refuse_stream_query(
    b: SpecBuilder, tree: ParseTree, source: ParseTree, join: ParseTree | None, within: ParseTree | None
) -> None:
    """A query without ``within ... per``: a stream query (not supported yet), else a retrieval missing them."""
    if within is not None:
        return
    name = _name_and_alias(source)[0]
    if join is not None:
        other = _name_and_alias(_kids(join)[0])[0]
        neither = name not in b.known_aggregations and other not in b.known_aggregations
        if neither and (name in b.known_streams or other in b.known_streams):
            msg = f"a join of streams ({name} join {other}) is not supported yet; {_RUNS}"
            raise _not_supported(b, msg, b.pos(tree))
        agg = name if name in b.known_aggregations else other
        msg = f"a join with aggregation {agg} needs 'within <time range> [per <duration>]' after its 'on' condition"
        raise b.error(msg, b.pos(tree))
    handlers = _handlers(source)
    if name in b.known_streams or (handlers and name not in b.known_aggregations):
        what = f" (with {_handler_words(handlers[0])})" if handlers else ""
        kind = "stream " if name in b.known_streams else ""
        msg = f"a stream query over {kind}{name}{what} is not supported yet; {_RUNS}"
        raise _not_supported(b, msg, b.pos(tree))
    msg = (
        f"a retrieval from aggregation {name} needs 'within <time range> [per <duration>]', such as "
        "within \"2024-01-** **:**:**\" per \"days\""
    )
    raise b.error(msg, b.pos(tree))


def _refuse_handlers(b: SpecBuilder, source: ParseTree, *, is_aggregation: bool) -> None:
    """A filter ``[...]`` or a ``#window...``/``#function`` after a name: Siddhi's stream handlers."""
    handlers = _handlers(source)
    if not handlers:
        return
    handler = handlers[0]
    name = _name_and_alias(source)[0]
    if is_aggregation:
        msg = (
            f"{_handler_words(handler)} on aggregation {name} is not supported; filter a retrieval with "
            f"'on <condition>' after the aggregation (such as on symbol == \"IBM\")"
        )
        raise b.error(msg, b.pos(handler))
    msg = f"{_handler_words(handler)} on request stream {name} is not supported yet; every request event is answered"
    raise _not_supported(b, msg, b.pos(handler))


def _handler_words(handler: ParseTree) -> str:
    if handler.data == "stream_filter":
        return "a filter [...]"
    first, second = _kids(handler)[:2]
    called = f"#{first}.{second}(...)" if isinstance(second, Token) else f"#{first}(...)"
    return f"a window {called}" if str(first).lower() == "window" else f"a stream function {called}"


def _not_supported(b: SpecBuilder, message: str, pos: Pos) -> DefinitionError:
    return NotSupportedYet(message, line=pos.line, column=pos.column, snippet=snippet(b.text, pos.line, pos.column))


def _sides(b: SpecBuilder, left: ParseTree, right: ParseTree | None) -> tuple[ParseTree, ParseTree | None]:
    """Which ``source`` of a join is the aggregation: the one defined as an aggregation earlier.

    Siddhi lets the aggregation stand on either side of ``join``; without other evidence the right side is
    taken, as in every example of the seeds.
    """
    if right is None:
        return left, None
    left_name, right_name = _name_and_alias(left)[0], _name_and_alias(right)[0]
    left_agg, right_agg = left_name in b.known_aggregations, right_name in b.known_aggregations
    if left_agg and right_agg:
        msg = f"a retrieval joins a stream to an aggregation; {left_name} and {right_name} are both aggregations"
        raise b.error(msg, b.pos(left))
    if left_agg or (not right_agg and right_name in b.known_streams and left_name not in b.known_streams):
        return left, right
    return right, left
