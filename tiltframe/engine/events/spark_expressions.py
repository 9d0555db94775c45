"""Spec expressions (arithmetic over event attributes) as Spark columns.

Division and modulo use ``try_divide``/``try_mod`` so a zero divisor gives null instead of failing the
batch under ANSI mode; integer division truncates toward zero as in Siddhi (Java) arithmetic.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from tiltframe.aggregates.layout import expression_type
from tiltframe.functions import scalars
from tiltframe.model.expressions import Attr, Binary, Call, Expr, Literal, Unary
from tiltframe.model.streams import AttrType, StreamDef


def to_column(expr: Expr, stream: StreamDef) -> Column:
    """A Spark column computing ``expr`` over typed event columns."""
    if isinstance(expr, Attr):
        return F.col(expr.name)
    if isinstance(expr, Literal):
        return F.lit(expr.value)
    if isinstance(expr, Unary):
        inner = to_column(expr.operand, stream)
        return ~inner if expr.op == "not" else -inner
    if isinstance(expr, Binary):
        left, right = to_column(expr.left, stream), to_column(expr.right, stream)
        op = expr.op
        if op == "+" and expression_type(expr, stream) is AttrType.STRING:
            return F.concat(left.cast("string"), right.cast("string"))
        if op == "/":
            quotient = F.try_divide(left, right)
            if expression_type(expr, stream).is_integral:
                return quotient.cast("long")
            return quotient
        if op == "%":
            return F.try_mod(left, right)
        simple = {
            "+": Column.__add__, "-": Column.__sub__, "*": Column.__mul__,
            "==": Column.__eq__, "!=": Column.__ne__, "<": Column.__lt__, "<=": Column.__le__,
            ">": Column.__gt__, ">=": Column.__ge__, "and": Column.__and__, "or": Column.__or__,
        }
        return simple[op](left, right)
    if isinstance(expr, Call):
        return scalars.get(expr.name).spark(expr, [to_column(a, stream) for a in expr.args])
    msg = f"unsupported expression {expr!r}"
    raise TypeError(msg)
