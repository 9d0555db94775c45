"""The definition language: SiddhiQL text (and streaming SQL continuous queries) in, validated spec out."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tiltframe import lazy

if TYPE_CHECKING:
    from tiltframe.lang.siddhiql.parser import (
        parse_app,
        parse_continuous,
        parse_expression,
        parse_query,
        parse_retrieval,
    )

__all__ = ["parse_app", "parse_continuous", "parse_expression", "parse_query", "parse_retrieval"]

# The parser (lark, its grammar) is imported when first used: the checks a Spark worker's modules import
# (tiltframe.lang.checks) need none of it (tiltframe.lazy).
__getattr__, __dir__ = lazy.exports(__name__, lazy.names_in("tiltframe.lang.siddhiql.parser", __all__))
