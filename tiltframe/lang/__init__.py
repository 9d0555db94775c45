"""The definition language: SiddhiQL text (and streaming SQL continuous queries) in, validated spec out."""

from __future__ import annotations

from tiltframe.lang.parser import parse_app, parse_continuous, parse_expression, parse_query, parse_retrieval

__all__ = ["parse_app", "parse_continuous", "parse_expression", "parse_query", "parse_retrieval"]
