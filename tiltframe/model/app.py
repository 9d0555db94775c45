"""The validated, declarative model of a whole app: its streams, aggregations, queries and tables.

The parts live beside it (``streams``, ``aggregations``, ``queries``, ``continuous``, ``tables``).  The
front ends (``tiltframe.lang``: SiddhiQL, streaming SQL, the Python builder) produce these frozen
dataclasses and validate them; the engine, the store and retrieval only ever read them.  Source positions
are kept for error messages but never take part in equality.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tiltframe.errors import DefinitionError, unknown
from tiltframe.model.aggregations import AggregationSpec
from tiltframe.model.continuous import ContinuousQuery
from tiltframe.model.expressions import Pos
from tiltframe.model.queries import RetrievalQuery, StreamQuery
from tiltframe.model.streams import Annotation, StreamDef, find_named
from tiltframe.model.tables import TableSpec


@dataclass(frozen=True, slots=True)
class AppSpec:
    """A whole app: definitions in text order.  Built through
    :func:`tiltframe.lang.checks.cross_references.validate_app`.

    ``continuous`` holds the streaming SQL queries (``SELECT ... FROM tumble(...) ... EMIT ...``), filled in
    by validation (see :class:`~tiltframe.model.continuous.ContinuousQuery`).
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

    def aggregations_named(self, name: str | None) -> tuple[AggregationSpec, ...]:
        """The aggregation called ``name`` (a 'did you mean' otherwise), or every aggregation for None: what
        the commands that take ``-a NAME`` work on."""
        return self.aggregations if name is None else (self.aggregation(name),)

    def table(self, name: str, pos: Pos | None = None) -> TableSpec:
        return find_named("table", name, self.tables, pos)

    def input_stream(self, name: str) -> str:
        """The stream that ``--input NAME`` feeds: a stream, or the input stream of table ``name``."""
        for t in self.tables:
            if t.name == name:
                return t.stream_name
        return name

    def continuous_query(self, name: str) -> ContinuousQuery:
        """The continuous query called ``name``: its ``@info(name=...)``, or ``continuous<i>`` for an unnamed
        one (``continuous_name``, as sinks, the run's summary and the HTTP API call it); a 'did you mean'
        otherwise."""
        names = [self.continuous_name(i) for i in range(len(self.continuous))]
        if name in names:
            return self.continuous[names.index(name)]
        raise DefinitionError(unknown("continuous query", name, names))

    def continuous_name(self, index: int) -> str:
        """A continuous query's name: its ``@info(name=...)``, else ``continuous<i>`` (0-based, text order)."""
        return self.continuous[index].name or f"continuous{index}"

    def zone_of(self, agg: AggregationSpec) -> str:
        """The time zone buckets of ``agg`` follow: its own, else the app's, else GMT (seed 001)."""
        return agg.timezone or self.timezone or "UTC"
