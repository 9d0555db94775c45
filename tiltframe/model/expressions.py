"""Expression trees shared by select items, ``on`` conditions and ``within``/``per`` operands.

Nodes are frozen dataclasses; their source position (``pos``) is excluded from equality so that a spec
built in Python equals the same spec parsed from text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypeAlias


@dataclass(frozen=True, slots=True)
class Pos:
    """1-based line and column of a node in the text it was parsed from."""

    line: int
    column: int


@dataclass(frozen=True, slots=True)
class Attr:
    """An attribute reference, optionally qualified by a stream alias (``a.symbol``)."""

    name: str
    qualifier: str | None = None
    pos: Pos | None = field(default=None, compare=False, repr=False)

    def __str__(self) -> str:
        return f"{self.qualifier}.{self.name}" if self.qualifier else self.name


@dataclass(frozen=True, slots=True)
class Literal:
    """A constant; ``type`` is one of the attribute type names (``string``, ``long``, ``double``, ...)."""

    value: str | int | float | bool | None
    type: str
    pos: Pos | None = field(default=None, compare=False, repr=False)

    def __str__(self) -> str:
        if self.type == "string":
            return repr(self.value)
        if self.type == "long":
            return f"{self.value}L"
        return str(self.value).lower() if self.type == "bool" else str(self.value)


@dataclass(frozen=True, slots=True)
class Unary:
    """``-x`` or ``not x``."""

    op: str
    operand: Expr
    pos: Pos | None = field(default=None, compare=False, repr=False)

    def __str__(self) -> str:
        return f"not {self.operand}" if self.op == "not" else f"-{self.operand}"


@dataclass(frozen=True, slots=True)
class Binary:
    """Arithmetic (``+ - * / %``), comparison (``== != < <= > >=``) or logic (``and or``)."""

    op: str
    left: Expr
    right: Expr
    pos: Pos | None = field(default=None, compare=False, repr=False)

    def __str__(self) -> str:
        return f"({self.left} {self.op} {self.right})"


@dataclass(frozen=True, slots=True)
class Call:
    """A function call such as ``avg(price)`` or ``count()``."""

    name: str
    args: tuple[Expr, ...] = ()
    pos: Pos | None = field(default=None, compare=False, repr=False)

    def __str__(self) -> str:
        return f"{self.name}({', '.join(map(str, self.args))})"


@dataclass(frozen=True, slots=True)
class ListLiteral:
    """``[0.5, 0.99]``: a list of constants, only as a parameter of an aggregate function."""

    items: tuple[Expr, ...] = ()
    pos: Pos | None = field(default=None, compare=False, repr=False)

    def __str__(self) -> str:
        return f"[{', '.join(map(str, self.items))}]"


Expr: TypeAlias = Attr | Literal | Unary | Binary | Call | ListLiteral

ARITHMETIC_OPS = frozenset({"+", "-", "*", "/", "%"})
COMPARISON_OPS = frozenset({"==", "!=", "<", "<=", ">", ">="})
LOGIC_OPS = frozenset({"and", "or"})


def attributes_of(expr: Expr) -> tuple[Attr, ...]:
    """Every attribute reference inside ``expr``, left to right."""
    if isinstance(expr, Attr):
        return (expr,)
    if isinstance(expr, Unary):
        return attributes_of(expr.operand)
    if isinstance(expr, Binary):
        return attributes_of(expr.left) + attributes_of(expr.right)
    if isinstance(expr, Call):
        return tuple(a for arg in expr.args for a in attributes_of(arg))
    if isinstance(expr, ListLiteral):
        return tuple(a for item in expr.items for a in attributes_of(item))
    return ()


def calls_of(expr: Expr) -> tuple[Call, ...]:
    """Every function call inside ``expr`` (outermost first)."""
    if isinstance(expr, Call):
        return (expr, *(c for arg in expr.args for c in calls_of(arg)))
    if isinstance(expr, Unary):
        return calls_of(expr.operand)
    if isinstance(expr, Binary):
        return calls_of(expr.left) + calls_of(expr.right)
    if isinstance(expr, ListLiteral):
        return tuple(c for item in expr.items for c in calls_of(item))
    return ()


def constant_value(expr: Expr) -> Any:
    """The Python value of a constant parameter: a literal, or a list of literals as a tuple.

    Raises:
        DefinitionError: anything else, at its position.
    """
    if isinstance(expr, Literal):
        return expr.value
    if isinstance(expr, ListLiteral) and all(isinstance(i, Literal) for i in expr.items):
        return tuple(i.value for i in expr.items)  # type: ignore[union-attr]
    from tiltframe.errors import DefinitionError

    msg = f"'{expr}' is not a constant: write a number, a string or a list such as [0.5, 0.99]"
    raise DefinitionError.at(msg, expr.pos)


def output_name(expr: Expr, alias: str | None) -> str:
    """The column name a select item produces: its alias, an attribute's own name, else its text."""
    if alias:
        return alias
    if isinstance(expr, Attr):
        return expr.name
    return str(expr)
