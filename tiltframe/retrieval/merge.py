"""Merge partial rows that share a bucket and key, and finalize them, in pandas.

Rows can repeat a key when several writers (shards) store partials of the same bucket; merging on read
means users never see partial rows.  The registry's ``Merge`` primitives and finalize functions are
applied here with pandas operations; nothing about any function is re-derived.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from tiltframe.functions.registry import Merge
from tiltframe.store.layout import AGG_EVENT_TIMESTAMP, AGG_TIMESTAMP, AggregationLayout

_PANDAS_MERGE = {Merge.SUM: "sum", Merge.MIN: "min", Merge.MAX: "max"}


class PandasOps:
    """The ``Ops`` of finalize functions for pandas Series."""

    @staticmethod
    def div(a: Any, b: Any) -> Any:
        return pd.Series(a, dtype="float64") / pd.Series(b, dtype="float64")


def merge_rows(rows: pd.DataFrame, layout: AggregationLayout) -> pd.DataFrame:
    """One row per (bucket, keys): partial states merged, latest-event values from the latest row."""
    keys = list(layout.key_names)
    if rows.empty or not rows.duplicated(keys).any():
        return rows.reset_index(drop=True)
    order = list(layout.order_columns)
    rows = rows.sort_values([*keys, *order], kind="stable")
    grouped = rows.groupby(keys, sort=False, dropna=False)
    spec: dict[str, str] = {s.name: _PANDAS_MERGE[s.merge] for s in layout.states}
    # Sorted by the event order, the last row of a group is its latest event.
    spec.update(dict.fromkeys([*order, *(v.name for v in layout.values)], "last"))
    if not layout.tracks_arrival:
        spec[AGG_EVENT_TIMESTAMP] = "max"
    return grouped.agg(spec).reset_index()


def finalize(rows: pd.DataFrame, layout: AggregationLayout) -> pd.DataFrame:
    """Final values by output name: AGG_TIMESTAMP, keys, aggregates (avg = sum / count), values."""
    out = pd.DataFrame({AGG_TIMESTAMP: rows[AGG_TIMESTAMP].astype("int64")})
    for k in layout.keys:
        out[k.name] = rows[k.name]
    for alias, value in layout.finalized(rows, PandasOps()).items():
        out[alias] = np.asarray(value)
    for v in layout.values:
        out[v.name] = rows[v.name]
    out[AGG_EVENT_TIMESTAMP] = rows[AGG_EVENT_TIMESTAMP]
    return out
