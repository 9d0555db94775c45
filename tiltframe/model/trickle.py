"""A trickle query (Tremor's language) as tiltframe models it: window definitions, streams and selects over
events that may be any JSON value.

Expressions keep trickle's own shape (paths into ``event``, records, arrays, ``patch``), since its events
are not typed rows: every node carries the position it was written at, so a later check can point at it.
Operators and function calls reuse :mod:`tiltframe.model.expressions`' ``Unary``, ``Binary`` and ``Call``
(a call's name is its whole module path, ``aggr::stats::count``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tiltframe.model.expressions import Binary, Call, Literal, Pos, Unary

#: The ports every query has without ``create stream``: events come in on ``in``; ``out`` and ``err`` leave.
INPUT_PORT = "in"
OUTPUT_PORTS = ("out", "err")
#: The file name ending of a trickle query.
TRICKLE_SUFFIX = ".trickle"


@dataclass(frozen=True)
class Path:
    """``event``, ``group`` or ``window`` followed by segments: a field name (``event.a``), an index or key
    expression (``event["k"]``, ``event.a[0]``, ``event.fields[group[2]]``)."""

    root: str
    segments: tuple[str | TExpr, ...] = ()
    pos: Pos | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Record:
    """``{"k": v, ...}``: keys are expressions that give strings."""

    fields: tuple[tuple[TExpr, TExpr], ...] = ()
    pos: Pos | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Array:
    """``[a, b, ...]``."""

    items: tuple[TExpr, ...] = ()
    pos: Pos | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class PatchOp:
    """One operation of a ``patch``: ``insert`` (the key must be new), ``upsert``, ``update`` (the key must
    exist), ``default`` (only if absent), ``merge`` (a record merged into the key's) or ``erase``."""

    kind: str
    key: str
    value: TExpr | None = None
    pos: Pos | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Patch:
    """``patch TARGET of OP; OP ... end``: the record ``target`` changed by each operation in turn."""

    target: TExpr
    ops: tuple[PatchOp, ...]
    pos: Pos | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Merge:
    """``merge TARGET of VALUE end``: ``value`` merged into the record ``target`` (a null value erases a
    key; nested records merge)."""

    target: TExpr
    value: TExpr
    pos: Pos | None = field(default=None, compare=False, repr=False)


TExpr = Literal | Path | Record | Array | Patch | Merge | Unary | Binary | Call


@dataclass(frozen=True)
class GroupExpr:
    """``group by EXPR``: one group per value."""

    expr: TExpr
    pos: Pos | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class GroupEach:
    """``each(EXPR)``: one group per element of the array (or key of the record) ``expr`` gives."""

    expr: TExpr
    pos: Pos | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class GroupSet:
    """``set(a, b, ...)``: the cross product of its parts; ``group`` is the array of the parts' values."""

    items: tuple[GroupBy, ...]
    pos: Pos | None = field(default=None, compare=False, repr=False)


GroupBy = GroupExpr | GroupEach | GroupSet


def dimensions(group: GroupBy | None) -> tuple[GroupExpr | GroupEach, ...]:
    """The parts of ``group by`` that each give one of the group's values, in order (``set``s opened);
    ``group`` holds their values, then the group's key.  None (no ``group by``): no part."""
    if group is None:
        return ()
    if isinstance(group, GroupSet):
        return tuple(part for item in group.items for part in dimensions(item))
    return (group,)


@dataclass(frozen=True)
class WindowDef:
    """``define window NAME from tumbling with ... end``.

    ``interval_ns``: an interval window (the event's time, or its ingest time without ``script``);
    ``size``: a size window (counted in events, or in the weight ``script`` gives each one).
    ``script`` gives the event's time (interval windows) or its weight (size windows).
    """

    name: str
    interval_ns: int | None = None
    size: int | None = None
    max_groups: int | None = None
    emit_empty_windows: bool = False
    script: TExpr | None = None
    pos: Pos | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Select:
    """``select TARGET from SOURCE[w1, ...] where ... group by ... into TARGET_STREAM having ...``."""

    target: TExpr
    source: str
    into: str
    windows: tuple[str, ...] = ()
    where: TExpr | None = None
    group_by: GroupBy | None = None
    having: TExpr | None = None
    #: ``from in/port``, ``into out/port``: the port after a stream's name, when one is written.
    source_port: str | None = None
    into_port: str | None = None
    pos: Pos | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class TrickleQuery:
    """A whole ``.trickle`` file: its ``use``d modules, windows, created streams and selects, in order."""

    uses: tuple[str, ...] = ()
    windows: tuple[WindowDef, ...] = ()
    streams: tuple[str, ...] = ()
    selects: tuple[Select, ...] = ()
    text: str = field(default="", compare=False, repr=False)
    #: Where each ``create stream`` is written, in order.
    stream_positions: tuple[Pos | None, ...] = field(default=(), compare=False, repr=False)

    def window(self, name: str) -> WindowDef:
        return next(w for w in self.windows if w.name == name)
