"""A global aggregation in a continuous query's processor: one group per key, never closed by time."""

from __future__ import annotations

import numpy as np
import pandas as pd

from tiltframe.aggregates.layout import AGG_TIMESTAMP
from tiltframe.engine.continuous.columns import WE, WS
from tiltframe.engine.continuous.step import Step


class GlobalStep(Step):
    """One processor call of a global aggregation: every event in its key's one group, with no window
    columns."""

    def _assign(self, events: pd.DataFrame) -> pd.DataFrame:
        return events.assign(**{AGG_TIMESTAMP: 0, WS: np.nan, WE: np.nan})
