"""Count windows (``tumble(s, N events)``) in a continuous query's processor: per group, every N events a
window, taken in arrival order; a window closes on its Nth event, so no event is late."""

from __future__ import annotations

import numpy as np
import pandas as pd

from tiltframe.aggregates.layout import AGG_COUNT, AGG_TIMESTAMP
from tiltframe.engine.continuous.columns import WE, WS, is_empty
from tiltframe.engine.continuous.step import Step
from tiltframe.model.windows import CountWindow
from tiltframe.retrieval.pandas_states import SEQ, TS


class CountStep(Step):
    """One processor call of a count window query."""

    window: CountWindow  # type: ignore[assignment]

    def _assign(self, events: pd.DataFrame) -> pd.DataFrame:
        """The events of each group in order, numbered on from the group's open window (``AGG_TIMESTAMP``
        0, holding fewer than N events); ``AGG_TIMESTAMP`` is the window's ordinal."""
        size = int(self.window.count or 1)
        ordered = events.sort_values([TS, SEQ], kind="stable").assign(**{AGG_TIMESTAMP: 0}).reset_index(drop=True)
        rank = ordered.groupby(self.keys, sort=False, dropna=False).cumcount().to_numpy()
        have = np.zeros(len(ordered), dtype="int64")
        if not is_empty(self.open):
            counts = self.open[[*self.keys, AGG_COUNT]]
            have = ordered[self.keys].merge(counts, on=self.keys, how="left")[AGG_COUNT].fillna(0).to_numpy("int64")
        ordered[AGG_TIMESTAMP] = (have + rank) // size
        ordered[WS] = ordered[TS]
        ordered[WE] = ordered[TS]
        return ordered

    def _closing(
        self, groups: pd.DataFrame, closed: np.ndarray, dirty: np.ndarray, timed_out: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """A window holding N events is closed."""
        return closed | (groups[AGG_COUNT] >= int(self.window.count or 1)).to_numpy(), dirty

    def _settled(self) -> None:
        """A group has one open count window left (the full ones closed): it is window 0 again."""
        assert self.open is not None
        self.open[AGG_TIMESTAMP] = 0
        if not is_empty(self.emitted):
            assert self.emitted is not None
            self.emitted[AGG_TIMESTAMP] = 0
