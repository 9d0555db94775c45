"""A tumble window: ``tumble(stream, [time column,] size)``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from tiltframe.model.windows.base import Window


@dataclass(frozen=True, slots=True, repr=False)
class TumbleWindow(Window):
    """Back-to-back windows ``[start, start + size)``, ``start`` a multiple of the size."""

    size_ms: int | None = None

    kind: ClassVar[str] = "tumble"
    needed: ClassVar[tuple[str, ...]] = ("size",)

    def sizes(self) -> tuple[tuple[str, int | None], ...]:
        return (("size", self.size_ms),)
