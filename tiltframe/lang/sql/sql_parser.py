"""Parse continuous queries in streaming SQL (Timeplus style, seed 003) into :class:`ContinuousQuery`.

The grammar lives in ``sql.lark``.  An app file's SiddhiQL grammar captures a ``SELECT ...`` statement as one
terminal and hands its text here (:func:`build_continuous`) together with the whole file, so line, column
and caret snippet of every error point into the file.  Syntax errors go through the same translation as
SiddhiQL's (:func:`tiltframe.lang.syntax.syntax_error`), with this grammar's words.

This module checks what the text alone decides: window calls and their arguments, intervals, the order of
the EMIT clauses and that only one policy is given.  Names are checked against the app's streams by
:func:`tiltframe.lang.checks.continuous_queries.validate_continuous`.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Sequence
from typing import Any

from lark import Lark, Token, Tree, UnexpectedInput

from tiltframe.errors import unknown
from tiltframe.lang.siddhiql.annotations import continuous_options
from tiltframe.lang.siddhiql.trees import ParseTree, SpecBuilder, _kids, _present
from tiltframe.lang.siddhiql.vocabulary import RawAnnotation
from tiltframe.lang.syntax import Vocabulary, build_lark, syntax_error
from tiltframe.model.continuous import ContinuousQuery, Emit, EmitPolicy, Projection, Setting, SqlItem
from tiltframe.model.durations import Unit
from tiltframe.model.expressions import Binary, Call, Expr, Pos, Unary, constant_value
from tiltframe.model.streams import Annotation
from tiltframe.model.windows import (
    TILT_INTERVAL,
    TILT_SIZE,
    CountWindow,
    GlobalWindow,
    HopWindow,
    SessionWindow,
    TiltFrame,
    TumbleWindow,
    Window,
)

__all__ = ["INTERVAL_UNITS", "build_continuous"]

#: Units of ``<n><unit>`` intervals, in milliseconds (seed 003: ms, s, m, h, d).
#: The units of an interval (``5s``, ``2m``), Timeplus's spelling of the lengths ``model.durations`` defines.
INTERVAL_UNITS = {"ms": 1, **{word: unit.fixed_ms for word, unit in (("s", Unit.SECONDS), ("m", Unit.MINUTES),
                                                                    ("h", Unit.HOURS), ("d", Unit.DAYS))}}
_EVENT_UNITS = ("event", "events")
#: Each window function's sizes, in the order written, and the window it makes.
_SIZED: dict[str, tuple[tuple[str, ...], type[TumbleWindow | HopWindow | SessionWindow]]] = {
    "tumble": (("size",), TumbleWindow),
    "hop": (("slide", "size"), HopWindow),
    "session": (("gap", "max_length"), SessionWindow),
}
_INTERVAL = re.compile(r"([0-9]+(?:\.[0-9]+)?)([A-Za-z]+)")
_SQL_COMPARATORS = {"=": "==", "<>": "!="}

# Usage of each window function, quoted when its arguments are wrong.
_WINDOW_USAGE = {
    "tumble": "tumble(stream, [time column,] size), such as tumble(device_utils, 5s) or tumble(s, 100 events)",
    "hop": "hop(stream, [time column,] slide, size), such as hop(device_utils, 1s, 5s)",
    "session": "session(stream, [time column,] gap[, max length][, [start condition, end condition]]), such as "
    "session(device_utils, 5m, 1h) or session(s, 5m, [action = 'login', action = 'logout'])",
}
#: Session start and end conditions by bracket: whether the starting and the ending event are kept.
_RANGES = {
    "arg_range_closed": (True, True),
    "arg_range_start_only": (True, False),
    "arg_range_end_only": (False, True),
    "arg_range_open": (False, False),
}
_POLICY_WORDS = {
    EmitPolicy.AFTER_WINDOW_CLOSE: "AFTER WINDOW CLOSE",
    EmitPolicy.PERIODIC: "PERIODIC",
    EmitPolicy.ON_UPDATE: "ON UPDATE",
    EmitPolicy.AFTER_KEY_EXPIRE: "AFTER KEY EXPIRE",
}
_OPTIONS = {
    "with_batch": ("batch", "WITH BATCH"),
    "with_delay": ("delay", "WITH DELAY"),
    "and_timeout": ("timeout", "AND TIMEOUT"),
    "emit_timeout": ("timeout", "TIMEOUT"),
}
_POLICY_OF = {
    "after_window_close": EmitPolicy.AFTER_WINDOW_CLOSE,
    "periodic": EmitPolicy.PERIODIC,
    "on_update": EmitPolicy.ON_UPDATE,
    "after_key_expire": EmitPolicy.AFTER_KEY_EXPIRE,
}


def _text(tree: ParseTree) -> str:
    """The tokens of a small tree as written, joined (an interval such as ``5s`` or ``5 s``)."""
    return " ".join(str(t) for t in tree.scan_values(lambda v: isinstance(v, Token)))


def _unsupported(word: str, expected: set[str]) -> str | None:
    """Messages for SQL this release does not take, instead of 'unexpected name'."""
    if word in ("join", "union"):
        return f"{word.upper()} is not supported yet in continuous queries: a query reads one stream"
    if word in ("order", "limit"):
        return f"{word.upper()} is not supported in continuous queries: they emit rows as the EMIT policy says"
    return None


@functools.cache
def _lark() -> Lark:
    return build_lark("sql/sql.lark", ["sql_text"])


SQL = Vocabulary(
    lark=_lark,
    terminal_words={
        "IDENTIFIER": "a name",
        "STRING": "a string",
        "NUMBER": "a number",
        "INTERVAL": "an interval such as 5s (units ms, s, m, h, d)",
        "COMPARATOR": "a comparison ('=', '!=', '<', '<=', '>' or '>=')",
        "$END": "the end of the text",
    },
    expression_start=frozenset({"IDENTIFIER", "STRING", "NUMBER", "LPAR", "LSQB", "MINUS", "NOT", "TRUE", "FALSE"}),
    operators=frozenset(
        {"PLUS", "MINUS", "STAR", "SLASH", "PERCENT", "COMPARATOR", "AND", "OR", "DOT", "LPAR", "IN", "NOT"}
    ),
    statement_start=frozenset(),
    statement_phrase="",
    statement_words=frozenset({"define", "FROM", "SELECT"}),
    statement_chars="@",
    expression_in_clause={
        "SELECT": "a select item (a column, an aggregate such as count() or an expression)",
        "WHERE": "a condition (such as cpu_usage > 99)",
        "GROUP": "a column to group by",
        "HAVING": "a condition (such as cnt > 300)",
    },
    name_in_clause={
        "FROM": "a stream name or a window (tumble(...), hop(...) or session(...))",
        "IDENTIFIED": "a column",
    },
    unsupported=_unsupported,
)


def build_continuous(token: Token, source: str, annotations: Sequence[RawAnnotation] = ()) -> ContinuousQuery:
    """Parse the ``SELECT ...`` text of ``token``, captured from ``source`` (the whole text).

    The text before the statement is blanked (newlines kept), so lark's lines, columns and offsets are
    those of ``source``.  The query is returned as written; validation fills in the rest.
    """
    start = token.start_pos or 0
    padded = re.sub(r"[^\n]", " ", source[:start]) + str(token)
    try:
        tree = _lark().parse(padded, start="sql_text")
    except UnexpectedInput as exc:
        raise syntax_error(source, exc, SQL) from None
    builder = SqlBuilder(source)
    options = continuous_options(annotations, builder.error)
    with_clause, query, settings = _kids(tree)
    common = {
        "name": options.get("name"),
        "text": str(token).strip(),
        "annotations": tuple(a.annotation for a in annotations),
    }
    if with_clause is not None:
        built = builder.with_query(with_clause, query, **common)
    else:
        built = builder.continuous(query, **common)
    if settings is not None:
        built = dataclasses.replace(built, settings=builder.settings(settings))
    return built


class SqlBuilder(SpecBuilder):
    """Walks a ``sql.lark`` tree; the expression nodes are those of the SiddhiQL grammar plus ``IN`` and
    ``count(*)``, so the SiddhiQL walker builds them."""

    def continuous(
        self, tree: ParseTree, *, name: str | None, text: str, annotations: tuple[Annotation, ...]
    ) -> ContinuousQuery:
        select_clause, from_clause, where, partition_by, group_by, having, emit = _kids(tree)
        window = self.window(_kids(from_clause)[0])
        return ContinuousQuery(
            stream=window.stream,
            window=window,
            select=tuple(self.select_item(item) for item in _kids(select_clause)),
            where=self.expr(_kids(where)[0]) if where is not None else None,
            group_by=tuple(self.expr(e) for e in _kids(group_by)) if group_by is not None else (),
            having=self.expr(_kids(having)[0]) if having is not None else None,
            emit=self.emit(emit) if emit is not None else Emit(),
            partition_by=tuple(self.expr(e) for e in _kids(partition_by)) if partition_by is not None else (),
            name=name,
            text=text,
            annotations=annotations,
            pos=self.pos(tree),
        )

    # --- WITH name AS (query) SELECT ... FROM name; SETTINGS --------------------------------------------------

    def with_query(
        self, tree: ParseTree, outer: ParseTree, *, name: str | None, text: str, annotations: tuple[Annotation, ...]
    ) -> ContinuousQuery:
        """The aggregation inside ``WITH``, with the query after it as its projection."""
        first, *more = _kids(tree)
        if more:
            msg = (
                "one WITH query is supported yet: aggregate in it and select from it, "
                "as WITH g AS (SELECT ...) SELECT ... FROM g"
            )
            raise self.error(msg, self.pos(more[0]))
        cte_name, query_tree = _kids(first)
        cte = str(cte_name)
        inner = self.continuous(query_tree, name=name, text=text, annotations=annotations)
        select_clause, from_clause, where, partition_by, group_by, having, emit = _kids(outer)
        if partition_by is not None:
            raise self.error(f"PARTITION BY over the rows of WITH {cte} is not supported", self.pos(partition_by))
        source = _kids(from_clause)[0]
        if source.data != "stream_source" or str(_kids(source)[0]) != cte:
            msg = f"the query after WITH {cte} AS (...) reads its rows: write FROM {cte}"
            raise self.error(msg, self.pos(source))
        for clause, word in ((group_by, "GROUP BY"), (having, "HAVING")):
            if clause is not None:
                msg = f"{word} over the rows of WITH {cte} is not supported yet: group and filter inside the WITH query"
                raise self.error(msg, self.pos(clause))
        emit_spec = inner.emit
        if emit is not None:
            if inner.emit.pos is not None:
                msg = f"EMIT is given twice: once inside WITH {cte} AS (...) and once after it; keep one"
                raise self.error(msg, self.pos(emit))
            emit_spec = self.emit(emit)
        items = _kids(select_clause)
        select = () if [i.data for i in items] == ["select_star"] else tuple(self.select_item(i) for i in items)
        projection = Projection(
            cte, select, where=self.expr(_kids(where)[0]) if where is not None else None, pos=self.pos(outer)
        )
        return dataclasses.replace(inner, emit=emit_spec, projection=projection)

    def settings(self, tree: ParseTree) -> tuple[Setting, ...]:
        found: dict[str, Setting] = {}
        for setting in _kids(tree):
            name, comparator, value = _kids(setting)
            if str(comparator) != "=":
                raise self.error(f"write a setting as {name} = <value>", self.pos(comparator))
            if str(name).lower() in found:
                raise self.error(f"setting {name} is given twice", self.pos(name))
            found[str(name).lower()] = Setting(str(name).lower(), constant_value(self.expr(value)), pos=self.pos(name))
        return tuple(found.values())

    def select_item(self, tree: ParseTree) -> SqlItem:
        if tree.data == "select_star":
            msg = (
                "SELECT * is not allowed in an aggregation query: list the group-by columns and the "
                "aggregates, such as SELECT device, count() AS n"
            )
            raise self.error(msg, self.pos(tree))
        expr, alias = _kids(tree)
        return SqlItem(self.expr(expr), str(alias) if alias is not None else None, pos=self.pos(tree))

    # --- FROM: a stream or a window call ----------------------------------------------------------------

    def window(self, tree: ParseTree) -> Window:
        if tree.data == "stream_source":
            token = _kids(tree)[0]
            pos = self.pos(token)
            return GlobalWindow(str(token), pos=pos, positions=(("stream", pos),))
        function, *args = _kids(tree)
        kind = str(function).lower()
        if kind not in _WINDOW_USAGE:
            msg = unknown("window function", str(function), _WINDOW_USAGE)
            raise self.error(f"{msg}; a stream is written without parentheses", self.pos(function))
        usage = _WINDOW_USAGE[kind]
        first, *rest = args
        if first.data != "arg_name":
            raise self.error(f"the first argument of {kind}() is the stream: write {usage}", self.pos(first))
        stream_token = _kids(first)[0]
        positions: list[tuple[str, Pos]] = [("stream", self.pos(stream_token))]
        time_attribute = None
        if rest and rest[0].data == "arg_name":
            token = _kids(rest.pop(0))[0]
            time_attribute = str(token)
            positions.append(("time_attribute", self.pos(token)))
        sizes: list[tuple[str, int, Pos]] = []  # ("ms" or "count", value, position)
        if any(arg.data == "arg_tilt" for arg in rest):
            return self.tilt_window(kind, str(stream_token), time_attribute, rest, positions, self.pos(tree))
        bounds: dict[str, Any] = {}
        compares = [arg for arg in rest if arg.data == "arg_compare"]
        if compares:  # session(s, 5s, a = 'x', a <> 'x'): the same as [a = 'x', a <> 'x']
            if len(compares) != 2 or rest[-2:] != compares:
                msg = "a session takes two conditions, last: write session(s, 5s, [start condition, end condition])"
                raise self.error(msg, self.pos(compares[0]))
            both = [self.comparison(c) for c in compares]
            rest = [*rest[:-2], Tree("arg_range_closed", both, meta=compares[0].meta)]
        for arg in rest:
            if arg.data in _RANGES:
                if kind != "session" or bounds:
                    msg = "start and end conditions are written once, last, in session(): write "
                    msg += _WINDOW_USAGE["session"]
                    raise self.error(msg, self.pos(arg))
                start, end = _kids(arg)
                start_inclusive, end_inclusive = _RANGES[arg.data]
                bounds = {
                    "start_condition": self.expr(start),
                    "end_condition": self.expr(end),
                    "start_inclusive": start_inclusive,
                    "end_inclusive": end_inclusive,
                }
                positions.append(("conditions", self.pos(arg)))
                continue
            if bounds:
                msg = f"the start and end conditions come last in session(): write {_WINDOW_USAGE['session']}"
                raise self.error(msg, self.pos(arg))
            if arg.data == "arg_name":
                msg = f"{kind}() takes the time column right after the stream, then sizes: write {usage}"
                raise self.error(msg, self.pos(arg))
            sizes.append(self.window_size(_kids(arg)[0]))
        window = self.sized_window(kind, str(stream_token), time_attribute, sizes, positions, self.pos(tree))
        return dataclasses.replace(window, **bounds) if bounds else window

    @staticmethod
    def comparison(arg: ParseTree) -> ParseTree:
        """``a = 'x'`` written as a window argument, as the comparison tree an expression has."""
        name, comparator, right = _kids(arg)
        return Tree("compare", [Tree("attribute", [name, None], meta=arg.meta), comparator, right], meta=arg.meta)

    def sized_window(
        self,
        kind: str,
        stream: str,
        time_attribute: str | None,
        sizes: list[tuple[str, int, Pos]],
        positions: list[tuple[str, Pos]],
        pos: Pos,
    ) -> Window:
        usage = _WINDOW_USAGE[kind]
        counts = [s for s in sizes if s[0] == "count"]
        if counts and (kind != "tumble" or len(sizes) != 1):
            msg = f"a count of events sizes only a tumble window, alone: write {_WINDOW_USAGE['tumble']}"
            raise self.error(msg, counts[0][2])
        wanted = {"tumble": (1,), "hop": (2,), "session": (1, 2)}[kind]
        if len(sizes) not in wanted:
            took = {0: "no size", 1: "1 size"}.get(len(sizes), f"{len(sizes)} sizes")
            where = sizes[max(wanted)][2] if len(sizes) > max(wanted) else pos
            raise self.error(f"{kind}() got {took}: write {usage}", where)
        if counts:
            _, count, count_pos = counts[0]
            spots = (*positions, ("count", count_pos))
            return CountWindow(stream, time_attribute, count=count, pos=pos, positions=spots)
        names, cls = _SIZED[kind]
        lengths = {f"{name}_ms": value for name, (_, value, _) in zip(names, sizes, strict=False)}
        positions += [(name, p) for name, (_, _, p) in zip(names, sizes, strict=False)]
        return cls(stream, time_attribute, pos=pos, positions=tuple(positions), **lengths)

    def tilt_window(
        self,
        kind: str,
        stream: str,
        time_attribute: str | None,
        args: list[ParseTree],
        positions: list[tuple[str, Pos]],
        pos: Pos,
    ) -> Window:
        """``tumble(s, [ts,] [size 100, interval 1m])``: a tilt frame (Tremor's ``from in[w1, w2]``)."""
        usage = "tumble(stream, [time column,] [size 100, interval 1m, ...])"
        if kind != "tumble" or len(args) != 1:
            where = args[0] if kind != "tumble" else args[1]
            raise self.error(f"a tilt frame is the only size of a tumble window: write {usage}", self.pos(where))
        levels: list[tuple[str, int]] = []
        for i, level in enumerate(_kids(args[0])):
            word, interval = _kids(level)
            name = str(word).lower()
            if name == TILT_SIZE:
                number, unit = self.interval_parts(interval)
                if unit:
                    msg = f"'size {number}{unit}': a size window counts inputs, write size {number}"
                    raise self.error(msg, self.pos(word))
                levels.append((TILT_SIZE, self.positive(number, f"size {number}", "a size", word)))
            elif name == TILT_INTERVAL:
                levels.append((TILT_INTERVAL, self.interval_ms(interval)))
            else:
                msg = unknown("tilt frame window", str(word), (TILT_SIZE, TILT_INTERVAL))
                raise self.error(f"{msg}: write {usage}", self.pos(word))
            positions.append((f"level{i}", self.pos(word)))
        spots = tuple(positions)
        return TiltFrame(stream, time_attribute, levels=tuple(levels), pos=pos, positions=spots)

    def window_size(self, tree: ParseTree) -> tuple[str, int, Pos]:
        """An interval in ms, or ``100 events``: ("ms" | "count", value, position)."""
        first = _kids(tree)[0]
        number, unit = self.interval_parts(tree)
        if unit.lower() in _EVENT_UNITS:
            return "count", self.positive(number, f"{number} {unit}", "a count of events", first), self.pos(first)
        return "ms", self.interval_ms(tree), self.pos(first)

    # --- intervals --------------------------------------------------------------------------------------

    def interval_parts(self, tree: ParseTree) -> tuple[str, str]:
        """The number and the unit as written, from ``5s`` or from ``100 events``."""
        first, unit = _kids(tree) if len(_kids(tree)) == 2 else (_kids(tree)[0], None)
        if first.type == "INTERVAL":
            match = _INTERVAL.fullmatch(str(first))
            assert match is not None  # the terminal's own pattern
            return match.group(1), match.group(2)
        return str(first), str(unit) if unit is not None else ""

    def interval_ms(self, tree: ParseTree) -> int:
        """``500ms``, ``5s``, ``2m``, ``1h``, ``1d`` in milliseconds; the number a whole number above 0."""
        first = _kids(tree)[0]
        number, unit = self.interval_parts(tree)
        written = f"{number}{unit}"
        if first.type == "NUMBER":
            if not unit:
                msg = f"interval '{number}' needs a unit: write it as {number}s (units ms, s, m, h, d)"
                raise self.error(msg, self.pos(first))
            if unit.lower() in INTERVAL_UNITS:
                msg = f"write an interval without a space, as {written} (units ms, s, m, h, d)"
                raise self.error(msg, self.pos(first))
        if unit.lower() not in INTERVAL_UNITS:
            shown = written if first.type == "INTERVAL" else f"{number} {unit}"
            if unit.lower() in _EVENT_UNITS:
                msg = f"'{shown}': a count of events only sizes a tumble window"
            else:
                msg = f"interval '{shown}': {unknown('interval unit', unit, INTERVAL_UNITS)}"
            raise self.error(msg, self.pos(first))
        return self.positive(number, written, "an interval", first) * INTERVAL_UNITS[unit.lower()]

    def positive(self, number: str, written: str, what: str, token: Token) -> int:
        if not number.isdigit():
            raise self.error(f"{what} takes a whole number, got '{written}'", self.pos(token))
        if int(number) <= 0:
            raise self.error(f"{what} must be greater than 0, got '{written}'", self.pos(token))
        return int(number)

    # --- EMIT ---------------------------------------------------------------------------------------------

    def emit(self, tree: ParseTree) -> Emit:
        """The EMIT parts in order: one policy, each option after the clause it belongs to."""
        mode, *parts = _kids(tree)
        fields: dict[str, object] = {}
        positions: list[tuple[str, Pos]] = []
        if mode is not None:
            fields["changelog"] = str(_kids(mode)[0]).lower() == "changelog"
        policy_word: str | None = None
        last: str | None = None  # the part before, which an option may belong to
        for part in parts:
            kind, kids, pos = part.data, _kids(part), self.pos(part)
            if kind in _POLICY_OF:
                policy = _POLICY_OF[kind]
                if policy_word is not None:
                    msg = (
                        f"a query emits by one policy, got {policy_word} and {_POLICY_WORDS[policy]}: "
                        "choose AFTER WINDOW CLOSE, PERIODIC, ON UPDATE or AFTER KEY EXPIRE"
                    )
                    raise self.error(msg, pos)
                policy_word = _POLICY_WORDS[policy]
                fields["policy"] = policy
                positions.append(("policy", pos))
                if kind == "periodic":
                    interval, repeat = kids
                    if interval is not None:
                        fields["interval_ms"] = self.interval_ms(interval)
                        positions.append(("interval", self.pos(interval)))
                    fields["repeat"] = repeat is not None
                elif kind == "after_key_expire":
                    identified_by, only, maxspan = kids
                    if identified_by is not None:
                        column = _kids(identified_by)[0]
                        fields["identified_by"] = str(column)
                        positions.append(("identified_by", self.pos(column)))
                    fields["only"] = only is not None
                    fields["maxspan_ms"] = self.interval_ms(maxspan)
                    positions.append(("maxspan", self.pos(maxspan)))
                last = kind
                continue
            option, clause = _OPTIONS[kind]
            if f"{option}_ms" in fields:
                raise self.error(f"{clause} is given twice", pos)
            if kind == "emit_timeout":  # Proton's EMIT TIMEOUT t: the default policy, closed by a timeout too
                if policy_word is not None:
                    msg = f"EMIT TIMEOUT stands alone; after {policy_word} write AND TIMEOUT {_text(kids[0])}"
                    raise self.error(msg, pos)
                fields["timeout_ms"] = self.interval_ms(kids[0])
                positions.append(("timeout", pos))
                last = kind
                continue
            if option == "batch" and last != "on_update":
                raise self.error("WITH BATCH belongs to ON UPDATE: write EMIT ON UPDATE WITH BATCH 1s", pos)
            if option == "delay" and policy_word is None:
                msg = "WITH DELAY follows an emit policy: write EMIT AFTER WINDOW CLOSE WITH DELAY 2s"
                raise self.error(msg, pos)
            if option == "timeout" and policy_word is None:
                msg = "AND TIMEOUT follows an emit policy: write EMIT AFTER WINDOW CLOSE WITH DELAY 1s AND TIMEOUT 5s"
                raise self.error(msg, pos)
            fields[f"{option}_ms"] = self.interval_ms(kids[0])
            positions.append((option, pos))
            last = kind
        return Emit(pos=self.pos(tree), positions=tuple(positions), **fields)  # type: ignore[arg-type]

    # --- expressions --------------------------------------------------------------------------------------

    def expr(self, node: ParseTree | Token) -> Expr:
        """SQL's own forms; the rest are SiddhiQL's (same tree shapes)."""
        if isinstance(node, Tree):
            kind, kids, pos = node.data, _kids(node), self.pos(node)
            if kind == "compare":
                op = str(kids[1])
                return Binary(_SQL_COMPARATORS.get(op, op), self.expr(kids[0]), self.expr(kids[2]), pos=pos)
            if kind in ("in_op", "not_in_op"):
                return self.in_list(kind == "not_in_op", kids, pos)
            if kind == "call_star":
                name = kids[0]
                if str(name).lower() != "count":
                    msg = f"only count(*) takes '*': write {name}(<column>)"
                    raise self.error(msg, self.pos(name))
                return Call(str(name), (), pos=pos)
        return super().expr(node)

    def in_list(self, negated: bool, kids: list[ParseTree], pos: Pos) -> Expr:
        """``x IN (a, b)`` as ``(x == a) or (x == b)``; ``NOT IN`` as its negation."""
        subject, *values = kids
        left = self.expr(subject)
        tests = [Binary("==", left, self.expr(v), pos=self.pos(v)) for v in _present(values)]
        result: Expr = tests[0]
        for test in tests[1:]:
            result = Binary("or", result, test, pos=pos)
        return Unary("not", result, pos=pos) if negated else result
