"""A global aggregation: ``FROM stream``, the whole stream with no window."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from tiltframe.model.windows.base import Window


@dataclass(frozen=True, slots=True, repr=False)
class GlobalWindow(Window):
    """The whole stream: one row per group, emitted PERIODIC, ON UPDATE or AFTER KEY EXPIRE."""

    kind: ClassVar[str] = "global"
    is_windowed: ClassVar[bool] = False
    closes_by_watermark: ClassVar[bool] = False
