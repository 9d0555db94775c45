"""Hop windows in a continuous query's processor: an event in every window ``[start, start + size)`` whose
start, a multiple of the slide, is within ``size`` before it."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import pandas as pd

from tiltframe.aggregates.layout import AGG_TIMESTAMP
from tiltframe.engine.continuous.columns import WE, WS, text_of
from tiltframe.engine.continuous.step import Step
from tiltframe.model.windows import HopWindow
from tiltframe.retrieval.pandas_states import TS


class HopStep(Step):
    """One processor call of a hop window query (``tumble.TumbleStep`` the hop whose slide is its size)."""

    window: HopWindow  # type: ignore[assignment]
    #: How a late event's reason names the window that closed, and what becomes of it.
    which: ClassVar[tuple[str, str]] = ("its earliest window", " into none of its windows")

    @property
    def size(self) -> int:
        return int(self.window.size_ms or 0)

    @property
    def slide(self) -> int:
        return int(self.window.slide_ms or self.size)

    def _assign(self, events: pd.DataFrame) -> pd.DataFrame:
        ts = events[TS].to_numpy(dtype="int64")
        size, slide = self.size, int(self.window.slide_ms or 0)
        last = np.floor_divide(ts, slide)
        first = np.floor_divide(ts - size, slide) + 1
        counts = np.maximum(last - first + 1, 0).astype("int64")
        if slide > size and (counts == 0).any():  # a sampling hop: between two windows, in none
            between = counts == 0
            after = text_of(last[between] * slide + size)
            self._records("unwindowed", events[between], (
                "event time " + text_of(ts[between]) + " falls between the windows ending at " + after
                + " and starting at " + text_of((last[between] + 1) * slide)
                + f" (the hop's slide {slide} ms is longer than its size {size} ms: it samples); not aggregated"))
        repeated = events.loc[events.index.repeat(counts)].copy()
        offsets = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
        start = (np.repeat(first, counts) + offsets) * slide
        repeated[AGG_TIMESTAMP] = start
        repeated[WS] = start
        repeated[WE] = start + size
        return repeated.reset_index(drop=True)

    def _late_mark(self, base: np.ndarray) -> np.ndarray:
        """The end of the last window that the greatest event time minus the delay closed (Proton's
        ``HopWatermarkStamper``, ``TumbleWatermarkStamper``): an event is late when its window (a hop's
        earliest) has closed, and then goes into none of its windows, not even those still open."""
        size, slide = self.size, self.slide
        return np.floor_divide(base - size, slide) * slide + size

    def _late_reasons(self, at: np.ndarray, held: np.ndarray, tail: str) -> np.ndarray:
        size, slide = self.size, self.slide
        first = (np.floor_divide(at - size, slide) + 1) * slide
        which, into = self.which
        return np.asarray(
            f"{which} [" + text_of(first) + ", " + text_of(first + size) + ") has closed: event time " + text_of(at)
            + " is below the watermark " + text_of(held) + ", the end of the last window closed by " + tail + into,
            dtype=object)
