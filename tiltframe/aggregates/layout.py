"""The shape of the rollup tables of one aggregation: the contract between engine, store and retrieval.

Every granularity has one table ``<Aggregation>_<DURATION>`` with the same columns:

========================  =================================================================
``AGG_TIMESTAMP``         bucket start, epoch milliseconds (primary key, with the keys)
group-by attributes       one column each, in ``group by`` order (primary key)
``AGG_EVENT_TIMESTAMP``   greatest event time aggregated into the bucket, epoch ms
``AGG_ARRIVAL_BATCH``     micro-batch of the latest event (only with non-aggregate items)
``AGG_ARRIVAL_SEQ``       arrival position of that event in its batch (idem)
``AGG_COUNT``             number of events aggregated into the bucket
``<alias>_<STATE>``       partial states of aggregates, e.g. ``avgPrice_SUM``, ``avgPrice_COUNT``
``<alias>``               value of a non-aggregate item for the latest event of the bucket
``SHARD_ID``              the writing deployment (primary key), only with ``@PartitionById``
========================  =================================================================

With shards, each deployment writes its own partial row of a bucket and key; readers see the columns
without ``SHARD_ID`` and merge the rows that repeat a bucket and key (``retrieval.merge``), so a query
never needs to know whether the tables are partitioned.

The latest event of a bucket is the one with the greatest ``(event time, batch, seq)``: greatest event
time, and on a tie the later arrival.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from tiltframe.aggregates.registry import AggregateFunction, Ops, State, get
from tiltframe.aggregates.states import Merge
from tiltframe.functions import scalars
from tiltframe.model.aggregations import AggregateItem, AggregationSpec
from tiltframe.model.app import AppSpec
from tiltframe.model.durations import Granularity
from tiltframe.model.expressions import Attr, Binary, Call, Expr, Literal, Unary
from tiltframe.model.streams import AttrType, StreamDef
from tiltframe.model.tables import TableSpec

AGG_TIMESTAMP = "AGG_TIMESTAMP"
AGG_EVENT_TIMESTAMP = "AGG_EVENT_TIMESTAMP"
AGG_ARRIVAL_BATCH = "AGG_ARRIVAL_BATCH"
AGG_ARRIVAL_SEQ = "AGG_ARRIVAL_SEQ"
AGG_COUNT = "AGG_COUNT"
SHARD_ID = "SHARD_ID"
#: The event count every table keeps: ``AGG_COUNT``, built and merged like ``count()``.
EVENT_COUNT = AggregateItem("count", None, "AGG")
RESERVED_PREFIX = "AGG_"
#: The columns tiltframe adds to every table (``SHARD_ID`` only when partitioned, but an app may move to a
#: deployment that partitions by default, so no stream or item may take any of these names).
FIXED_COLUMNS = (AGG_TIMESTAMP, AGG_EVENT_TIMESTAMP, AGG_ARRIVAL_BATCH, AGG_ARRIVAL_SEQ, AGG_COUNT, SHARD_ID)

# --- names in the store, checked by ``lang.checks.names`` before anything is created ------------------

#: The store's bookkeeping tables (``store.schema`` defines them; a test keeps the two lists equal).
BOOKKEEPING_TABLES = ("TILTFRAME_AGGREGATIONS", "TILTFRAME_BATCHES", "TILTFRAME_REJECTED", "TILTFRAME_PURGES",
                      "TILTFRAME_TABLES", "TILTFRAME_DEFINITIONS", "TILTFRAME_SKIPPED_VALUES")
#: Suffix of the view of final values beside each table (``TradeAggregation_DAYS_FINAL``, ``store.views``).
VIEW_SUFFIX = "_FINAL"
#: Suffix of the name a pre-aggregated table's rows wait under while it is rebuilt
#: (``store.lifecycle.table_migrations``; SQLite's ``__before_shards`` is left out, as SQLite takes names of
#: any length).
ASIDE_SUFFIX = "__old"
#: The longest identifier every supported store takes: PostgreSQL's 63 bytes (MySQL and MariaDB take 64
#: characters, SQLite has no practical limit).  Apps move between stores, so all are held to the least.
MAX_IDENTIFIER_BYTES = 63


def table_name(aggregation: str, g: Granularity) -> str:
    """``<Aggregation>_<DURATION>``, as Siddhi names its tables (``TradeAggregation_SECONDS``,
    ``T_10_SECONDS`` for ``every 10 sec``)."""
    return f"{aggregation}_{g.table_suffix}"


@dataclass(frozen=True, slots=True)
class KeyColumn:
    name: str
    type: AttrType


@dataclass(frozen=True, slots=True)
class StateColumn:
    """One partial-state column of one aggregate item."""

    name: str
    item: AggregateItem
    function: AggregateFunction
    state: State
    type: AttrType

    @property
    def merge(self) -> Merge:
        return self.state.merge


@dataclass(frozen=True, slots=True)
class ValueColumn:
    """The latest-event value of a non-aggregate select item."""

    name: str
    expr: Expr
    type: AttrType


@dataclass(frozen=True)
class AggregationLayout:
    """Tables and columns of one aggregation, derived from its spec and the function registry."""

    spec: AggregationSpec
    stream: StreamDef
    zone: str
    #: Rows carry the ``SHARD_ID`` of the deployment that wrote them (Siddhi's ``@PartitionById``).
    partitioned: bool = False
    #: The pre-aggregated table this rollup stores, whose definition the store records and follows.
    table: TableSpec | None = field(default=None, compare=False)
    #: The stream queries that make the source's events (``AppSpec.chain_key``): a changed filter
    #: or select changes what the rollup holds.
    source_queries: tuple[object, ...] = ()
    #: The app that defines the aggregation (``@app:name``), which the store records beside it.
    app_name: str | None = field(default=None, compare=False)

    @property
    def input_stream(self) -> str:
        """The stream whose input feeds the rollup (``--input``): its source, or the input stream the stream
        queries make the source's events from."""
        first = self.source_queries[0] if self.source_queries else None
        return str(first[0]) if isinstance(first, tuple) else self.spec.source

    @classmethod
    def of(cls, app: AppSpec, name: str, *, partition_by_default: bool = False) -> AggregationLayout:
        """The layout of aggregation ``name``; ``partition_by_default`` is the deployment's setting for
        aggregations that do not say (``@PartitionById(enable='false')`` always opts out)."""
        agg = app.aggregation(name)
        partitioned = partition_by_default if agg.partition_by_id is None else agg.partition_by_id
        partitioned = partitioned or agg.workers is not None  # a pre-aggregated table's workers
        table = next((t for t in app.tables if t.name == name and t.preaggregation is not None), None)
        layout = cls(agg, app.stream(agg.source), app.zone_of(agg), partitioned, table, app.chain_key(agg.source),
                     app.name)
        if partitioned and SHARD_ID in layout.column_types:
            from tiltframe.errors import DefinitionError

            msg = f"aggregation {agg.name} is partitioned by shard, so it cannot have a column named {SHARD_ID}"
            raise DefinitionError.at(msg, agg.pos)
        return layout

    @classmethod
    def of_table(cls, table: TableSpec, zone: str) -> AggregationLayout:
        """The layout of a pre-aggregated table's rollup, from the table alone (a stored definition)."""
        return cls(table.as_aggregation(), table.as_stream(), zone, True, table)

    @property
    def name(self) -> str:
        return self.spec.name

    def table_name(self, g: Granularity) -> str:
        return table_name(self.spec.name, g)

    @cached_property
    def keys(self) -> tuple[KeyColumn, ...]:
        return tuple(KeyColumn(k, self.stream.attribute(k).type) for k in self.spec.group_by)

    @cached_property
    def states(self) -> tuple[StateColumn, ...]:
        """Partial-state columns: the built-in event count, then each aggregate's states."""
        count = get(EVENT_COUNT.function)
        cols = [StateColumn(AGG_COUNT, EVENT_COUNT, count, count.states[0], AttrType.LONG)]
        for item in self.spec.aggregates:
            fn = get(item.function)
            arg_type = expression_type(item.arg, self.stream) if item.arg is not None else None
            for st in fn.states:
                cols.append(StateColumn(f"{item.alias}_{st.suffix}", item, fn, st, st.type(arg_type)))
        return tuple(cols)

    @cached_property
    def state_groups(self) -> tuple[tuple[StateColumn, ...], ...]:
        """The state columns of each aggregate item (the event count first), which merge together."""
        groups: dict[AggregateItem, list[StateColumn]] = {}
        for s in self.states:
            groups.setdefault(s.item, []).append(s)
        return tuple(tuple(g) for g in groups.values())

    @property
    def argument_measures(self) -> tuple[AggregateItem, ...]:
        """The aggregate items that take an argument, in select order: each skips the events whose argument
        is null or NaN, and the store keeps how many (``BatchStats.values_skipped``)."""
        return tuple(i for i in self.spec.aggregates if i.arg is not None)

    def settings(self, item: AggregateItem) -> dict[str, Any]:
        """The settings of an aggregate item's function (its constants, defaults filled in)."""
        return get(item.function).resolve(item.params, where=f"'{item.alias}'")

    def finalized(self, columns: Mapping[str, Any], ops: Ops) -> dict[str, Any]:
        """Each aggregate output's final value by its name, from ``columns`` (state column name to a
        pandas Series, a Spark column or an SQL expression) and the target's ``ops``.  An output the
        target cannot compute (a sketch read in SQL, or one whose states ``columns`` lacks) is left out."""
        out: dict[str, Any] = {}
        groups = {g[0].item: g for g in self.state_groups}
        for item in self.spec.aggregates:
            fn = get(item.function)
            if any(s.name not in columns for s in groups[item]):
                continue
            states = {s.state.suffix: columns[s.name] for s in groups[item]}
            settings = self.settings(item)
            names = fn.output_names(item.alias, settings)
            try:
                value = fn.finalize(states, ops, settings)
            except NotImplementedError:
                continue
            out.update(zip(names, value if fn.outputs is not None else (value,), strict=True))
        return out

    def outputs_of(self, measure: str) -> tuple[str, ...]:
        """The output names of the select item named ``measure`` (a sketch's quantiles are several)."""
        item = next((i for i in self.spec.aggregates if i.alias == measure), None)
        return (measure,) if item is None else tuple(get(item.function).output_names(item.alias, self.settings(item)))

    @property
    def orders_arrivals(self) -> bool:
        """Events need their arrival position: for latest-event values or a function that breaks event-time
        ties by arrival (first, last)."""
        return self.tracks_arrival or any(s.function.needs_arrival for s in self.states)

    @cached_property
    def values(self) -> tuple[ValueColumn, ...]:
        return tuple(
            ValueColumn(i.alias, i.expr, expression_type(i.expr, self.stream)) for i in self.spec.expressions
        )

    @property
    def tracks_arrival(self) -> bool:
        """Arrival order is stored only when a non-aggregate item needs the latest event."""
        return bool(self.values)

    @property
    def order_columns(self) -> tuple[str, ...]:
        """Columns that order events: event time, then arrival."""
        if self.tracks_arrival:
            return (AGG_EVENT_TIMESTAMP, AGG_ARRIVAL_BATCH, AGG_ARRIVAL_SEQ)
        return (AGG_EVENT_TIMESTAMP,)

    @property
    def key_names(self) -> tuple[str, ...]:
        return (AGG_TIMESTAMP, *(k.name for k in self.keys))

    @property
    def stored_key_names(self) -> tuple[str, ...]:
        """The primary key of the tables: the bucket, the keys and, with shards, ``SHARD_ID``."""
        return (*self.key_names, SHARD_ID) if self.partitioned else self.key_names

    @property
    def stored_column_types(self) -> dict[str, AttrType]:
        """The columns of the tables: :attr:`column_types`, and ``SHARD_ID`` after the keys with shards."""
        if not self.partitioned:
            return self.column_types
        cols = self.column_types
        names = list(cols)
        at = len(self.key_names)
        return {**{n: cols[n] for n in names[:at]}, SHARD_ID: AttrType.STRING, **{n: cols[n] for n in names[at:]}}

    @property
    def column_types(self) -> dict[str, AttrType]:
        """Every column of a merged row in table order with its type (what readers see)."""
        cols: dict[str, AttrType] = {AGG_TIMESTAMP: AttrType.LONG}
        cols.update({k.name: k.type for k in self.keys})
        cols.update(dict.fromkeys(self.order_columns, AttrType.LONG))
        cols.update({s.name: s.type for s in self.states})
        cols.update({v.name: v.type for v in self.values})
        return cols

    @property
    def output_types(self) -> dict[str, AttrType]:
        """Columns a retrieval can select: AGG_TIMESTAMP, keys and finalized values, by output name."""
        out: dict[str, AttrType] = {AGG_TIMESTAMP: AttrType.LONG}
        out.update({k.name: k.type for k in self.keys})
        for item in self.spec.aggregates:
            fn = get(item.function)
            arg_type = expression_type(item.arg, self.stream) if item.arg is not None else None
            out.update(dict.fromkeys(fn.output_names(item.alias, self.settings(item)), fn.result_type(arg_type)))
        out.update({v.name: v.type for v in self.values})
        out[AGG_EVENT_TIMESTAMP] = AttrType.LONG
        return out

    @cached_property
    def spec_hash(self) -> str:
        """Stable digest of everything that shapes the stored rows; a change means new tables."""
        shape = repr(
            (
                self.spec.name,
                self.spec.source,
                tuple((a.name, a.type.value) for a in self.stream.attributes),
                self.spec.select,
                self.spec.group_by,
                self.spec.time_attribute,
                self.spec.granularities,
                self.zone,
                *((self.source_queries,) if self.source_queries else ()),  # older rollups keep their digest
            )
        )
        return hashlib.sha256(shape.encode()).hexdigest()[:16]


def expression_type(expr: Expr, stream: StreamDef) -> AttrType:
    """Static type of an arithmetic expression over stream attributes (Siddhi's numeric widening)."""
    if isinstance(expr, Attr):
        return stream.attribute(expr.name, expr.pos).type
    if isinstance(expr, Literal):
        return AttrType.named(expr.type)
    if isinstance(expr, Unary):
        return AttrType.BOOL if expr.op == "not" else expression_type(expr.operand, stream)
    if isinstance(expr, Binary):
        if expr.op in ("==", "!=", "<", "<=", ">", ">=", "and", "or"):
            return AttrType.BOOL
        left, right = expression_type(expr.left, stream), expression_type(expr.right, stream)
        if expr.op == "+" and AttrType.STRING in (left, right):
            return AttrType.STRING
        order = [AttrType.INT, AttrType.LONG, AttrType.FLOAT, AttrType.DOUBLE]
        if left in order and right in order:
            widest = max(order.index(left), order.index(right))
            if expr.op == "/" and widest < 2:
                return AttrType.LONG if widest == 1 else AttrType.INT
            return order[widest]
        from tiltframe.errors import DefinitionError

        msg = f"operator '{expr.op}' needs numbers, got {left.value} and {right.value} in {expr}"
        raise DefinitionError.at(msg, expr.pos)
    if isinstance(expr, Call):
        return scalars.get(expr.name).result_type(expr, [expression_type(a, stream) for a in expr.args])
    msg = f"unsupported expression {expr}"
    raise TypeError(msg)
