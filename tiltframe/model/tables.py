"""Tables, pre-aggregated or raw, and one-shot SELECT queries over them (EventQL pre-aggregation).

A table is declared with ``define table`` (docs/preaggregation.md).  With a ``preaggregate`` clause, the
rows inserted into it are pre-aggregated per interval of one granularity by ``workers`` parallel workers,
each getting rows round-robin; every interval then holds up to ``workers`` partial rows per combination of
dimension values, and a SELECT merges them.  The pre-aggregation is the rollup machinery with one level:
:meth:`TableSpec.as_aggregation` and :meth:`TableSpec.as_stream` give the :class:`AggregationSpec` and the
input :class:`StreamDef` the engine runs, so a measure is exactly an aggregate of ``define aggregation``.
What a measure gives a query (its columns and their types) is the registry's business:
:mod:`tiltframe.aggregates.measures`.

Validation lives in :mod:`tiltframe.lang.checks.table_defs` (definitions) and
:mod:`tiltframe.lang.checks.table_query` (queries); changes of a stored definition in
:mod:`tiltframe.model.table_changes`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from tiltframe.errors import DefinitionError, unknown
from tiltframe.model.aggregations import AggregateItem, AggregationSpec, KeyItem, StoreSpec
from tiltframe.model.continuous import SqlItem
from tiltframe.model.durations import Granularity, Unit
from tiltframe.model.expressions import Attr, Expr, Pos
from tiltframe.model.queries import OrderItem
from tiltframe.model.streams import Annotation, Attribute, AttrType, StreamDef, find_named

__all__ = [
    "DEFAULT_WORKERS",
    "STREAM_SUFFIX",
    "WORKER_COLUMN",
    "Measure",
    "Preaggregation",
    "TableQuery",
    "TableSpec",
]

#: Workers per table when ``@preaggregate(workers=...)`` does not say: enough to spread a hot key over
#: the two to eight cores of a small cluster, few enough to keep the partial rows per interval low.
DEFAULT_WORKERS = 4

#: The column of a partial row that says which worker wrote it: the store's shard column (a string), as
#: each worker writes its partial rows like a shard of the rollup.  Users see it only in ``partials(Table)``;
#: a table may not declare a column of that name.
WORKER_COLUMN = "SHARD_ID"

#: The input stream of table ``T`` is ``T_ROWS``: the aggregation takes the table's own name, and an app's
#: stream and aggregation names must differ.
STREAM_SUFFIX = "_ROWS"


@dataclass(frozen=True, slots=True)
class Measure:
    """``function(column[, params...]) as alias``: one aggregated column of the pre-aggregated rows.

    ``function`` is the registry's canonical name (``mean`` is stored as ``avg``), so two spellings of one
    function are one measure; ``column`` is None for ``count()``.
    """

    function: str
    column: str | None
    alias: str
    params: tuple[Any, ...] = ()
    pos: Pos | None = field(default=None, compare=False, repr=False)

    def describe(self) -> str:
        args = [self.column or "", *(_constant(p) for p in self.params)]
        return f"{self.function}({', '.join(a for a in args if a)}) as {self.alias}"


def _constant(value: Any) -> str:
    if isinstance(value, tuple):
        return f"[{', '.join(_constant(v) for v in value)}]"
    return repr(value) if isinstance(value, str) else str(value)


@dataclass(frozen=True, slots=True)
class Preaggregation:
    """The pre-aggregation config of a table (EventQL section 4.2): one granularity, the number of
    workers, the dimensions (columns queries group by) and the measures.

    ``positions`` keeps where parts were written ("granularity", "workers", "time", "dimension:<name>"),
    so validation can point at the part it refuses.
    """

    granularity: Granularity
    measures: tuple[Measure, ...]
    dimensions: tuple[str, ...] = ()
    workers: int = DEFAULT_WORKERS
    pos: Pos | None = field(default=None, compare=False, repr=False)
    positions: tuple[tuple[str, Pos], ...] = field(default=(), compare=False, repr=False)

    def pos_of(self, part: str) -> Pos | None:
        return next((p for name, p in self.positions if name == part), self.pos)

    def measure(self, alias: str) -> Measure:
        for m in self.measures:
            if m.alias == alias:
                return m
        raise DefinitionError(unknown("measure", alias, [m.alias for m in self.measures]))


@dataclass(frozen=True, slots=True)
class TableSpec:
    """``define table Name (col type, ...) [preaggregate by <time> every <duration> ...]``.

    ``time_column`` is the table's time (epoch ms) column, the key of its intervals; a raw table (no
    ``preaggregation``) has none.
    """

    name: str
    columns: tuple[Attribute, ...]
    time_column: str | None = None
    preaggregation: Preaggregation | None = None
    annotations: tuple[Annotation, ...] = field(default=(), compare=False)
    #: ``@store(...)``: where the table's rows live (the embedded store without it).
    store: StoreSpec | None = None
    pos: Pos | None = field(default=None, compare=False, repr=False)

    @property
    def stream_name(self) -> str:
        return f"{self.name}{STREAM_SUFFIX}"

    def has(self, name: str) -> bool:
        return any(c.name == name for c in self.columns)

    def column(self, name: str, pos: Pos | None = None) -> Attribute:
        return find_named(f"column of table {self.name}", name, self.columns, pos)

    def to_json(self) -> str:
        """What the store records of the definition, so that a later one can be compared with it
        (:func:`tiltframe.model.table_changes.plan_change`); the store stays where it was."""
        pre = self.preaggregation
        return json.dumps({
            "name": self.name,
            "columns": [[c.name, c.type.value] for c in self.columns],
            "time_column": self.time_column,
            "preaggregation": None if pre is None else {
                "granularity": [pre.granularity.unit.name, pre.granularity.multiple],
                "dimensions": list(pre.dimensions),
                "measures": [[m.function, m.column, m.alias, list(m.params)] for m in pre.measures],
                "workers": pre.workers,
            },
        })

    @classmethod
    def from_json(cls, text: str) -> TableSpec:
        """The definition :meth:`to_json` recorded (without source positions)."""
        d = json.loads(text)
        pre = d["preaggregation"]
        return cls(
            d["name"],
            tuple(Attribute(name, AttrType(t)) for name, t in d["columns"]),
            d["time_column"],
            None if pre is None else Preaggregation(
                Granularity(Unit[pre["granularity"][0]], pre["granularity"][1]),
                tuple(Measure(f, c, a, _tuples(p)) for f, c, a, p in pre["measures"]),
                tuple(pre["dimensions"]),
                pre["workers"],
            ),
        )

    def as_stream(self) -> StreamDef:
        """The stream of rows inserted into the table (``<Name>_ROWS``), with the table's columns."""
        return StreamDef(self.stream_name, self.columns, event_time=self.time_column, pos=self.pos)

    def as_aggregation(self) -> AggregationSpec:
        """The rollup with one level that pre-aggregates the table: named like the table, reading
        :meth:`as_stream`, grouped by the dimensions, one aggregate per measure."""
        pre = self.preaggregation
        if pre is None:
            raise DefinitionError.at(f"table {self.name} is not pre-aggregated", self.pos)
        keys = tuple(KeyItem(d, pos=pre.pos_of(f"dimension:{d}")) for d in pre.dimensions)
        aggregates = tuple(
            AggregateItem(
                m.function, Attr(m.column, pos=m.pos) if m.column is not None else None, m.alias,
                pos=m.pos, params=m.params,
            )
            for m in pre.measures
        )
        return AggregationSpec(
            name=self.name,
            source=self.stream_name,
            select=(*keys, *aggregates),
            granularities=(pre.granularity,),
            group_by=pre.dimensions,
            time_attribute=self.time_column,
            workers=pre.workers,
            store=self.store,
            pos=self.pos,
        )


def _tuples(value: Any) -> Any:
    """JSON's lists back to the tuples measure parameters are written as."""
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


@dataclass(frozen=True, slots=True)
class TableQuery:
    """``SELECT <items> FROM <Table | partials(Table)> [WHERE] [GROUP BY] [HAVING] [ORDER BY] [LIMIT]``.

    As parsed: ``select`` (empty for ``SELECT *``), ``partials`` (``FROM partials(T)``), the clauses as
    written.  Validation (:func:`tiltframe.lang.checks.table_query.validate_table_query`) fills in the
    rest, so the engine never re-reads the text:

    - ``merged``: the partial rows are merged by ``keys`` (a pre-aggregated table read without
      ``partials``); otherwise the stored rows are read as they are;
    - ``keys``: the columns rows are merged by: the time column (interval start) and every dimension when
      there is no GROUP BY (the default aggregation clause), else the GROUP BY columns;
    - ``measures``: the aliases of the measures the query reads, in table order;
    - ``outputs``: ``(name, expression)`` in select order, over the keys and the measures' output columns
      (and, for partial rows, the time column, the dimensions and ``SHARD_ID``); qualifiers dropped;
    - ``output_types``: the type of each output;
    - ``where`` (rows before merging), ``having`` (merged rows, output names replaced by their expressions)
      and ``order_by`` (over output names).  Without ORDER BY, rows come ordered by the keys;
    - ``aggregates``: for a raw table grouped or aggregated, the aggregate calls computed from its rows
      (``merged`` is then true and ``keys`` are the GROUP BY columns).
    """

    table: str
    select: tuple[SqlItem, ...] = ()
    partials: bool = False
    where: Expr | None = None
    group_by: tuple[Expr, ...] = ()
    having: Expr | None = None
    order_by: tuple[OrderItem, ...] = ()
    limit: int | None = None
    text: str = field(default="", compare=False, repr=False)
    pos: Pos | None = field(default=None, compare=False, repr=False)
    #: Where the table name was written.
    table_pos: Pos | None = field(default=None, compare=False, repr=False)
    merged: bool = False
    keys: tuple[str, ...] = ()
    measures: tuple[str, ...] = ()
    outputs: tuple[tuple[str, Expr], ...] = ()
    output_types: tuple[tuple[str, AttrType], ...] = ()
    #: A raw table's query with GROUP BY or aggregates: each distinct aggregate call once (``_agg<i>``),
    #: computed from the stored rows when the query runs; ``outputs`` read them by alias.
    aggregates: tuple[AggregateItem, ...] = ()

    @property
    def output_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.outputs)

