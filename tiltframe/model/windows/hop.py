"""A hop window: ``hop(stream, [time column,] slide, size)``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from tiltframe.model.windows.base import Window


@dataclass(frozen=True, slots=True, repr=False)
class HopWindow(Window):
    """Windows ``[start, start + size)`` starting at every multiple of the slide: overlapping when the slide
    is shorter than the size, sampling (events between two windows in none) when it is longer."""

    slide_ms: int | None = None
    size_ms: int | None = None

    kind: ClassVar[str] = "hop"
    needed: ClassVar[tuple[str, ...]] = ("slide", "size")

    def sizes(self) -> tuple[tuple[str, int | None], ...]:
        return (("size", self.size_ms), ("slide", self.slide_ms))
