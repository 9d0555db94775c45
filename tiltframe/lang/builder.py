"""Build an app in Python: the same validated :class:`~tiltframe.model.app.AppSpec` the SiddhiQL text gives.

Every piece written as text can be written here, and means the same: expression strings are read by the
project's grammar (:func:`tiltframe.lang.parse_expression`), select items are sorted into keys, aggregates
and latest-value expressions by the rules of the parser, comma duration lists are sorted finest first, and
:func:`app` ends with :func:`~tiltframe.lang.checks.cross_references.validate_app`, so both routes report the
same errors.
Builder errors are :class:`~tiltframe.errors.DefinitionError` (without a line and column: there is no text).

Example:
    >>> from tiltframe.lang import builder as b
    >>> trades = b.app(
    ...     b.stream("TradeStream", symbol="string", price="double", quantity="long", timestamp="long"),
    ...     b.aggregation(
    ...         "TradeAggregation",
    ...         source="TradeStream",
    ...         select=["symbol", b.avg("price").as_("avgPrice"), b.sum("quantity").as_("total")],
    ...         group_by=["symbol"],
    ...         by="timestamp",
    ...         every="sec ... year",
    ...     ),
    ...     b.query("from TradeAggregation within '2024-01-** **:**:**' per 'days' select symbol, total"),
    ...     name="Trades",
    ... )
    >>> from tiltframe.lang import parse_app
    >>> trades == parse_app('''@app:name('Trades')
    ... define stream TradeStream (symbol string, price double, quantity long, timestamp long);
    ... define aggregation TradeAggregation from TradeStream
    ... select symbol, avg(price) as avgPrice, sum(quantity) as total
    ... group by symbol aggregate by timestamp every sec ... year;
    ... from TradeAggregation within '2024-01-** **:**:**' per 'days' select symbol, total''')
    True

Aggregate helpers exist for every function of :mod:`tiltframe.aggregates.registry`: :func:`agg` takes the
function's name (``b.agg("avg", "price")``), and ``b.<name>`` is looked up in the registry on use, so a
function registered later is available as ``b.<its name>(...)`` without touching this module.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from tiltframe.aggregates import registry
from tiltframe.errors import DefinitionError, unknown
from tiltframe.lang.checks.cross_references import validate_app
from tiltframe.lang.siddhiql.parser import parse_expression, parse_query
from tiltframe.model.aggregations import (
    AggregateItem,
    AggregationSpec,
    ExpressionItem,
    KeyItem,
    PurgeSpec,
    SelectItem,
    StoreSpec,
)
from tiltframe.model.app import AppSpec
from tiltframe.model.durations import Granularity, Unit, parse_length, unit_named, unit_range
from tiltframe.model.expressions import Attr, Call, Expr, ListLiteral, Literal, calls_of, constant_value
from tiltframe.model.queries import RetrievalQuery
from tiltframe.model.streams import Attribute, AttrType, StreamDef

__all__ = [
    "Item",
    "QueryText",
    "agg",
    "aggregation",
    "app",
    "avg",
    "count",
    "expr",
    "max",
    "mean",
    "min",
    "purge",
    "query",
    "store",
    "stream",
    "sum",
]

#: What a select item, an aggregate argument or ``b.expr`` accepts: expression text or a built tree.
ExprLike = str | Expr
Pairs = Mapping[str, object] | Iterable[tuple[str, object]]


# --- select items ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Item:
    """A select item before it is sorted into a key, an aggregate or an expression: ``expr [as alias]``.

    Sorting needs the group-by keys, which :func:`aggregation` only knows, so helpers return this.
    ``written`` is the item as the user would write it in text, for error messages.
    """

    expr: Expr
    alias: str | None = None
    written: str = ""

    def as_(self, alias: str) -> Item:
        """The same item named ``alias`` (``as`` is a Python keyword)."""
        return replace(self, alias=alias)


def _parse(value: ExprLike) -> tuple[Expr, str]:
    if isinstance(value, str):
        return parse_expression(value), " ".join(value.split())
    return value, str(value)


def expr(value: ExprLike) -> Item:
    """A select item from expression text (``"price * quantity"``) or an expression tree.

    A plain group-by attribute becomes a key; anything else is stored as the value of the latest event.
    """
    parsed, written = _parse(value)
    return Item(parsed, written=written)


def agg(function: str, arg: ExprLike | None = None, *params: Any) -> Item:
    """``function(arg, *params)``: an aggregate of the registry by name or alias (``"avg"``, ``"mean"``,
    ...); ``params`` are its constants (``b.kll("latency", [0.5, 0.99])``).

    Raises:
        DefinitionError: the function is unknown (with a 'did you mean').
    """
    registry.get(function)  # fail here, where the name was written, rather than when the app is built
    if arg is None:
        return Item(Call(function), written=f"{function}()")
    parsed, written = _parse(arg)
    constants = tuple(_constant(p) for p in params)
    text = ", ".join([written, *map(str, constants)])
    return Item(Call(function, (parsed, *constants)), written=f"{function}({text})")


def _constant(value: Any) -> Expr:
    """A parameter as the parser would read it: numbers, strings, booleans and lists of them."""
    if isinstance(value, list | tuple):
        return ListLiteral(tuple(_constant(v) for v in value))
    if isinstance(value, bool):
        return Literal(value, "bool")
    if isinstance(value, int):
        return Literal(value, "int" if -(2**31) <= value < 2**31 else "long")
    if isinstance(value, float):
        return Literal(value, "double")
    if isinstance(value, str):
        return Literal(value, "string")
    raise DefinitionError(f"cannot use {value!r} as a parameter; use a number, a string or a list of them")


def sum(arg: ExprLike) -> Item:  # shadows the builtin on purpose: named as in SiddhiQL
    """``sum(arg)``."""
    return agg("sum", arg)


def count(arg: ExprLike | None = None) -> Item:
    """``count()``: the number of events."""
    return agg("count", arg)


def avg(arg: ExprLike) -> Item:
    """``avg(arg)``, stored as a sum and a count."""
    return agg("avg", arg)


def mean(arg: ExprLike) -> Item:
    """``mean(arg)``, an alias of :func:`avg`."""
    return agg("mean", arg)


def min(arg: ExprLike) -> Item:
    """``min(arg)``."""
    return agg("min", arg)


def max(arg: ExprLike) -> Item:
    """``max(arg)``."""
    return agg("max", arg)


def __getattr__(name: str) -> Callable[..., Item]:
    """``b.<function>(arg)`` for every registered aggregate without a shortcut above (``b.stdev``)."""
    if not name.startswith("_") and registry.is_aggregate(name):
        return functools.partial(agg, name)
    msg = f"module {__name__!r} has no attribute {name!r}"
    raise AttributeError(msg)


def _select_item(item: str | Expr | Item, keys: Sequence[str], where: str) -> SelectItem:
    """Sort one item as the parser sorts ``select`` items (seed 000), with the same refusals."""
    if not isinstance(item, Item):
        item = expr(item)
    e, alias, written = item.expr, item.alias, item.written or str(item.expr)
    if isinstance(e, Attr) and e.qualifier is None and e.name in keys:
        return KeyItem(e.name, alias)
    unnamed = f"select item '{written}' of {where} needs a name: add .as_('<name>') (in text '{written} as <name>')"
    if isinstance(e, Call) and registry.is_aggregate(e.name):
        function = registry.get(e.name)
        nested = [c for c in calls_of(e)[1:] if registry.is_aggregate(c.name)]
        if nested:
            raise DefinitionError(f"aggregate {nested[0]} cannot be used inside another aggregate in '{written}'")
        if function.takes_arg and not e.args:
            raise DefinitionError(f"{function.name}() needs an argument: write b.{function.name}('<attribute>')")
        if alias is None:
            raise DefinitionError(unnamed)
        if function.settings is None and len(e.args) > 1:
            raise DefinitionError(f"{function.name}() takes one argument, got {len(e.args)}")
        params = tuple(constant_value(a) for a in e.args[1:])
        function.resolve(params, where=f"'{written}'")
        return AggregateItem(function.name, e.args[0] if e.args else None, alias, params=params)
    aggregates = [c for c in calls_of(e) if registry.is_aggregate(c.name)]
    if aggregates:
        msg = (
            f"select item '{written}' combines aggregates in an expression; select them separately "
            f"(for example b.{aggregates[0].name}(...).as_('<name>')) and combine them when retrieving"
        )
        raise DefinitionError(msg)
    for call in calls_of(e):
        raise DefinitionError(unknown("function", call.name, registry.names()))
    if isinstance(e, Attr):
        return ExpressionItem(e, alias or e.name)
    if alias is None:
        raise DefinitionError(unnamed)
    return ExpressionItem(e, alias)


# --- durations ------------------------------------------------------------------------------------------


def _duration(word: str) -> Granularity:
    parts = word.split()
    if len(parts) == 2 and parts[0].isdigit():
        return Granularity(unit_named(parts[1]), int(parts[0]))
    if len(parts) == 1:
        return Granularity(unit_named(parts[0]))
    raise DefinitionError(f"cannot read duration '{word}'; write a unit such as 'min' or a multiple such as '10 sec'")


def _granularities(every: str | Sequence[str | Unit | Granularity]) -> tuple[Granularity, ...]:
    """``"sec ... year"`` (a range), ``"min, day"`` or ``["min", "day"]`` (a list, sorted finest first)."""
    if isinstance(every, str) and "..." in every:
        words = [" ".join(w.split()) for w in every.split("...")]
        if len(words) != 2 or not all(words):
            raise DefinitionError(f"a duration range names two durations, such as 'sec ... year'; got '{every}'")
        first_word, last_word = words
        first, last = _duration(first_word), _duration(last_word)
        for g, w in ((first, first_word), (last, last_word)):
            if g.multiple != 1:
                raise DefinitionError(f"a duration range takes plain durations (sec ... year), got '{w}'")
        if first.unit.rank > last.unit.rank:
            msg = (
                f"reversed duration range '{first_word} ... {last_word}' goes from coarser to finer; "
                f"write '{last_word} ... {first_word}'"
            )
            raise DefinitionError(msg)
        if first == last:
            raise DefinitionError(
                f"range '{first_word} ... {last_word}' names one duration twice; write '{first_word}'"
            )
        return unit_range(first.unit, last.unit)
    entries = every.split(",") if isinstance(every, str) else list(every)
    seen: dict[Granularity, str] = {}
    for entry in entries:
        if isinstance(entry, Granularity):
            g, word = entry, str(entry)
        elif isinstance(entry, Unit):
            g, word = Granularity(entry), str(Granularity(entry))
        else:
            word = " ".join(str(entry).split())
            g = _duration(word)
        if g in seen:
            also = "" if seen[g] == word else f" (as '{seen[g]}' and '{word}')"
            raise DefinitionError(f"duration '{word}' is listed twice{also}")
        seen[g] = word
    return tuple(sorted(seen, key=lambda g: g.sort_key))


# --- definitions ----------------------------------------------------------------------------------------


def _pairs(values: Pairs | None) -> tuple[tuple[str, str], ...]:
    """Annotation elements as text gives them: string keys and string values, in the order written."""
    if values is None:
        return ()
    items = values.items() if isinstance(values, Mapping) else values
    return tuple((str(k), str(v)) for k, v in items)


def stream(name: str, attributes: Iterable[tuple[str, str | AttrType]] = (), /, **types: str | AttrType) -> StreamDef:
    """``define stream name (attr type, ...)``; attributes as keywords, or as pairs for any name.

    Raises:
        DefinitionError: an unknown type (with a 'did you mean').
    """
    attrs = [*attributes, *types.items()]
    return StreamDef(name, tuple(Attribute(n, t if isinstance(t, AttrType) else AttrType.named(t)) for n, t in attrs))


def store(
    url: str | None = None,
    *,
    type: str = "rdbms",  # the annotation's key
    username: str | None = None,
    password: str | None = None,
    options: Pairs | None = None,
) -> StoreSpec:
    """``@store(type=..., jdbc.url=..., username=..., password=..., <options>)``; keys with dots go in ``options``."""
    return StoreSpec(type=type, url=url, username=username, password=password, options=_pairs(options))


def purge(enable: bool = True, *, interval: str | None = None, retention: Pairs | None = None) -> PurgeSpec:
    """``@purge(enable=..., interval=..., @retentionPeriod(<unit>=<period>, ...))``."""
    return PurgeSpec(enable=enable, interval=interval, retention=_pairs(retention))


def _flag(value: object, what: str) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    raise DefinitionError(f"{what} takes True or False, got {value!r}")


def aggregation(
    name: str,
    *,
    source: str,
    select: Sequence[str | Expr | Item] | str | Item,
    every: str | Sequence[str | Unit | Granularity],
    group_by: Sequence[str] | str = (),
    by: str | None = None,
    timezone: str | None = None,
    store: StoreSpec | None = None,  # shadows b.store() inside this function only
    buffer_size: int | None = None,
    ignore_events_older_than_buffer: bool | None = None,
    allowed_lateness: str | int | None = None,
    purge: PurgeSpec | bool | None = None,
    retention: Pairs | None = None,
    partition_by_id: bool | None = None,
) -> AggregationSpec:
    """``define aggregation name from source select ... group by ... aggregate [by by] every ...``.

    ``every`` is a range (``"sec ... year"``) or a list (``"min, day"``, ``["min", "day"]``); ``by`` names
    the event-time attribute (arrival time when omitted).  The remaining keywords are the annotations
    (``@timezone``, ``@store``, ``@BufferSize``, ...): the builder accepts every one the text accepts,
    and :func:`~tiltframe.lang.checks.cross_references.check_runnable` refuses those whose behaviour is not built yet.
    References to the source stream are checked by :func:`app`, which knows the streams.
    """
    keys = (group_by,) if isinstance(group_by, str) else tuple(group_by)
    for i, key in enumerate(keys):
        if key in keys[:i]:
            raise DefinitionError(f"attribute '{key}' is listed twice in group by")
    items = [select] if isinstance(select, str | Item) else list(select)
    where = f"aggregation {name}"
    if buffer_size is not None and (isinstance(buffer_size, bool) or not isinstance(buffer_size, int)):
        raise DefinitionError(f"buffer_size (@BufferSize) takes a whole number of buckets, got {buffer_size!r}")
    return AggregationSpec(
        name=name,
        source=source,
        select=tuple(_select_item(item, keys, where) for item in items),
        granularities=_granularities(every),
        group_by=keys,
        time_attribute=by,
        timezone=timezone,
        store=store,
        buffer_size=buffer_size,
        ignore_events_older_than_buffer=_flag(ignore_events_older_than_buffer, "ignore_events_older_than_buffer"),
        allowed_lateness_ms=_lateness(allowed_lateness),
        purge=PurgeSpec(enable=purge) if isinstance(purge, bool) else purge,
        retention=_pairs(retention) if retention is not None else None,
        partition_by_id=_flag(partition_by_id, "partition_by_id"),
    )


def _lateness(value: str | int | None) -> int | None:
    """``'10 min'`` (as ``@allowedLateness`` takes it) or whole milliseconds."""
    if value is None:
        return None
    if isinstance(value, str):
        return parse_length(value, "allowed_lateness (@allowedLateness)")
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise DefinitionError(f"allowed_lateness takes a length such as '10 min' or whole ms, got {value!r}")
    return value


@dataclass(frozen=True, slots=True)
class QueryText:
    """A retrieval query as text; read by :func:`app`, which knows which names are aggregations."""

    text: str


def query(text: str) -> QueryText:
    """A retrieval query in SiddhiQL (``from Agg within ... per ... select ...``); syntax is checked now.

    Raises:
        DefinitionError: a syntax error, with line, column and a caret snippet into ``text``.
    """
    parse_query(text)
    return QueryText(text)


def app(
    *definitions: StreamDef | AggregationSpec | RetrievalQuery | QueryText,
    name: str | None = None,
    timezone: str | None = None,
) -> AppSpec:
    """The validated app: definitions in any order (as in text), ``@app:name`` and ``@app:timezone``.

    Raises:
        DefinitionError: the first problem :func:`~tiltframe.lang.checks.cross_references.validate_app` finds.
    """
    streams = tuple(d for d in definitions if isinstance(d, StreamDef))
    aggregations = tuple(d for d in definitions if isinstance(d, AggregationSpec))
    names = [a.name for a in aggregations]
    queries: list[RetrievalQuery] = []
    for d in definitions:
        if isinstance(d, QueryText):
            queries.append(parse_query(d.text, aggregations=names))
        elif isinstance(d, RetrievalQuery):
            queries.append(d)
        elif not isinstance(d, StreamDef | AggregationSpec):
            msg = f"app() takes b.stream(), b.aggregation() and b.query() definitions, got {type(d).__name__}"
            raise DefinitionError(msg)
    return validate_app(AppSpec(streams, aggregations, tuple(queries), name=name, timezone=timezone))
