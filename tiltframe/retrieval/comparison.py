"""Stored rows against rows recomputed from the raw events, bucket by bucket and key by key
(``tiltframe verify``): what differs, allowing for what may differ.

Counts, integer sums, minimums, maximums, texts and the latest event's values must be equal.  Sums and
means of doubles may differ in their last bits (merged in another order): they are held to a relative
1e-7.  Sketches estimate: a distinct count within three standard errors of its HLL sketch, a DDSketch
quantile within twice its relative accuracy, an HDR percentile within twice its relative bin width, and a
KLL quantile as long as its rank in the recomputed sketch is within three times the sketch's rank error of
the quantile asked for.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import datasketches as ds
import numpy as np
import pandas as pd

from tiltframe.aggregates.layout import AGG_EVENT_TIMESTAMP, AGG_TIMESTAMP, AggregationLayout
from tiltframe.aggregates.registry import get
from tiltframe.aggregates.sketches import hdr

__all__ = ["Difference", "compare", "incomplete_before"]

#: Relative difference allowed between two double results merged in different orders.
DOUBLE_TOLERANCE = 1e-7


@dataclass(frozen=True, slots=True)
class Difference:
    """One value that differs: ``column`` None for a whole row present on one side only."""

    level: str
    bucket: int
    key: tuple[Any, ...]
    column: str | None
    stored: Any
    recomputed: Any


@dataclass(frozen=True, slots=True)
class Allowance:
    """How far a stored value may be from the recomputed one: equal (neither set), within a relative
    ``tolerance``, or (a KLL quantile ``q``) within the rank error of the recomputed sketch in ``state``."""

    tolerance: float | None = None
    state: str | None = None
    q: float = 0.0


def checks(layout: AggregationLayout) -> dict[str, Allowance]:
    """How each output of ``layout`` is compared (outputs absent here are compared exactly)."""
    out: dict[str, Allowance] = {}
    for item in layout.spec.aggregates:
        fn, settings = get(item.function), layout.settings(item)
        names = fn.output_names(item.alias, settings)
        merges = {s.merge.name for s in fn.states}
        if "KLL" in merges:
            quantiles = zip(names, settings["quantiles"], strict=True)
            out.update({n: Allowance(state=f"{item.alias}_KLL", q=q) for n, q in quantiles})
        elif "DDS" in merges:
            out.update(dict.fromkeys(names, Allowance(2 * settings["relative_accuracy"])))
        elif "HDR" in merges:
            out.update(dict.fromkeys(names, Allowance(2 / hdr.shape(settings["digits"]).half_count)))
        elif "HLL" in merges:
            out.update(dict.fromkeys(names, Allowance(3 * 1.04 / math.sqrt(2 ** settings["lg_k"]))))
        else:
            result = layout.output_types[names[0]]
            if result.is_numeric and not result.is_integral:
                out.update(dict.fromkeys(names, Allowance(DOUBLE_TOLERANCE)))
    return out


def incomplete_before(layout: AggregationLayout, complete_from: Mapping[str, int]) -> dict[str, int]:
    """Per output of a measure added to a stored rollup: the bucket start before which it reads NULL (what
    ``compare``'s ``skip`` takes)."""
    return {out: at for measure, at in complete_from.items() for out in layout.outputs_of(measure)}


def compare(level: str, stored: pd.DataFrame, recomputed: pd.DataFrame, layout: AggregationLayout,
            skip: Mapping[str, int] | None = None) -> list[Difference]:
    """The differences between two frames of final values of one level (``finalize``'s columns; the
    recomputed one may carry its states too, which KLL checks read), row by row and column by column.
    ``skip``: per output, the bucket start before which it is not compared (a measure added later reads
    NULL there).  Whole columns are compared at once: a level holds millions of rows, few of which differ."""
    keys = list(layout.key_names)
    outputs = [c for c in stored.columns if c not in keys and c != AGG_EVENT_TIMESTAMP]
    both = stored.merge(recomputed, on=keys, how="outer", suffixes=("", "__r"), indicator=True).reset_index(drop=True)
    buckets = both[AGG_TIMESTAMP].to_numpy()
    compared = checks(layout)
    found: list[tuple[int, int, Difference]] = []

    def key_of(i: int) -> tuple[Any, ...]:
        return tuple(_native(both.at[i, k]) for k in keys[1:])

    matched = (both["_merge"] == "both").to_numpy()
    for i in np.flatnonzero(~matched):
        present = both.at[i, "_merge"] == "left_only"
        found.append((int(i), -1, Difference(level, int(buckets[i]), key_of(i), None, "row" if present else None,
                                             None if present else "row")))
    for n, column in enumerate(outputs):
        a, b = both[column], both[f"{column}__r"]
        a_missing, b_missing = a.isna().to_numpy(), b.isna().to_numpy()
        present = matched & ~a_missing & ~b_missing
        differs = matched & (a_missing != b_missing)
        differs[present] = ~_agree(a[present], b[present], both.loc[present], compared.get(column))
        if skip and column in skip:
            differs &= buckets >= skip[column]
        for i in np.flatnonzero(differs):
            found.append((int(i), n, Difference(level, int(buckets[i]), key_of(i), column,
                                                None if a_missing[i] else _native(a.iat[i]),
                                                None if b_missing[i] else _native(b.iat[i]))))
    return [d for _, _, d in sorted(found, key=lambda f: (f[0], f[1]))]


def _agree(a: pd.Series, b: pd.Series, rows: pd.DataFrame, allowance: Allowance | None) -> np.ndarray:
    """Per row: whether stored ``a`` may stand for recomputed ``b`` (both present)."""
    if a.empty:
        return np.zeros(0, dtype=bool)
    if allowance is None:
        return np.asarray(a.to_numpy(dtype=object) == b.to_numpy(dtype=object), dtype=bool)
    if allowance.tolerance is not None:
        x, y = a.to_numpy(dtype=float), b.to_numpy(dtype=float)
        return np.abs(x - y) <= allowance.tolerance * np.maximum(np.maximum(np.abs(x), np.abs(y)), 1e-300)
    state = allowance.state if allowance.state in rows.columns else f"{allowance.state}__r"
    return np.array([_within_rank(value, sketch, allowance.q) for value, sketch in zip(a, rows[state], strict=True)],
                    dtype=bool)


def _within_rank(value: Any, state: Any, q: float) -> bool:
    """A KLL quantile: its rank in the recomputed sketch is within three rank errors of ``q``."""
    sketch = ds.kll_doubles_sketch.deserialize(bytes(state))
    error = 3 * ds.kll_doubles_sketch.get_normalized_rank_error(sketch.k, False)
    below, through = sketch.get_rank(float(value), False), sketch.get_rank(float(value), True)
    return below - error <= q <= through + error


def _native(value: Any) -> Any:
    """A numpy scalar as the Python value it holds (differences are printed and compared as such)."""
    return value.item() if isinstance(value, np.generic) else value
