"""An aggregation's definition: its keys, aggregates and expressions, store, purge, levels and zone."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tiltframe.errors import DefinitionError
from tiltframe.model.durations import Granularity
from tiltframe.model.expressions import Expr, Pos
from tiltframe.model.streams import Annotation

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


