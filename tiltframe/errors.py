"""The error hierarchy of tiltframe.

Every message says what is wrong, where, what was found and what was expected, so that the CLI, the
rejected-events table and the Python API all show the same text.  The CLI maps the two families to exit
codes: :class:`DefinitionError` (and :class:`UsageError`) exit 2, every other :class:`TiltframeError` 1.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Protocol, Self


class _Located(Protocol):
    """A source position (``tiltframe.model.expressions.Pos``): 1-based line and column."""

    @property
    def line(self) -> int: ...

    @property
    def column(self) -> int: ...


class TiltframeError(Exception):
    """Root of every error tiltframe raises on purpose."""


class DefinitionError(TiltframeError):
    """An app text, a Python-built spec or a query is invalid.

    ``line`` and ``column`` are 1-based and point into the text the error came from (when there is one).
    """

    def __init__(
        self,
        message: str,
        *,
        line: int | None = None,
        column: int | None = None,
        snippet: str | None = None,
    ) -> None:
        self.message = message
        self.line = line
        self.column = column
        self.snippet = snippet
        where = f" at line {line}, column {column}" if line is not None and column is not None else ""
        text = f"{message}{where}"
        if snippet:
            text = f"{text}\n{snippet}"
        super().__init__(text)

    @classmethod
    def at(cls, message: str, pos: _Located | None) -> Self:
        """The error pointing at ``pos``, where the spec part came from a text (None: built in Python)."""
        return cls(message, line=pos.line if pos else None, column=pos.column if pos else None)


class NotSupportedYet(DefinitionError):
    """The definition asks for a feature whose behaviour is not built yet.

    Raised instead of silently ignoring an annotation, so that nobody believes a policy is in force.
    """


class UsageError(TiltframeError):
    """The command line or a library call was used wrongly (bad option, missing input)."""


class QueryError(TiltframeError):
    """A retrieval cannot be answered as asked (bad range, unknown duration, ...)."""


class StoreError(TiltframeError):
    """The store failed or holds data that does not match the definition."""


class DataError(TiltframeError):
    """The events cannot be aggregated as defined (a sum of longs leaves a long's range): the run stops
    rather than store a wrong total."""


class EventRejected(TiltframeError):
    """One event could not be aggregated; kept in the rejected-events table with this reason."""

    def __init__(self, reason: str, field: str | None = None, value: object = None) -> None:
        self.reason = reason
        self.field = field
        self.value = value
        super().__init__(reason)


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """A ' — did you mean X?' suffix, or an empty string when nothing is close."""
    lowered = {c.lower(): c for c in choices}
    close = difflib.get_close_matches(word.lower(), list(lowered), n=1, cutoff=0.6)
    return f" — did you mean '{lowered[close[0]]}'?" if close else ""


def unknown(kind: str, word: str, choices: Iterable[str]) -> str:
    """Message for an unknown name: the kind, the word, the closest match and the valid names."""
    options = sorted(set(choices))
    if not options:
        return f"unknown {kind} '{word}' (there is no {kind} to choose from)"
    return f"unknown {kind} '{word}'{did_you_mean(word, options)} (expected one of: {', '.join(options)})"
