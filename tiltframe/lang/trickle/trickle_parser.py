"""Parse Tremor's query language, trickle (seed 002), into :class:`~tiltframe.model.trickle.TrickleQuery`.

The grammar (``trickle.lark``) takes the subset tiltframe runs; syntax errors go through the same translation
as the other languages' (:func:`tiltframe.lang.syntax.syntax_error`), with trickle's words.  Constructs of
Tremor's language outside the subset (``match``, ``for``, ``let``, ``state``, ``define operator``, ...) are
refused by name where they are written, never read as something else.

This module decides what the text alone decides: the window settings (constant integer arithmetic and
``nanos::from_seconds(15)``), ``use``d modules, and the shape of every expression.  Names of streams and
windows, functions and where aggregates may appear are checked by
:func:`tiltframe.lang.checks.trickle_queries.validate_trickle`.
"""

from __future__ import annotations

import functools
import json
import operator
from collections.abc import Iterator
from typing import Any

from lark import Lark, Token, Tree, UnexpectedInput

from tiltframe.errors import DefinitionError, NotSupportedYet, unknown
from tiltframe.lang.checks.trickle_queries import validate_trickle
from tiltframe.lang.syntax import Vocabulary, build_lark, snippet, snippets_added, syntax_error
from tiltframe.model.expressions import Binary, Call, Literal, Pos, Unary
from tiltframe.model.trickle import (
    Array,
    GroupBy,
    GroupEach,
    GroupExpr,
    GroupSet,
    Merge,
    Patch,
    PatchOp,
    Path,
    Record,
    Select,
    TExpr,
    TrickleQuery,
    WindowDef,
)

__all__ = ["parse_trickle"]

#: The roots a path may start from.
PATH_ROOTS = ("event", "group", "window")
#: The modules ``use`` may name (``use std::time::nanos;``): those whose functions the subset has, and other
#: modules of Tremor's library a query may name without calling anything of them.  A function is refused at
#: its call when the subset does not have it; functions of these modules need no ``use``.
MODULES = ("std::time::nanos", "std::record", "std::array", "std::string", "std::win", "std::system",
           "tremor::system", "aggr::stats", "aggr::win", "std::math", "std::integer", "std::integer::signed",
           "std::float", "std::type", "std::json")
#: ``nanos::from_<unit>(n)``: nanoseconds per unit.
NANOS = {"from_nanos": 1, "from_micros": 1_000, "from_millis": 1_000_000, "from_seconds": 1_000_000_000,
         "from_minutes": 60_000_000_000, "from_hours": 3_600_000_000_000, "from_days": 86_400_000_000_000}
WINDOW_SETTINGS = ("interval", "size", "max_groups", "emit_empty_windows")
_ARITHMETIC = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.floordiv, "%": operator.mod}

#: Words of Tremor's language outside the subset, refused by name wherever they are written as words.
_REFUSED = {
    "match": "match ... end (pattern matching) is not supported: write the condition in where or having",
    "for": "for comprehensions are not supported",
    "present": "present (a test for a field) is not supported",
    "absent": "absent (a test for a field) is not supported",
    "let": "let (assignment in a script) is not supported: a select builds its output in one expression",
    "state": "state (a script's or window's own state) is not supported: a window script may only give the "
             "event's time or its weight",
    "args": "args (the arguments of a module or pipeline) is not supported",
    "emit": "emit (a script statement) is not supported",
    "drop": "drop (a script statement) is not supported: filter with where or having",
    "fn": "fn (function definitions) is not supported",
    "const": "const is not supported: write the value where it is used",
    "mod": "mod (module definitions) is not supported",
    "intrinsic": "intrinsic is not supported",
}
#: ``define X`` and ``create X`` for X other than ``window`` / ``stream``.
_REFUSED_DEFINITIONS = ("operator", "script", "pipeline", "connector", "flow")


def _unsupported(word: str, _expected: set[str]) -> str | None:
    return _REFUSED.get(word)


@functools.cache
def _lark() -> Lark:
    return build_lark("trickle/trickle.lark", ["start"])


TRICKLE = Vocabulary(
    lark=_lark,
    terminal_words={
        "IDENTIFIER": "a name",
        "QUOTED_NAME": "a name in backticks",
        "STRING": "a string",
        "INT": "an integer",
        "FLOAT": "a number",
        "COMPARATOR": "'==' or '!='",
        "CMP_OP": "a comparison ('<', '<=', '>' or '>=')",
        "ADD_OP": "'+' or '-'",
        "MUL_OP": "'*', '/' or '%'",
        "$END": "the end of the text",
    },
    expression_start=frozenset({"IDENTIFIER", "QUOTED_NAME", "STRING", "INT", "FLOAT", "LPAR", "LSQB", "LBRACE",
                                "ADD_OP", "NOT", "BANG", "TRUE", "FALSE", "NULL", "PATCH", "MERGE", "DOLLAR"}),
    operators=frozenset({"OR", "XOR", "AND", "CARET", "AMP", "COMPARATOR", "CMP_OP", "SHIFT_OP", "ADD_OP", "MUL_OP",
                         "DOT", "LSQB"}),
    statement_start=frozenset({"USE", "DEFINE", "CREATE", "SELECT"}),
    statement_phrase="a statement (use, define window, create stream or select)",
    statement_words=frozenset({"USE", "DEFINE", "CREATE", "SELECT"}),
    expression_in_clause={
        "SELECT": "the expression a select emits (such as event or {\"count\": aggr::stats::count()})",
        "WHERE": "a condition (such as event.value > 0)",
        "HAVING": "a condition (such as event.count > 1)",
        "BY": "what to group by (an expression, set(...) or each(...))",
        "SCRIPT": "the event's time or weight (such as event.timestamp)",
    },
    name_in_clause={
        "FROM": "a stream (in, or one made with create stream)",
        "INTO": "a stream (out, err, or one made with create stream)",
        "WINDOW": "the window's name",
        "STREAM": "the stream's name",
    },
    comparison_hint="compare with '==' (a single '=' only sets a window's settings)",
    unsupported=_unsupported,
)


def parse_trickle(text: str) -> TrickleQuery:
    """The query of a ``.trickle`` text, its names checked
    (:func:`~tiltframe.lang.checks.trickle_queries.validate_trickle`).

    Raises:
        DefinitionError: at the line and column of the first problem (``NotSupportedYet`` for a construct of
            Tremor's language outside the subset).
    """
    try:
        tree = _lark().parse(text, start="start")
    except UnexpectedInput as exc:
        refused = _refused_before(text, exc)
        raise (refused or syntax_error(text, exc, TRICKLE)) from None
    with snippets_added(text):
        return validate_trickle(_Builder(text).query(tree))


def _refused_before(text: str, exc: UnexpectedInput) -> NotSupportedYet | None:
    """A word of Tremor's language outside the subset, written at or before where parsing stopped: its
    refusal says more than the syntax error it led to (``match event of ...`` stops at ``event``)."""
    stop = getattr(exc, "pos_in_stream", None)
    token = getattr(exc, "token", None)
    if token is not None and token.start_pos is not None:
        stop = token.start_pos
    if stop is None:
        return None
    for prev, word, after in _words(text, stop):
        message = None
        if word.value in _REFUSED and prev not in (".", "::") and after != "::":
            message = _REFUSED[word.value]
        elif word.value in _REFUSED_DEFINITIONS and prev in ("define", "create"):
            message = f"{prev} {word.value} is not supported: a query defines windows and streams, and selects"
        if message is not None:
            line, column = word.line or 1, word.column or 1
            return NotSupportedYet(message, line=line, column=column, snippet=snippet(text, line, column))
    return None


def _words(text: str, stop: int) -> Iterator[tuple[str, Token, str]]:
    """Each word up to offset ``stop`` with the token values before and after it (strings and comments are
    skipped by the lexer)."""
    try:
        tokens = [t for t in _lark().lex(text, dont_ignore=False) if (t.start_pos or 0) <= stop]
    except UnexpectedInput:  # a character the lexer cannot read: the syntax error says it
        return
    for i, token in enumerate(tokens):
        if str(token).isidentifier():
            prev = str(tokens[i - 1]) if i else ""
            after = str(tokens[i + 1]) if i + 1 < len(tokens) else ""
            yield prev, token, after


def _pos(item: Tree | Token) -> Pos | None:
    if isinstance(item, Token):
        return Pos(item.line, item.column) if item.line is not None else None
    meta = item.meta
    return None if meta.empty else Pos(meta.line, meta.column)


def _kids(tree: Tree) -> list[Any]:
    """The children that carry meaning: keywords dropped, placeholders (None) kept."""
    return [c for c in tree.children if not (isinstance(c, Token) and c.type.isupper() and c.type.isalpha()
                                             and c.type not in ("IDENTIFIER", "STRING", "INT", "FLOAT"))]


class _Builder:
    """Walks the lark tree of a whole text into the model."""

    def __init__(self, text: str) -> None:
        self.text = text

    @staticmethod
    def error(message: str, where: Tree | Token | Pos | None, cls: type[DefinitionError] = DefinitionError
              ) -> DefinitionError:
        """The error at ``where`` (``parse_trickle`` adds the caret snippet)."""
        return cls.at(message, where if isinstance(where, Pos) or where is None else _pos(where))

    def query(self, tree: Tree) -> TrickleQuery:
        uses: list[str] = []
        windows: list[WindowDef] = []
        streams: list[str] = []
        positions: list[Pos | None] = []
        selects: list[Select] = []
        for stmt in tree.children:
            if stmt.data == "use_stmt":
                uses.append(self.use(stmt))
            elif stmt.data == "window_def":
                windows.append(self.window(stmt))
            elif stmt.data == "stream_def":
                streams.append(self.name(_kids(stmt)[0]))
                positions.append(_pos(_kids(stmt)[0]))
            else:
                selects.append(self.select(stmt))
        return TrickleQuery(tuple(uses), tuple(windows), tuple(streams), tuple(selects), self.text, tuple(positions))

    # --- statements -----------------------------------------------------------------------------------

    def name(self, tree: Tree) -> str:
        token = tree.children[0]
        return str(token)[1:-1] if token.type == "QUOTED_NAME" else str(token)

    def use(self, tree: Tree) -> str:
        path, *_, alias = _kids(tree)  # [AS name]: a placeholder for each of its two parts
        module = "::".join(self.name(n) for n in path.children)
        if module not in MODULES:
            raise self.error(unknown("module", module, MODULES), tree)
        if alias is not None:
            raise self.error("use ... as is not supported: write the module's own name", alias, NotSupportedYet)
        return module

    def window(self, tree: Tree) -> WindowDef:
        name_tree, kind, with_clause, script = _kids(tree)
        name, kind_name = self.name(name_tree), self.name(kind)
        if kind_name == "sliding":
            raise self.error("sliding windows are not supported: tumbling windows only", kind, NotSupportedYet)
        if kind_name != "tumbling":
            raise self.error(unknown("window kind", kind_name, ("tumbling",)), kind)
        settings: dict[str, Any] = {}
        for item in with_clause.children if with_clause is not None else ():
            if not isinstance(item, Tree):
                continue
            key_tree, value = item.children
            key = self.name(key_tree)
            if key not in WINDOW_SETTINGS:
                raise self.error(unknown("window setting", key, WINDOW_SETTINGS), key_tree)
            if key in settings:
                raise self.error(f"window {name} sets {key} twice", key_tree)
            settings[key] = self.setting(key, value)
        if ("interval" in settings) == ("size" in settings):
            what = "both interval and size" if "interval" in settings else "neither interval nor size"
            raise self.error(f"window {name} gives {what}: a tumbling window has one of them "
                             "(interval = nanos::from_seconds(10), or size = 100)", name_tree)
        return WindowDef(
            name,
            interval_ns=settings.get("interval"),
            size=settings.get("size"),
            max_groups=settings.get("max_groups"),
            emit_empty_windows=bool(settings.get("emit_empty_windows", False)),
            script=self.expr(script.children[1]) if script is not None else None,
            pos=_pos(tree),
        )

    def setting(self, key: str, tree: Tree) -> int | bool:
        value = self.constant(tree)
        if key == "emit_empty_windows":
            if not isinstance(value, bool):
                raise self.error(f"emit_empty_windows is true or false, not {json.dumps(value)}", tree)
            return value
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            unit = " (nanoseconds; nanos::from_seconds(10) is ten seconds)" if key == "interval" else ""
            raise self.error(f"{key} is a whole number of at least 1{unit}, not {json.dumps(value)}", tree)
        return value

    def constant(self, tree: Tree | Token) -> Any:
        """The value of a window setting: literals, integer arithmetic and ``nanos::from_<unit>(n)``."""
        expr = self.expr(tree)
        return self._evaluate(expr, tree)

    def _evaluate(self, expr: TExpr, where: Tree | Token) -> Any:
        if isinstance(expr, Literal):
            return expr.value
        if isinstance(expr, Unary) and expr.op == "-":
            return -self._evaluate(expr.operand, where)
        if isinstance(expr, Call) and expr.name.startswith("nanos::") and len(expr.args) == 1:
            unit = expr.name.removeprefix("nanos::")
            if unit not in NANOS:
                raise self.error(unknown("function", expr.name, (f"nanos::{u}" for u in NANOS)), expr.pos)
            n = self._evaluate(expr.args[0], where)
            if isinstance(n, bool) or not isinstance(n, int):
                raise self.error(f"{expr.name} takes a whole number, not {json.dumps(n)}", expr.pos)
            return n * NANOS[unit]
        if isinstance(expr, Binary) and expr.op in ("+", "-", "*", "/", "%"):
            left, right = self._evaluate(expr.left, where), self._evaluate(expr.right, where)
            if any(isinstance(v, bool) or not isinstance(v, int) for v in (left, right)):
                raise self.error("window settings are computed with whole numbers", expr.pos)
            if expr.op in ("/", "%") and right == 0:
                raise self.error("division by zero", expr.pos)
            if expr.op == "/" and left % right:
                raise self.error(f"{left} / {right} is not a whole number", expr.pos)
            return _ARITHMETIC[expr.op](left, right)
        raise self.error("a window setting is a constant: a number, true or false, integer arithmetic or "
                         "nanos::from_seconds(n) and the like", getattr(expr, "pos", None) or _pos(where))

    def select(self, tree: Tree) -> Select:
        target, source, windows, where, group, into, having = _kids(tree)
        source_name, source_port = self.port(source)
        into_name, into_port = self.port(into)
        return Select(
            self.expr(target),
            source_name,
            into_name,
            windows=tuple(self.name(w) for w in windows.children if isinstance(w, Tree)) if windows else (),
            where=self.expr(where.children[1]) if where is not None else None,
            group_by=self.group(group.children[2]) if group is not None else None,
            having=self.expr(having.children[1]) if having is not None else None,
            source_port=source_port,
            into_port=into_port,
            pos=_pos(tree),
        )

    def port(self, tree: Tree) -> tuple[str, str | None]:
        stream, port = tree.children
        return self.name(stream), self.name(port) if port is not None else None

    def group(self, tree: Tree) -> GroupBy:
        if tree.data == "group_set":
            return GroupSet(tuple(self.group(c) for c in tree.children if isinstance(c, Tree)), _pos(tree))
        if tree.data == "group_each":
            return GroupEach(self.expr(tree.children[1]), _pos(tree))
        return GroupExpr(self.expr(tree.children[0]), _pos(tree))

    # --- expressions -----------------------------------------------------------------------------------

    def expr(self, tree: Tree | Token) -> TExpr:
        pos = _pos(tree)
        if isinstance(tree, Token):  # pragma: no cover - every literal has a rule of its own
            raise self.error(f"unexpected {tree}", tree)
        kind, kids = tree.data, tree.children
        if kind == "int_lit":
            return Literal(int(str(kids[0]).replace("_", ""), 0), "long", pos)
        if kind == "float_lit":
            return Literal(float(str(kids[0]).replace("_", "")), "double", pos)
        if kind == "string_lit":
            return Literal(self.string(kids[0]), "string", pos)
        if kind in ("true_lit", "false_lit"):
            return Literal(kind == "true_lit", "bool", pos)
        if kind == "null_lit":
            return Literal(None, "object", pos)
        if kind == "name_ref":
            return self.root(kids[0])
        if kind == "field":
            return self.extend(kids[0], self.name(kids[1]))
        if kind == "index":
            return self.extend(kids[0], self.expr(kids[1]))
        if kind == "range_index":
            raise self.error("ranges (event[1:3]) are not supported", tree, NotSupportedYet)
        if kind == "invoke":
            path, *args = kids
            name = "::".join(self.name(n) for n in path.children)
            return Call(name, tuple(self.expr(a) for a in args if a is not None), pos)
        if kind == "module_constant":
            name = "::".join(self.name(n) for n in kids[0].children)
            raise self.error(f"constants of modules ({name}) are not supported", tree, NotSupportedYet)
        if kind == "record":
            fields = tuple((self.expr(f.children[0]), self.expr(f.children[1])) for f in kids if f is not None)
            return Record(fields, pos)
        if kind == "array":
            return Array(tuple(self.expr(a) for a in kids if a is not None), pos)
        if kind == "patch":
            target, *ops = [k for k in kids if isinstance(k, Tree)]
            return Patch(self.expr(target), tuple(self.patch_op(op) for op in ops), pos)
        if kind == "merge":
            target, value = [k for k in kids if isinstance(k, Tree)]
            return Merge(self.expr(target), self.expr(value), pos)
        if kind == "meta":
            raise self.error("metadata ($) is not supported", tree, NotSupportedYet)
        if kind == "unary":
            op, operand = kids
            word = {"!": "!"}.get(str(op), str(op))
            if word == "!":
                raise self.error("bitwise not (!) is not supported: write not", op, NotSupportedYet)
            return Unary("not" if word == "not" else word, self.expr(operand), _pos(op))
        if kind == "binary":
            left, op, right = kids
            word = str(op)
            if op.type in ("CARET", "AMP", "SHIFT_OP"):
                raise self.error(f"bitwise operators ({word}) are not supported", op, NotSupportedYet)
            return Binary(word, self.expr(left), self.expr(right), _pos(op))
        raise self.error(f"unexpected {kind}", tree)  # pragma: no cover - the grammar has no other node

    def root(self, tree: Tree) -> Path:
        word = self.name(tree)
        if word in PATH_ROOTS:
            return Path(word, (), _pos(tree))
        if word in _REFUSED:
            raise self.error(_REFUSED[word], tree, NotSupportedYet)
        raise self.error(f"unknown name '{word}': a query reads event, group and window (local variables are "
                         "not supported; a function is called with its module, such as record::keys(event))", tree)

    def extend(self, tree: Tree, segment: str | TExpr) -> Path:
        base = self.expr(tree)
        if not isinstance(base, Path):
            raise self.error("only event, group and window can be followed by .field or [index]", tree,
                             NotSupportedYet)
        return Path(base.root, (*base.segments, segment), base.pos)

    def patch_op(self, tree: Tree) -> PatchOp:
        kids = [k for k in tree.children if not (isinstance(k, Token) and k.type not in ("STRING",))]
        key = self.string(kids[0])
        value = self.expr(kids[1]) if len(kids) > 1 else None
        return PatchOp(tree.data.removeprefix("patch_"), key, value, _pos(tree))

    def string(self, token: Token) -> str:
        raw = str(token)
        if "#{" in raw.replace("\\#", ""):
            raise self.error("string interpolation (#{...}) is not supported", token, NotSupportedYet)
        try:
            return json.loads(raw.replace("\\#", "#"))
        except json.JSONDecodeError:
            raise self.error(f"cannot read the string {raw}", token) from None
