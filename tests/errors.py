"""Assertions about definition errors: where they point and what they say, shared by the parser and
validation tests."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from tiltframe.errors import DefinitionError

#: Names that only lark knows; none may reach a user.
LARK_WORDS = re.compile(
    r"IDENTIFIER|COMMA|SEMICOLON|LPAR|RPAR|\$END|__ANON|Token\(|RULE|NUMBER|STRING|INTERVAL|SQL_STATEMENT"
)


def refused_at(
    parse: Callable[[str], object], text: str, marker: str, fragment: str, *, occurrence: int = 0
) -> DefinitionError:
    """``parse(text)`` fails at (the ``occurrence``-th) ``marker`` of ``text``, saying ``fragment``, with a
    snippet that points there and no word of the grammar's own."""
    with pytest.raises(DefinitionError) as caught:
        parse(text)
    error = caught.value
    offset = -1
    for _ in range(occurrence + 1):
        offset = text.index(marker, offset + 1)
    line = text.count("\n", 0, offset) + 1
    column = offset - (text.rfind("\n", 0, offset) + 1) + 1
    assert (error.line, error.column) == (line, column), str(error)
    assert fragment in str(error), str(error)
    assert error.snippet is not None and "^" in error.snippet
    assert not LARK_WORDS.search(str(error)), str(error)
    return error
