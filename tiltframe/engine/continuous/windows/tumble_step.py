"""Tumble windows in a continuous query's processor: an event in the one window ``[start, start + size)``
holding it."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import pandas as pd

from tiltframe.aggregates.layout import AGG_TIMESTAMP
from tiltframe.engine.continuous.columns import WE, WS
from tiltframe.engine.continuous.windows.hop_step import HopStep
from tiltframe.model.windows import TumbleWindow
from tiltframe.retrieval.pandas_states import TS


class TumbleStep(HopStep):
    """One processor call of a tumble window query: a hop whose slide is its size (the late rule is the
    hop's), with each event in one window."""

    window: TumbleWindow  # type: ignore[assignment]
    which: ClassVar[tuple[str, str]] = ("its window", "")

    @property
    def slide(self) -> int:
        return self.size

    def _assign(self, events: pd.DataFrame) -> pd.DataFrame:
        ts = events[TS].to_numpy(dtype="int64")
        size = self.size
        start = ts - np.mod(ts, size)
        return events.assign(**{AGG_TIMESTAMP: start, WS: start, WE: start + size})
