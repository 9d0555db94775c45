"""A session window: ``session(stream, [time column,] gap[, max length][, [start, end]])``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from tiltframe.errors import DefinitionError
from tiltframe.model.durations import ms_text
from tiltframe.model.expressions import Expr
from tiltframe.model.windows.base import Window


@dataclass(frozen=True, slots=True, repr=False)
class SessionWindow(Window):
    """Per key, events less than ``gap`` apart; with ``max_length`` a long session is cut into pieces."""

    gap_ms: int | None = None
    max_length_ms: int | None = None
    #: Start and end conditions (Proton's ``session(s, 5s, [start, end])``): a session starts at an event
    #: that meets ``start_condition`` and ends at one that meets ``end_condition`` (or after the gap);
    #: ``[`` / ``]`` keep the starting / ending event in the session, ``(`` / ``)`` leave it out.
    start_condition: Expr | None = None
    end_condition: Expr | None = None
    start_inclusive: bool = True
    end_inclusive: bool = True

    kind: ClassVar[str] = "session"
    needed: ClassVar[tuple[str, ...]] = ("gap",)

    @property
    def is_bounded(self) -> bool:
        return self.start_condition is not None

    @property
    def conditions(self) -> tuple[Expr, Expr] | None:
        if self.start_condition is None or self.end_condition is None:
            return None
        return self.start_condition, self.end_condition

    def sizes(self) -> tuple[tuple[str, int | None], ...]:
        return (("gap", self.gap_ms), ("max_length", self.max_length_ms))

    def check(self) -> None:
        Window.check(self)
        if self.max_length_ms is None:
            return
        if self.is_bounded:
            msg = (
                "a session with start and end conditions takes no max length (not supported): it ends at its end "
                "condition or after the gap"
            )
            raise DefinitionError.at(msg, self.pos_of("max_length"))
        assert self.gap_ms is not None
        if self.max_length_ms <= self.gap_ms:
            msg = (
                f"the max length of a session ({ms_text(self.max_length_ms)}) must be longer than its gap "
                f"({ms_text(self.gap_ms)})"
            )
            raise DefinitionError.at(msg, self.pos_of("max_length"))
