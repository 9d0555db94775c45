"""A count window (Tremor's size-based window): ``tumble(stream, 100 events)``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from tiltframe.model.windows.base import Window

_DELAY = (
    "a window of N events closes on its Nth event, so WITH DELAY has nothing to wait for; "
    "AND TIMEOUT closes a window that stays unfinished"
)


@dataclass(frozen=True, slots=True, repr=False)
class CountWindow(Window):
    """Per group, every ``count`` events form a window, closed by its last event (no watermark)."""

    count: int | None = None

    kind: ClassVar[str] = "count"
    closes_by_watermark: ClassVar[bool] = False
    needed: ClassVar[tuple[str, ...]] = ("count",)

    def sizes(self) -> tuple[tuple[str, int | None], ...]:
        return (("count", self.count),)

    def refuse_emit(self, policy: str, *, changelog: bool, given: tuple[str, ...]) -> tuple[str, str] | None:
        return (_DELAY, "delay") if "delay" in given else None
