"""The validated, declarative model of an app: streams, aggregations and retrieval queries.

The parser (``tiltframe.lang``) and the Python builder (``tiltframe.spec.builder``) both produce these
frozen dataclasses; the engine, the store and retrieval only ever read them.  Source positions are kept for
error messages but never take part in equality.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from tiltframe.errors import DefinitionError, unknown
from tiltframe.spec.durations import Granularity
from tiltframe.spec.expressions import Expr, Pos

if TYPE_CHECKING:  # continuous.py builds on this module's AggregateItem and Annotation
    from tiltframe.spec.continuous import ContinuousQuery
    from tiltframe.spec.tables import TableSpec


class _Named(Protocol):
    @property
    def name(self) -> str: ...


_N = TypeVar("_N", bound=_Named)


def find_named(kind: str, name: str, items: Iterable[_N], pos: Pos | None = None) -> _N:
    """The item called ``name``; else an error at ``pos`` with the closest name and every valid one."""
    candidates = tuple(items)
    for item in candidates:
        if item.name == name:
            return item
    raise DefinitionError.at(unknown(kind, name, [c.name for c in candidates]), pos)


class AttrType(enum.Enum):
    """Attribute types of SiddhiQL stream definitions."""

    STRING = "string"
    INT = "int"
    LONG = "long"
    FLOAT = "float"
    DOUBLE = "double"
    BOOL = "bool"
    #: Sketch states only; streams cannot declare it.
    BINARY = "binary"
    #: A list of values (``group_array``); streams cannot declare it.
    ARRAY = "array"

    @property
    def is_numeric(self) -> bool:
        return self in (AttrType.INT, AttrType.LONG, AttrType.FLOAT, AttrType.DOUBLE)

    @property
    def is_integral(self) -> bool:
        return self in (AttrType.INT, AttrType.LONG)

    @classmethod
    def named(cls, word: str, pos: Pos | None = None) -> AttrType:
        aliases = {"boolean": "bool", "integer": "int"}
        key = aliases.get(word.lower(), word.lower())
        declarable = [m for m in cls if m not in (cls.BINARY, cls.ARRAY)]
        for member in declarable:
            if member.value == key:
                return member
        raise DefinitionError.at(unknown("attribute type", word, [m.value for m in declarable]), pos)


@dataclass(frozen=True, slots=True)
class Annotation:
    """An annotation as written: ``@name(key='value', 'positional', ...)``.

    Kept on definitions for ``explain`` and for annotations tiltframe does not interpret itself.
    """

    name: str
    elements: tuple[tuple[str | None, str], ...] = ()
    pos: Pos | None = field(default=None, compare=False, repr=False)

    def get(self, key: str | None, default: str | None = None) -> str | None:
        for k, v in self.elements:
            if (k is None and key is None) or (k is not None and key is not None and k.lower() == key.lower()):
                return v
        return default


@dataclass(frozen=True, slots=True)
class Attribute:
    name: str
    type: AttrType
    pos: Pos | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class StreamDef:
    """``define stream Name (attr type, ...)``; ``event_time`` from ``@eventTime('ts')`` is the attribute
    continuous queries window by when their window call names none."""

    name: str
    attributes: tuple[Attribute, ...]
    annotations: tuple[Annotation, ...] = field(default=(), compare=False)
    event_time: str | None = None
    pos: Pos | None = field(default=None, compare=False, repr=False)

    def attribute(self, name: str, pos: Pos | None = None) -> Attribute:
        return find_named(f"attribute of stream {self.name}", name, self.attributes, pos)

    def has(self, name: str) -> bool:
        return any(a.name == name for a in self.attributes)


# --- select items of an aggregation -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class KeyItem:
    """A group-by attribute in the select list; stored as a key column."""

    name: str
    alias: str | None = None
    pos: Pos | None = field(default=None, compare=False, repr=False)

    @property
    def output_name(self) -> str:
        return self.alias or self.name


@dataclass(frozen=True, slots=True)
class AggregateItem:
    """``func(arg[, constants...]) as alias``: stored as the function's partial state, finalized on
    retrieval.  ``params`` are the constants after the argument as plain values, lists as tuples
    (``kll(latency, [0.5, 0.99])`` has ``((0.5, 0.99),)``)."""

    function: str
    arg: Expr | None
    alias: str
    pos: Pos | None = field(default=None, compare=False, repr=False)
    params: tuple[Any, ...] = ()

    @property
    def output_name(self) -> str:
        return self.alias


@dataclass(frozen=True, slots=True)
class ExpressionItem:
    """A non-aggregate expression: its stored value is that of the latest event in the bucket."""

    expr: Expr
    alias: str
    pos: Pos | None = field(default=None, compare=False, repr=False)

    @property
    def output_name(self) -> str:
        return self.alias


SelectItem = KeyItem | AggregateItem | ExpressionItem


@dataclass(frozen=True, slots=True)
class StoreSpec:
    """``@store(type='rdbms', jdbc.url=..., username=..., password=...)``; extra elements in ``options``."""

    type: str
    url: str | None = None
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    options: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class PurgeSpec:
    """``@purge(enable=..., interval=..., @retentionPeriod(...))``."""

    enable: bool = True
    interval: str | None = None
    retention: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class AggregationSpec:
    """``define aggregation Name from Stream select ... group by ... aggregate [by attr] every ...``."""

    name: str
    source: str
    select: tuple[SelectItem, ...]
    granularities: tuple[Granularity, ...]
    group_by: tuple[str, ...] = ()
    time_attribute: str | None = None
    timezone: str | None = None
    store: StoreSpec | None = None
    buffer_size: int | None = None
    ignore_events_older_than_buffer: bool | None = None
    allowed_lateness_ms: int | None = None
    purge: PurgeSpec | None = None
    retention: tuple[tuple[str, str], ...] | None = None
    partition_by_id: bool | None = None
    #: A pre-aggregated table's rollup (EventQL): rows are spread round-robin over this many workers,
    #: each storing its own partial rows under its ``SHARD_ID``.  None for a ``define aggregation``.
    workers: int | None = None
    annotations: tuple[Annotation, ...] = field(default=(), compare=False)
    pos: Pos | None = field(default=None, compare=False, repr=False)
    #: Where each ``group_by`` attribute was written (empty for a spec built in Python).
    group_by_pos: tuple[Pos, ...] = field(default=(), compare=False, repr=False)

    def key_pos(self, key: str) -> Pos | None:
        """Where group-by attribute ``key`` was written, else the definition's position."""
        for name, pos in zip(self.group_by, self.group_by_pos, strict=False):
            if name == key:
                return pos
        return self.pos

    @property
    def aggregates(self) -> tuple[AggregateItem, ...]:
        return tuple(i for i in self.select if isinstance(i, AggregateItem))

    @property
    def expressions(self) -> tuple[ExpressionItem, ...]:
        return tuple(i for i in self.select if isinstance(i, ExpressionItem))

    @property
    def finest(self) -> Granularity:
        return self.granularities[0]

    def granularity(self, g: Granularity) -> Granularity:
        """``g`` if this aggregation keeps it, else a clear error naming the kept durations."""
        if g in self.granularities:
            return g
        kept = ", ".join(str(x) for x in self.granularities)
        msg = f"aggregation {self.name} is not aggregated per {g} (it keeps: {kept})"
        raise DefinitionError(msg)


# --- retrieval ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OutputItem:
    """One ``select`` item of a retrieval query."""

    expr: Expr
    alias: str | None = None
    pos: Pos | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class OrderItem:
    expr: Expr
    ascending: bool = True


@dataclass(frozen=True, slots=True)
class RetrievalQuery:
    """``from [Req as b join] Agg as a [on ...] within ... per ... [select ...] [group by ...] [having ...]
    [order by ...] [limit n] [offset n] [insert into]``, Siddhi's on-demand query and aggregation join.

    ``within`` holds one expression (a pattern such as ``"2018-01-** **:**:**"``) or two (start, end).
    ``select`` is ``None`` for ``select *`` or no select clause: every attribute, as Siddhi returns them.
    ``group_by``, ``having`` and the aggregate calls of ``select`` (``sum(total)``) aggregate the retrieved
    rows again, per request (``tiltframe.retrieval.grouping``).  After validation
    (``spec.validate_retrieval``) every attribute names its side: request attributes carry the request
    stream's alias (or name), aggregation attributes the aggregation's; an unqualified name in ``having`` or
    ``order by`` is a selected column.
    """

    aggregation: str
    within: tuple[Expr, ...]
    per: Expr
    aggregation_alias: str | None = None
    request_stream: str | None = None
    request_alias: str | None = None
    on: Expr | None = None
    select: tuple[OutputItem, ...] | None = None
    order_by: tuple[OrderItem, ...] = ()
    limit: int | None = None
    group_by: tuple[Expr, ...] = ()
    having: Expr | None = None
    offset: int | None = None
    insert_into: str | None = None
    output_events: str | None = None
    name: str | None = None
    annotations: tuple[Annotation, ...] = field(default=(), compare=False)
    pos: Pos | None = field(default=None, compare=False, repr=False)

    @property
    def request_ref(self) -> str | None:
        """How a request attribute is qualified once resolved: the request's alias, else its stream's name."""
        return self.request_alias or self.request_stream

    @property
    def aggregation_ref(self) -> str:
        """How an aggregation attribute is qualified once resolved: the alias, else the aggregation's name."""
        return self.aggregation_alias or self.aggregation


@dataclass(frozen=True, slots=True)
class StreamQuery:
    """``from S[filter] select ... insert into T``, Siddhi's plain stream query: each event of ``source`` the
    filter passes becomes one event of ``target``, its attributes computed by ``select`` (no window, no
    state).  ``select`` is None for ``select *`` or no select clause.  Validation
    (``spec.stream_queries``) fills ``outputs``: each attribute of ``target`` with its expression over
    ``source``, and adds ``target`` to the app's streams unless it is defined."""

    source: str
    target: str
    where: Expr | None = None
    select: tuple[OutputItem, ...] | None = None
    name: str | None = None
    outputs: tuple[tuple[str, Expr], ...] = ()
    annotations: tuple[Annotation, ...] = field(default=(), compare=False)
    pos: Pos | None = field(default=None, compare=False, repr=False)
    target_pos: Pos | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class AppSpec:
    """A whole app: definitions in text order.  Built through :func:`tiltframe.spec.validate.validate_app`.

    ``continuous`` holds the streaming SQL queries (``SELECT ... FROM tumble(...) ... EMIT ...``), filled in
    by validation (see :class:`~tiltframe.spec.continuous.ContinuousQuery`).
    """

    streams: tuple[StreamDef, ...] = ()
    aggregations: tuple[AggregationSpec, ...] = ()
    queries: tuple[RetrievalQuery, ...] = ()
    name: str | None = None
    timezone: str | None = None
    annotations: tuple[Annotation, ...] = field(default=(), compare=False)
    continuous: tuple[ContinuousQuery, ...] = ()
    #: ``define table`` statements; each pre-aggregated one also adds its input stream ``<Name>_ROWS`` to
    #: ``streams`` and its rollup ``<Name>`` to ``aggregations`` (docs/preaggregation.md).
    tables: tuple[TableSpec, ...] = ()
    #: Plain stream queries (``from S[filter] select ... insert into T``), in text order.
    stream_queries: tuple[StreamQuery, ...] = ()

    def stream(self, name: str, pos: Pos | None = None) -> StreamDef:
        return find_named("stream", name, self.streams, pos)

    def writer_of(self, stream: str) -> StreamQuery | None:
        """The plain stream query whose events ``stream`` holds (None: events come from an input)."""
        return next((q for q in self.stream_queries if q.target == stream), None)

    def root_stream(self, stream: str) -> str:
        """The input stream whose events ``stream``'s come from, through plain stream queries."""
        writer = self.writer_of(stream)
        return stream if writer is None else self.root_stream(writer.source)

    def chain(self, stream: str) -> list[StreamQuery]:
        """The stream queries from ``stream``'s input stream to ``stream``, in order (none for an input)."""
        found: list[StreamQuery] = []
        writer = self.writer_of(stream)
        while writer is not None:
            found.insert(0, writer)
            writer = self.writer_of(writer.source)
        return found

    def chain_key(self, stream: str) -> tuple[object, ...]:
        """What makes ``stream``'s events from its input's: each query's source, filter and outputs.  Part of
        what a rollup or a checkpoint of ``stream`` is, so a changed filter is never taken for the old one."""
        return tuple((q.source, q.target, str(q.where), tuple((n, str(e)) for n, e in q.outputs))
                     for q in self.chain(stream))

    def aggregation(self, name: str, pos: Pos | None = None) -> AggregationSpec:
        return find_named("aggregation", name, self.aggregations, pos)

    def table(self, name: str, pos: Pos | None = None) -> TableSpec:
        return find_named("table", name, self.tables, pos)

    def input_stream(self, name: str) -> str:
        """The stream that ``--input NAME`` feeds: a stream, or the input stream of table ``name``."""
        for t in self.tables:
            if t.name == name:
                return t.stream_name
        return name

    def continuous_query(self, name: str) -> ContinuousQuery:
        """The continuous query named ``name`` (by ``@info(name=...)``), with a 'did you mean' otherwise."""
        for q in self.continuous:
            if q.name == name:
                return q
        raise DefinitionError(unknown("continuous query", name, [q.name for q in self.continuous if q.name]))

    def continuous_name(self, index: int) -> str:
        """A continuous query's name: its ``@info(name=...)``, else ``continuous<i>`` (0-based, text order)."""
        return self.continuous[index].name or f"continuous{index}"

    def zone_of(self, agg: AggregationSpec) -> str:
        """The time zone buckets of ``agg`` follow: its own, else the app's, else GMT (seed 001)."""
        return agg.timezone or self.timezone or "UTC"
