"""Turn lark parse trees into the frozen spec dataclasses of :mod:`tiltframe.model.app`.

Kept apart from :mod:`tiltframe.lang.siddhiql.parser` (grammar loading and syntax errors) so that each module does
one job: this one knows the tree shapes of ``grammar.lark`` and the meaning of each clause.  Errors found
here are :class:`DefinitionError` at the position of the offending node, with a caret snippet.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from lark import Token, Tree

from tiltframe.aggregates import registry
from tiltframe.errors import DefinitionError, unknown
from tiltframe.lang.siddhiql.annotations import aggregation_options, stream_options
from tiltframe.lang.siddhiql.vocabulary import RawAnnotation, check_annotations
from tiltframe.lang.syntax import snippet
from tiltframe.model.aggregations import AggregateItem, AggregationSpec, ExpressionItem, KeyItem, SelectItem
from tiltframe.model.durations import Granularity, unit_named, unit_range
from tiltframe.model.expressions import (
    Attr,
    Binary,
    Call,
    Expr,
    ListLiteral,
    Literal,
    Pos,
    Unary,
    calls_of,
    constant_value,
)
from tiltframe.model.streams import Annotation, Attribute, AttrType, StreamDef

if TYPE_CHECKING:  # tables build on this module
    from tiltframe.model.tables import TableSpec

ParseTree = Tree[Token]
Node = ParseTree | Token

_BINARY_OPS = {"add": "+", "sub": "-", "mul": "*", "div": "/", "mod": "%", "and_op": "and", "or_op": "or"}
_INT_MAX = 2**31 - 1
_LONG_MAX = 2**63 - 1
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r"}


class SpecBuilder:
    """Walks the parse tree of one text; ``text`` is kept to quote items and draw carets in errors."""

    def __init__(self, text: str, known_aggregations: Collection[str] = ()) -> None:
        self.text = text
        self.known_aggregations = set(known_aggregations)
        #: A query given alone (``tiltframe query``), not in an app: a stream query has no app to run in.
        self.one_query = False
        self.known_streams: set[str] = set()
        #: ``define table`` statements (``parse_app`` checks them and adds them to the AppSpec).
        self.tables: list[TableSpec] = []

    # --- errors and positions ---------------------------------------------------------------------------

    def error(self, message: str, pos: Pos | None) -> DefinitionError:
        if pos is None:
            return DefinitionError(message)
        return DefinitionError(
            message, line=pos.line, column=pos.column, snippet=snippet(self.text, pos.line, pos.column)
        )

    @staticmethod
    def pos(node: Node) -> Pos:
        if isinstance(node, Token):
            return Pos(node.line or 1, node.column or 1)
        return Pos(node.meta.line, node.meta.column)

    def source_of(self, node: ParseTree) -> str:
        """The text a node was parsed from, as the user wrote it (for messages)."""
        return " ".join(self.text[node.meta.start_pos : node.meta.end_pos].split())

    # --- annotations ------------------------------------------------------------------------------------

    def annotation(self, tree: ParseTree) -> RawAnnotation:
        name_token, args = _kids(tree)
        name = str(name_token)[1:]
        if tree.data == "annotation" and name.lower().startswith("app:"):
            msg = f"app annotation @{name} must come first in the text, before every definition and query"
            raise self.error(msg, self.pos(name_token))
        elements: list[tuple[str | None, str]] = []
        positions: list[Pos] = []
        nested: list[RawAnnotation] = []
        for element in _present(_kids(args) if args is not None else []):
            if element.data == "annotation":
                nested.append(self.annotation(element))
                continue
            positions.append(self.pos(element))
            if element.data == "keyed_element":
                key, value = _kids(element)
                elements.append((".".join(str(t) for t in _kids(key)), self.annotation_value(value)))
            else:
                elements.append((None, self.annotation_value(_kids(element)[0])))
        annotation = Annotation(name, tuple(elements), pos=self.pos(tree))
        return RawAnnotation(annotation, tuple(nested), tuple(positions))

    @staticmethod
    def annotation_value(tree: ParseTree) -> str:
        token = _kids(tree)[0]
        return _unquote(str(token)) if token.type == "STRING" else str(token)

    # --- define stream ----------------------------------------------------------------------------------

    def stream_def(self, tree: ParseTree, annotations: list[RawAnnotation]) -> StreamDef:
        name, *attribute_defs = _kids(tree)
        check_annotations(annotations, "define stream", f"define stream {name}", self.error)
        options = stream_options(annotations, self.error)
        attributes = [self.attribute_def(a) for a in attribute_defs]
        return StreamDef(
            str(name), tuple(attributes), tuple(a.annotation for a in annotations), pos=self.pos(tree), **options
        )

    def attribute_def(self, attribute_def: ParseTree) -> Attribute:
        """``name type`` of a stream or a table."""
        attr_name, type_token = _kids(attribute_def)
        type_pos = self.pos(type_token)
        if str(type_token).lower() == "object":
            msg = (
                f"attribute type 'object' (of {attr_name}) is not supported; "
                "expected one of: bool, double, float, int, long, string"
            )
            raise self.error(msg, type_pos)
        try:
            attr_type = AttrType.named(str(type_token), type_pos)
        except DefinitionError as exc:
            raise self.error(exc.message, type_pos) from None
        return Attribute(str(attr_name), attr_type, pos=self.pos(attr_name))

    # --- define aggregation -----------------------------------------------------------------------------

    def aggregation_def(self, tree: ParseTree, annotations: list[RawAnnotation]) -> AggregationSpec:
        name, source, select_items, group_by, time_attribute, durations = _kids(tree)
        keys: list[str] = []
        key_pos: list[Pos] = []
        for token in _kids(group_by) if group_by is not None else []:
            if str(token) in keys:
                msg = f"attribute '{token}' is listed twice in group by"
                raise self.error(msg, self.pos(token))
            keys.append(str(token))
            key_pos.append(self.pos(token))
        select = tuple(self.aggregation_item(item, keys) for item in _kids(select_items))
        options = aggregation_options(annotations, self.error, where=f"define aggregation {name}")
        return AggregationSpec(
            name=str(name),
            source=str(source),
            select=select,
            granularities=self.durations(durations),
            group_by=tuple(keys),
            time_attribute=str(_kids(time_attribute)[0]) if time_attribute is not None else None,
            annotations=tuple(a.annotation for a in annotations),
            pos=self.pos(tree),
            group_by_pos=tuple(key_pos),
            **options,
        )

    def aggregation_item(self, item: ParseTree, keys: list[str]) -> SelectItem:
        """Sort one select item into a key, an aggregate or a latest-value expression (seed 000)."""
        expr_node, alias_token = _kids(item)
        expr = self.expr(expr_node)
        alias = str(alias_token) if alias_token is not None else None
        pos = self.pos(item)
        written = self.source_of(expr_node)
        if isinstance(expr, Attr) and expr.qualifier is None and expr.name in keys:
            return KeyItem(expr.name, alias, pos=pos)
        if isinstance(expr, Call) and registry.is_aggregate(expr.name):
            function = registry.get(expr.name)
            nested = [c for c in calls_of(expr)[1:] if registry.is_aggregate(c.name)]
            if nested:
                msg = f"aggregate {nested[0]} cannot be used inside another aggregate in '{written}'"
                raise self.error(msg, nested[0].pos)
            if function.takes_arg and not expr.args:
                msg = f"{function.name}() needs an argument: write '{function.name}(<attribute>) as <name>'"
                raise self.error(msg, expr.pos)
            if alias is None:
                msg = f"select item '{written}' needs a name: write '{written} as <name>'"
                raise self.error(msg, pos)
            if function.settings is None and len(expr.args) > 1:
                raise self.error(f"{function.name}() takes one argument, got {len(expr.args)}", expr.pos)
            params = tuple(self.constant(a) for a in expr.args[1:])
            try:
                function.resolve(params)
            except DefinitionError as exc:
                raise self.error(exc.message, expr.args[1].pos if len(expr.args) > 1 else expr.pos) from None
            return AggregateItem(function.name, expr.args[0] if expr.args else None, alias, pos=pos, params=params)
        aggregates = [c for c in calls_of(expr) if registry.is_aggregate(c.name)]
        if aggregates:
            msg = (
                f"select item '{written}' combines aggregates in an expression; select them separately "
                f"(for example '{aggregates[0]} as <name>') and combine them when retrieving"
            )
            raise self.error(msg, aggregates[0].pos)
        self.check_calls(expr)
        if isinstance(expr, Attr):
            return ExpressionItem(expr, alias or expr.name, pos=pos)
        if alias is None:
            msg = f"select item '{written}' needs a name: write '{written} as <name>'"
            raise self.error(msg, pos)
        return ExpressionItem(expr, alias, pos=pos)

    def durations(self, tree: ParseTree) -> tuple[Granularity, ...]:
        """``every sec ... year`` (a range of units) or ``every min, day`` (a list, sorted finest first)."""
        found: list[tuple[Granularity, str, Pos]] = []
        for duration in _kids(tree):
            multiple_token, unit_token = _kids(duration)
            pos = self.pos(duration)
            unit_pos = self.pos(unit_token)
            unit = unit_named(str(unit_token), line=unit_pos.line, column=unit_pos.column)
            multiple = self.whole_number(multiple_token, "a duration multiple") if multiple_token else 1
            if multiple < 1:
                msg = f"a duration multiple must be a positive integer, got {multiple}"
                raise self.error(msg, pos)
            if multiple != 1 and tree.data == "duration_range":
                msg = (
                    f"a duration range takes plain durations (sec ... year), got '{self.source_of(duration)}'"
                )
                raise self.error(msg, pos)
            found.append((Granularity(unit, multiple), self.source_of(duration), pos))
        if tree.data == "duration_range":
            (first, first_word, pos), (last, last_word, _) = found
            if first.unit.rank > last.unit.rank:
                msg = (
                    f"reversed duration range '{first_word} ... {last_word}' goes from coarser to finer; "
                    f"write '{last_word} ... {first_word}'"
                )
                raise self.error(msg, pos)
            if first == last:
                msg = f"range '{first_word} ... {last_word}' names one duration twice; write '{first_word}'"
                raise self.error(msg, pos)
            return unit_range(first.unit, last.unit)
        seen: dict[Granularity, str] = {}
        for granularity, word, pos in found:
            if granularity in seen:
                also = "" if seen[granularity] == word else f" (as '{seen[granularity]}' and '{word}')"
                msg = f"duration '{word}' is listed twice{also}"
                raise self.error(msg, pos)
            seen[granularity] = word
        return tuple(sorted(seen, key=lambda g: g.sort_key))

    # --- expressions ------------------------------------------------------------------------------------

    def checked_expr(self, node: Node) -> Expr:
        expr = self.expr(node)
        self.check_calls(expr)
        return expr

    def check_calls(self, expr: Expr) -> None:
        """Reject calls of unknown functions; only the registered aggregates exist so far."""
        for call in calls_of(expr):
            if not registry.is_aggregate(call.name):
                raise self.error(unknown("function", call.name, registry.names()), call.pos)

    def constant(self, expr: Expr) -> Any:
        """A constant parameter of an aggregate function, refused at its position otherwise."""
        try:
            return constant_value(expr)
        except DefinitionError as exc:
            raise self.error(exc.message, expr.pos) from None

    def expr(self, node: Node) -> Expr:
        if isinstance(node, Token):  # pragma: no cover - every expression token is wrapped in a rule
            msg = f"unexpected token {node!r} in an expression"
            raise self.error(msg, self.pos(node))
        pos = self.pos(node)
        kind, children = node.data, _kids(node)
        if kind in _BINARY_OPS:
            return Binary(_BINARY_OPS[kind], self.expr(children[0]), self.expr(children[1]), pos=pos)
        if kind == "compare":
            return Binary(str(children[1]), self.expr(children[0]), self.expr(children[2]), pos=pos)
        if kind == "not_op":
            return Unary("not", self.expr(children[0]), pos=pos)
        if kind == "neg":
            operand = self.expr(children[0])
            if (
                isinstance(operand, Literal)
                and isinstance(operand.value, int | float)
                and operand.type != "bool"
            ):
                return Literal(-operand.value, operand.type, pos=pos)
            return Unary("-", operand, pos=pos)
        if kind == "string":
            return Literal(_unquote(str(children[0])), "string", pos=pos)
        if kind == "number":
            return self.number(children[0])
        if kind in ("true", "false"):
            return Literal(kind == "true", "bool", pos=pos)
        if kind == "list":
            return ListLiteral(tuple(self.expr(c) for c in _present(children)), pos=pos)
        if kind == "call":
            return Call(str(children[0]), tuple(self.expr(c) for c in _present(children[1:])), pos=pos)
        first, second = children  # attribute: name or qualifier.name
        if second is None:
            return Attr(str(first), pos=pos)
        return Attr(str(second), str(first), pos=pos)

    def number(self, token: Token) -> Literal:
        """Siddhi literals: ``12`` int, ``12L`` long, ``1.5f`` float, ``1.5``/``1e3``/``1.5d`` double."""
        text, pos = str(token), self.pos(token)
        suffix = text[-1].lower() if text[-1].isalpha() else ""
        body = text[:-1] if suffix else text
        fractional = "." in body or "e" in body.lower()
        if suffix == "f":
            return Literal(float(body), "float", pos=pos)
        if suffix == "d" or (fractional and suffix == ""):
            return Literal(float(body), "double", pos=pos)
        if fractional:
            msg = f"a long literal must be a whole number, got '{text}'"
            raise self.error(msg, pos)
        value = int(body)
        if value > _LONG_MAX:
            msg = f"number {text} does not fit in a long"
            raise self.error(msg, pos)
        return Literal(value, "long" if suffix == "l" or value > _INT_MAX else "int", pos=pos)

    def whole_number(self, token: Token, what: str) -> int:
        literal = self.number(token)
        if literal.type not in ("int", "long") or not isinstance(literal.value, int):
            msg = f"{what} must be a whole number, got '{token}'"
            raise self.error(msg, literal.pos)
        return literal.value


def _kids(tree: ParseTree) -> list[Any]:
    """The children of a node; their shape is fixed by ``grammar.lark``, so they are not narrowed here."""
    return list(tree.children)


def _present(children: list[Any]) -> list[Any]:
    """Children without lark's ``None`` placeholders for absent optional parts."""
    return [c for c in children if c is not None]


def _str_or_none(token: Token | None) -> str | None:
    return str(token) if token is not None else None


def _unquote(literal: str) -> str:
    """The value of a quoted string literal; backslash escapes a quote, a backslash, n, t or r."""
    body, out, i = literal[1:-1], [], 0
    while i < len(body):
        if body[i] == "\\" and i + 1 < len(body):
            out.append(_ESCAPES.get(body[i + 1], body[i + 1]))
            i += 2
        else:
            out.append(body[i])
            i += 1
    return "".join(out)
