"""Continuous queries (streaming SQL, as in Timeplus): windows, aggregates and EMIT policies.

``SELECT ... FROM tumble(stream, 5s) [WHERE ...] GROUP BY ... [HAVING ...] EMIT ...`` is parsed by
:mod:`tiltframe.lang.sql.sql_parser` into a :class:`ContinuousQuery` as written (its window one of the
classes of :mod:`tiltframe.model.windows`); validation
(:func:`tiltframe.lang.checks.continuous_queries.validate_continuous`) checks every name against the stream,
resolves the EMIT defaults and splits the select list into the aggregates the engine keeps state for and
the expressions computed from them, so the engine never re-reads the text.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from tiltframe.model.aggregations import AggregateItem
from tiltframe.model.expressions import Attr, Expr, Pos, output_name
from tiltframe.model.streams import Annotation
from tiltframe.model.windows import Window

#: Columns a windowed query may select and group by besides the stream's attributes.
WINDOW_START = "window_start"
WINDOW_END = "window_end"
WINDOW_COLUMNS = (WINDOW_START, WINDOW_END)
#: ``emit_version()`` (Proton): the number of the emit a row belongs to, 0 for the query's first emit and one
#: more at each emit after it.  Validation turns the select item into this column, which the engine fills
#: as rows are emitted (one number per micro-batch that emits rows).
EMIT_VERSION_FUNCTION = "emit_version"
EMIT_VERSION = "_emit_version"


class EmitPolicy(enum.Enum):
    AFTER_WINDOW_CLOSE = "after window close"
    PERIODIC = "periodic"
    ON_UPDATE = "on update"
    AFTER_KEY_EXPIRE = "after key expire"


@dataclass(frozen=True, slots=True)
class Emit:
    """``EMIT [STREAM|CHANGELOG] <policy> ...``; ``policy`` None until validation fills the default
    (after window close for windows, periodic 2s for global aggregation)."""

    policy: EmitPolicy | None = None
    changelog: bool = False
    #: PERIODIC <interval> [REPEAT]
    interval_ms: int | None = None
    repeat: bool = False
    #: ON UPDATE WITH BATCH <interval>
    batch_ms: int | None = None
    #: WITH DELAY <interval> [AND TIMEOUT <interval>] (windows)
    delay_ms: int | None = None
    timeout_ms: int | None = None
    #: AFTER KEY EXPIRE [IDENTIFIED BY col] WITH [ONLY] MAXSPAN <interval> [AND TIMEOUT <interval>]
    identified_by: str | None = None
    maxspan_ms: int | None = None
    only: bool = False
    pos: Pos | None = field(default=None, compare=False, repr=False)
    #: Where each clause was written ("policy", "interval", "batch", "delay", "timeout", "identified_by",
    #: "maxspan"), so validation can point at the clause it refuses.
    positions: tuple[tuple[str, Pos], ...] = field(default=(), compare=False, repr=False)

    def pos_of(self, part: str) -> Pos | None:
        """Where ``part`` was written, else the EMIT keyword."""
        return _pos_of(self.positions, part, self.pos)


def _pos_of(positions: tuple[tuple[str, Pos], ...], part: str, default: Pos | None) -> Pos | None:
    return next((pos for name, pos in positions if name == part), default)


@dataclass(frozen=True, slots=True)
class SqlItem:
    """One select item: an expression over attributes, aggregate calls and window columns."""

    expr: Expr
    alias: str | None = None
    pos: Pos | None = field(default=None, compare=False, repr=False)

    @property
    def output_name(self) -> str:
        return output_name(self.expr, self.alias)


@dataclass(frozen=True, slots=True)
class Projection:
    """``WITH <name> AS (<aggregation>) SELECT <items> FROM <name> [WHERE ...]``: the outer query, a select
    list and a filter over the rows the aggregation emits (no ``select`` means ``SELECT *``).  Validation
    folds it into the query's ``outputs`` and ``having``, so the engine computes it as each row is emitted."""

    name: str
    select: tuple[SqlItem, ...] = ()
    where: Expr | None = None
    pos: Pos | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class Setting:
    """``SETTINGS <name> = <value>`` after a query."""

    name: str
    value: str | int | float | bool
    pos: Pos | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class ContinuousQuery:
    """One continuous query.  The fields after ``annotations`` are set by validation:

    - ``keys``: the stream attributes of GROUP BY (window columns left out);
    - ``aggregates``: each distinct aggregate call as an :class:`AggregateItem` named ``_agg<i>``, its
      argument an expression over stream attributes;
    - ``outputs``: (output name, expression) in select order, the expressions over keys, window columns
      and ``_agg<i>`` only; with a ``projection``, its select items with the aggregation's names replaced;
    - ``having``: rewritten the same way, and may also name outputs;
    - ``filter``: a projection's WHERE, rewritten the same way (a row is emitted when both hold).

    The fields before ``projection`` describe the aggregation, the one inside ``WITH ... AS (...)`` when
    there is a projection.
    """

    stream: str
    window: Window
    select: tuple[SqlItem, ...]
    where: Expr | None = None
    group_by: tuple[Expr, ...] = ()
    having: Expr | None = None
    emit: Emit = Emit()
    projection: Projection | None = None
    settings: tuple[Setting, ...] = ()
    name: str | None = None
    text: str = field(default="", compare=False, repr=False)
    annotations: tuple[Annotation, ...] = field(default=(), compare=False)
    pos: Pos | None = field(default=None, compare=False, repr=False)
    #: PARTITION BY (Proton): stream attributes that cut the stream into substreams, each with its own
    #: watermark; validation adds them to ``keys``.
    partition_by: tuple[Expr, ...] = ()
    keys: tuple[str, ...] = ()
    aggregates: tuple[AggregateItem, ...] = ()
    outputs: tuple[tuple[str, Expr], ...] = ()
    filter: Expr | None = None

    @property
    def partitions(self) -> tuple[str, ...]:
        """The attributes of PARTITION BY (none: one substream, one watermark)."""
        return tuple(e.name for e in self.partition_by if isinstance(e, Attr))

    @property
    def output_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.outputs)
