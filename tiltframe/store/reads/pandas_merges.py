"""Merge partial rows that share a bucket and key, and finalize them, in pandas.

Rows can repeat a key when several writers (shards) store partials of the same bucket; merging on read
means users never see partial rows.  The registry's ``Merge`` primitives, ``combine`` and finalize
functions are applied here with pandas operations; nothing about any function is re-derived.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from tiltframe.aggregates.layout import AGG_EVENT_TIMESTAMP, AGG_TIMESTAMP, AggregationLayout, StateColumn
from tiltframe.aggregates.registry import EVENT_ORDER
from tiltframe.aggregates.states import LONG_MAX, LONG_MIN, Merge
from tiltframe.aggregates.targets.in_pandas import GROUP_MERGE, PandasOps
from tiltframe.errors import DataError


def numbered(frame: pd.DataFrame) -> bool:
    """Rows indexed 0..n-1 already (a store's read), so that resetting the index would only copy them."""
    index = frame.index
    return isinstance(index, pd.RangeIndex) and index.start == 0 and index.step == 1


def merge_rows(rows: pd.DataFrame, layout: AggregationLayout) -> pd.DataFrame:
    """One row per (bucket, keys): partial states merged, latest-event values from the latest row."""
    keys = list(layout.key_names)
    if _distinct(rows, keys):
        return rows if numbered(rows) else rows.reset_index(drop=True)
    order = list(layout.order_columns)
    rows = rows.sort_values([*keys, *order], kind="stable").reset_index(drop=True)
    grouped = rows.groupby(keys, sort=False, dropna=False)
    spec: dict[str, Any] = {}
    for columns in layout.state_groups:
        for s in columns:
            if s.merge in GROUP_MERGE:
                spec[s.name] = GROUP_MERGE[s.merge]
    # Sorted by the event order, the last row of a group is its latest event.
    spec.update(dict.fromkeys([*order, *(v.name for v in layout.values)], "last"))
    if not layout.tracks_arrival:
        spec[AGG_EVENT_TIMESTAMP] = "max"
    merged = grouped.agg(spec).reset_index()
    _check_long_sums(rows, keys, grouped, layout)
    # A sum over rows that all lack a state (a measure added after they were stored) has no value, as in SQL.
    sums = [s.name for columns in layout.state_groups for s in columns
            if s.merge is Merge.SUM and rows[s.name].isna().any()]
    if sums:
        present = grouped[sums].count().to_numpy() > 0
        for i, name in enumerate(sums):
            merged[name] = merged[name].where(present[:, i])
    for columns in layout.state_groups:
        if columns[0].function.combine is not None:
            folded = _combine_groups(rows, keys, columns)
            for s in columns:
                merged[s.name] = folded[s.name].to_numpy()
        for kind in (Merge.EARLIEST, Merge.LATEST):
            event = {s.state.field: s.name for s in columns if s.merge is kind}
            if event:
                picked = _pick_event(rows, keys, [event[f] for f in EVENT_ORDER], latest=kind is Merge.LATEST)
                for name in event.values():
                    merged[name] = picked[name].to_numpy()
    return merged


def _check_long_sums(rows: pd.DataFrame, keys: list[str], grouped: Any, layout: AggregationLayout) -> None:
    """Refuse a long sum beyond 64 bits, which pandas would wrap around into another number.  Only the
    groups that could reach it (their row count times their largest magnitude) are added exactly."""
    names = [s.name for columns in layout.state_groups if columns[0].function.combine is None
             for s in columns if s.merge is Merge.SUM and s.type.is_integral]
    if not names:
        return
    group = grouped.ngroup().to_numpy()
    sizes = np.bincount(group)
    for name in names:
        magnitude = rows[name].astype("float64").abs().fillna(0).to_numpy()
        largest = np.zeros(len(sizes))
        np.maximum.at(largest, group, magnitude)
        doubtful = np.flatnonzero(largest * sizes >= 2.0**62)
        if not len(doubtful):
            continue
        chosen = np.isin(group, doubtful)
        exact: dict[int, int] = {}
        for g, value in zip(group[chosen], rows[name].to_numpy()[chosen], strict=True):
            if not pd.isna(value):
                exact[g] = exact.get(g, 0) + int(value)
        beyond = [(g, total) for g, total in exact.items() if not LONG_MIN <= total <= LONG_MAX]
        if beyond:
            g, total = beyond[0]
            row = rows.iloc[int(np.flatnonzero(group == g)[0])]
            where = ", ".join(f"{k} {row[k].item() if isinstance(row[k], np.generic) else row[k]!r}" for k in keys)
            msg = (f"aggregation {layout.name}: the sum {name} of the partial rows at {where} is {total}, beyond "
                   f"the 64-bit range of a long ({LONG_MIN} .. {LONG_MAX}); a sum that large needs a double "
                   f"attribute")
            raise DataError(msg)


def _distinct(rows: pd.DataFrame, keys: list[str]) -> bool:
    """No two rows share a bucket and key; at once when the buckets increase strictly (one key's rows)."""
    buckets = rows[AGG_TIMESTAMP].to_numpy()
    if len(buckets) < 2 or bool((buckets[1:] > buckets[:-1]).all()):
        return True
    return not rows.duplicated(keys).any()


def _pick_event(rows: pd.DataFrame, keys: list[str], order: list[str], *, latest: bool) -> pd.DataFrame:
    """Per group (in order of first appearance), the row of the earliest or latest event by ``order``;
    rows without an event (NULL time) sort to the losing end."""
    ranked = rows.assign(_group=rows.groupby(keys, sort=False, dropna=False).ngroup())
    ranked = ranked.sort_values(["_group", *order], na_position="first" if latest else "last", kind="stable")
    chosen = ranked.groupby("_group", sort=True).tail(1) if latest else ranked.groupby("_group", sort=True).head(1)
    return chosen.sort_values("_group").reset_index(drop=True)


def _combine_groups(rows: pd.DataFrame, keys: list[str], columns: tuple[StateColumn, ...]) -> pd.DataFrame:
    """The states of ``columns`` folded per group with the function's ``combine``, vectorized: each round
    merges rows 2k and 2k+1 of every group, so a group of n rows takes log2(n) rounds.  Groups come out
    in order of first appearance, as ``groupby(sort=False)`` gives them."""
    combine = columns[0].function.combine
    assert combine is not None
    names = {s.state.suffix: s.name for s in columns}
    frame = pd.DataFrame({suffix: rows[name].to_numpy() for suffix, name in names.items()})
    frame["_group"] = rows.groupby(keys, sort=False, dropna=False).ngroup().to_numpy()
    while True:
        rank = frame.groupby("_group").cumcount().to_numpy()
        size = frame.groupby("_group")["_group"].transform("size").to_numpy()
        if size.max() <= 1:
            break
        left = frame[(rank % 2 == 0) & (rank + 1 < size)].reset_index(drop=True)
        right = frame[rank % 2 == 1].reset_index(drop=True)
        merged = pd.DataFrame(combine({k: left[k] for k in names}, {k: right[k] for k in names}, PandasOps()))
        merged["_group"] = left["_group"]
        alone = frame[(rank % 2 == 0) & (rank + 1 >= size)]
        frame = pd.concat([merged, alone], ignore_index=True).sort_values("_group", kind="stable")
    frame = frame.sort_values("_group").reset_index(drop=True)
    return frame.rename(columns=names)


def finalize(rows: pd.DataFrame, layout: AggregationLayout) -> pd.DataFrame:
    """Final values by output name: AGG_TIMESTAMP, keys, aggregates (avg = sum / count), values."""
    out: dict[str, Any] = {AGG_TIMESTAMP: rows[AGG_TIMESTAMP].to_numpy(dtype="int64")}
    for k in layout.keys:
        out[k.name] = rows[k.name].array
    types = layout.output_types
    for alias, value in layout.finalized(rows, PandasOps()).items():
        if isinstance(value, pd.Series) and isinstance(value.dtype, pd.Int64Dtype):
            out[alias] = value.array  # exact: NumPy would carry a long beside NULLs as a double
            continue
        values = np.asarray(value)
        if values.dtype == object and types[alias].is_numeric:  # read from sketches: NULL-able numbers
            values = pd.array(values, dtype="Int64" if types[alias].is_integral else "Float64")
        elif values.dtype.kind == "f" and types[alias].is_integral:  # a long min or max with NaN for NULL
            values = pd.array(values, dtype="Int64")
        out[alias] = values
    for name in (*(v.name for v in layout.values), AGG_EVENT_TIMESTAMP):
        out[name] = rows[name].array
    # One frame from columns of one length: building it column by column cost more than a small answer.
    return pd.DataFrame(out, index=pd.RangeIndex(len(rows)), copy=False)
