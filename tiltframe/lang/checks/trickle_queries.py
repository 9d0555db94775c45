"""Validation of a trickle query: every stream, window and function it names exists, and aggregates,
``group`` and ``window`` appear only where they mean something.

- a select reads ``in`` or a stream made with ``create stream`` and writes ``out``, ``err`` or such a stream;
- the windows of ``from in[w1, w2]`` are defined, each once in the chain;
- functions are those of the subset (``FUNCTIONS``), with their number of arguments; aggregate functions
  only in the emitted expression of a windowed select, never inside another aggregate;
- in a select with windows, ``event`` outside aggregates only as an expression it is grouped by;
- ``group[N]`` within the group's values and key; ``group`` and ``window`` in ``where`` and ``group by``
  never (they are known only once the event is grouped);
- a window's ``script`` reads only the event and constants.
"""

from __future__ import annotations

from collections.abc import Iterator

from tiltframe.errors import DefinitionError, unknown
from tiltframe.model.expressions import Binary, Call, Literal, Pos, Unary
from tiltframe.model.trickle import (
    INPUT_PORT,
    OUTPUT_PORTS,
    Array,
    GroupExpr,
    Merge,
    Patch,
    Path,
    Record,
    Select,
    TExpr,
    TrickleQuery,
    dimensions,
)

#: Function -> (fewest, most arguments, is an aggregate).  ``hdr`` and ``dds`` take the percentiles as an
#: optional second argument (``["0.5", "0.99"]``).
FUNCTIONS: dict[str, tuple[int, int, bool]] = {
    "aggr::stats::count": (0, 0, True),
    **{f"aggr::stats::{f}": (1, 1, True) for f in ("sum", "min", "max", "mean", "var", "stdev")},
    "aggr::stats::hdr": (1, 2, True),
    "aggr::stats::dds": (1, 2, True),
    **{f"aggr::win::{f}": (1, 1, True) for f in ("first", "last", "collect_flattened", "collect_nested")},
    "record::keys": (1, 1, False),
    "record::values": (1, 1, False),
    "array::len": (1, 1, False),
    "string::lowercase": (1, 1, False),
    "win::cardinality": (0, 0, False),
    "system::ingest_ns": (0, 0, False),
}


def validate_trickle(query: TrickleQuery) -> TrickleQuery:
    """``query`` unchanged when every name in it holds; else the first problem, at its line and column."""
    check = _Checks(query)
    check.definitions()
    for select in query.selects:
        check.select(select)
    return query


def calls_in(expr: TExpr) -> Iterator[Call]:
    """Every function call in ``expr``, outermost first."""
    return (node for node in nodes_in(expr) if isinstance(node, Call))


def is_aggregate(call: Call) -> bool:
    """Whether ``call`` is an aggregate function (an unknown function is not)."""
    return FUNCTIONS.get(call.name, (0, 0, False))[2]


def aggregate_calls(expr: TExpr) -> list[Call]:
    """The aggregate function calls in ``expr``, outermost first."""
    return [call for call in calls_in(expr) if is_aggregate(call)]


def nodes_in(expr: TExpr) -> Iterator[TExpr]:
    """``expr`` and every expression inside it, outermost first (an aggregate's arguments included)."""
    yield expr
    for kid in _children(expr):
        yield from nodes_in(kid)


def _children(expr: TExpr) -> tuple[TExpr, ...]:
    """The expressions directly inside ``expr``."""
    if isinstance(expr, Path):
        kids: tuple[TExpr, ...] = tuple(s for s in expr.segments if not isinstance(s, str))
    elif isinstance(expr, Record):
        kids = tuple(part for pair in expr.fields for part in pair)
    elif isinstance(expr, Array):
        kids = expr.items
    elif isinstance(expr, Patch):
        kids = (expr.target, *(op.value for op in expr.ops if op.value is not None))
    elif isinstance(expr, Merge):
        kids = (expr.target, expr.value)
    elif isinstance(expr, Unary):
        kids = (expr.operand,)
    elif isinstance(expr, Binary):
        kids = (expr.left, expr.right)
    elif isinstance(expr, Call):
        kids = expr.args
    else:
        kids = ()
    return kids


class _Checks:
    def __init__(self, query: TrickleQuery) -> None:
        self.query = query
        self.windows = {w.name for w in query.windows}

    @staticmethod
    def error(message: str, pos: Pos | None) -> DefinitionError:
        """The error at ``pos`` (``parse_trickle`` adds the caret snippet)."""
        return DefinitionError.at(message, pos)

    def definitions(self) -> None:
        seen: set[str] = set()
        for window in self.query.windows:
            if window.name in seen:
                raise self.error(f"window {window.name} is defined twice", window.pos)
            seen.add(window.name)
            if window.script is not None:
                for node in nodes_in(window.script):
                    if isinstance(node, Path) and node.root != "event":
                        raise self.error(f"a window script reads the event only, not {node.root}", node.pos)
                    if isinstance(node, Call):
                        self.call(node)
                        if is_aggregate(node):
                            raise self.error(f"{node.name} is an aggregate: a window script gives one event's "
                                             "time or weight", node.pos)
        streams: set[str] = set()
        positions = self.query.stream_positions or (None,) * len(self.query.streams)
        for name, pos in zip(self.query.streams, positions, strict=True):
            if name in (INPUT_PORT, *OUTPUT_PORTS) or name in streams:
                raise self.error(f"stream {name} is defined twice ({INPUT_PORT}, out and err always exist)", pos)
            streams.add(name)

    def select(self, select: Select) -> None:
        created = set(self.query.streams)
        if select.source not in created | {INPUT_PORT}:
            raise self.error(unknown("stream to read", select.source, created | {INPUT_PORT}), select.pos)
        if select.into not in created | set(OUTPUT_PORTS):
            raise self.error(unknown("stream to write", select.into, created | set(OUTPUT_PORTS)), select.pos)
        if len(set(select.windows)) != len(select.windows):
            raise self.error("a window appears twice in the tilt frame", select.pos)
        for name in select.windows:
            if name not in self.windows:
                raise self.error(unknown("window", name, self.windows), select.pos)
        windowed = bool(select.windows)
        self.expression(select.target, select, aggregates=windowed)
        if windowed:
            self.grouped_event(select.target, select)
        for clause, expr in (("where", select.where), ("having", select.having)):
            if expr is not None:
                self.expression(expr, select, aggregates=False, clause=clause)
        for part in dimensions(select.group_by):
            self.expression(part.expr, select, aggregates=False, clause="group by")

    def expression(self, expr: TExpr, select: Select, *, aggregates: bool, clause: str | None = None) -> None:
        for node in nodes_in(expr):
            if isinstance(node, Call):
                self.call(node)
                if is_aggregate(node):
                    self.aggregate(node, select, allowed=aggregates, clause=clause)
            elif isinstance(node, Path):
                if clause in ("where", "group by") and node.root != "event":
                    raise self.error(f"{clause} reads the event, not {node.root}", node.pos)
                self.path(node, select)

    def grouped_event(self, expr: TExpr, select: Select) -> None:
        """In a windowed select, ``event`` outside aggregates only as an expression it is grouped by: a
        window emits for a group, not for one event (Tremor's rule)."""
        grouped = {part.expr for part in dimensions(select.group_by) if isinstance(part, GroupExpr)}
        if expr in grouped or (isinstance(expr, Call) and is_aggregate(expr)):
            return
        if isinstance(expr, Path) and expr.root == "event":
            raise self.error("event is read here outside an aggregate, in a select with windows: only "
                             "expressions it is grouped by may be (add it to group by set(...), or aggregate "
                             "it, such as aggr::win::last(...))", expr.pos)
        for kid in _children(expr):
            self.grouped_event(kid, select)

    def aggregate(self, call: Call, select: Select, *, allowed: bool, clause: str | None) -> None:
        for arg in call.args:
            for node in nodes_in(arg):
                if isinstance(node, Call) and is_aggregate(node):
                    raise self.error(f"aggregate {node.name} inside aggregate {call.name}", node.pos)
        if not allowed:
            where = f"in {clause}" if clause else "in a select without a window"
            hint = "" if clause else " (apply one: from in[my_window])"
            raise self.error(f"aggregate function {call.name} cannot be used {where}{hint}", call.pos)

    def call(self, call: Call) -> None:
        if call.name not in FUNCTIONS:
            raise self.error(unknown("function", call.name, FUNCTIONS), call.pos)
        fewest, most, _ = FUNCTIONS[call.name]
        if not fewest <= len(call.args) <= most:
            count = str(fewest) if fewest == most else f"{fewest} or {most}"
            raise self.error(f"{call.name} takes {count} argument{'s' if most != 1 else ''}, "
                             f"not {len(call.args)}", call.pos)
        if call.name in ("aggr::stats::hdr", "aggr::stats::dds") and len(call.args) == 2:
            self.percentiles(call)

    def percentiles(self, call: Call) -> None:
        given = call.args[1]
        items = given.items if isinstance(given, Array) else ()
        values = [i.value for i in items if isinstance(i, Literal) and isinstance(i.value, str)]
        try:
            ok = isinstance(given, Array) and len(values) == len(items) and all(0 <= float(v) <= 1 for v in values)
        except ValueError:
            ok = False
        if not ok:
            raise self.error(f"{call.name}'s percentiles are an array of strings between \"0\" and \"1\", such as "
                             '["0.5", "0.99"]', getattr(given, "pos", None) or call.pos)

    def path(self, path: Path, select: Select) -> None:
        """``group[N]``: N up to the group's dimensions (``group`` holds the values of its dimensions, then
        the group's key as text; a select without ``group by`` has one dimension, null).  ``window`` is the
        emitting window's name, null in a select without windows, as in Tremor."""
        if path.root != "group" or not path.segments:
            return
        first = path.segments[0]
        if isinstance(first, Literal) and isinstance(first.value, int) and not isinstance(first.value, bool):
            parts = len(dimensions(select.group_by)) or 1  # without group by, one value: null
            if not 0 <= first.value <= parts:
                raise self.error(f"group[{first.value}] is past the group's {parts} value"
                                 f"{'s' if parts != 1 else ''} and its key (group[0] is the first value, "
                                 f"group[{parts}] the key)", path.pos)
