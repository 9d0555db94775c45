"""Stored rows against rows recomputed from the raw events, bucket by bucket and key by key
(``tiltframe verify``): what differs, allowing for what may differ.

Counts, integer sums, minimums, maximums, texts and the latest event's values must be equal.  Sums and
means of doubles may differ in their last bits (merged in another order): they are held to a relative
1e-7.  Sketches estimate: a distinct count within three standard errors of its HLL sketch, a DDSketch
quantile within twice its relative accuracy, and a KLL quantile as long as its rank in the recomputed
sketch is within three times the sketch's rank error of the quantile asked for.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import datasketches as ds
import pandas as pd

from tiltframe.functions.registry import get
from tiltframe.store.layout import AGG_EVENT_TIMESTAMP, AGG_TIMESTAMP, AggregationLayout

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


#: ``agrees(stored, recomputed, recomputed_row)``: whether a stored value may stand for the recomputed one.
Check = Callable[[Any, Any, Mapping[str, Any]], bool]


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA


def _exact(a: Any, b: Any, _: Mapping[str, Any]) -> bool:
    return bool(a == b)


def _relative(tolerance: float) -> Check:
    def close(a: Any, b: Any, _: Mapping[str, Any]) -> bool:
        return abs(float(a) - float(b)) <= tolerance * max(abs(float(a)), abs(float(b)), 1e-300)
    return close


def _kll_rank(state: str, q: float) -> Check:
    def within(a: Any, _: Any, row: Mapping[str, Any]) -> bool:
        sketch = ds.kll_doubles_sketch.deserialize(bytes(row[state]))
        error = 3 * ds.kll_doubles_sketch.get_normalized_rank_error(sketch.k, False)
        below, through = sketch.get_rank(float(a), False), sketch.get_rank(float(a), True)
        return below - error <= q <= through + error
    return within


def checks(layout: AggregationLayout) -> dict[str, Check]:
    """How each output of ``layout`` is compared (outputs absent here are compared exactly)."""
    out: dict[str, Check] = {}
    for item in layout.spec.aggregates:
        fn, settings = get(item.function), layout.settings(item)
        names = fn.output_names(item.alias, settings)
        merges = {s.merge.name for s in fn.states}
        if "KLL" in merges:
            quantiles = zip(names, settings["quantiles"], strict=True)
            out.update({n: _kll_rank(f"{item.alias}_KLL", q) for n, q in quantiles})
        elif "DDS" in merges:
            out.update(dict.fromkeys(names, _relative(2 * settings["relative_accuracy"])))
        elif "HLL" in merges:
            out.update(dict.fromkeys(names, _relative(3 * 1.04 / math.sqrt(2 ** settings["lg_k"]))))
        else:
            result = layout.output_types[names[0]]
            if result.is_numeric and not result.is_integral:
                out.update(dict.fromkeys(names, _relative(DOUBLE_TOLERANCE)))
    return out


def incomplete_before(layout: AggregationLayout, complete_from: Mapping[str, int]) -> dict[str, int]:
    """Per output of a measure added to a stored rollup: the bucket start before which it reads NULL (what
    ``compare``'s ``skip`` takes)."""
    return {out: at for measure, at in complete_from.items() for out in layout.outputs_of(measure)}


def compare(level: str, stored: pd.DataFrame, recomputed: pd.DataFrame, layout: AggregationLayout,
            skip: Mapping[str, int] | None = None) -> list[Difference]:
    """The differences between two frames of final values of one level (``finalize``'s columns; the
    recomputed one may carry its states too, which KLL checks read).  ``skip``: per output, the bucket
    start before which it is not compared (a measure added later reads NULL there)."""
    keys = list(layout.key_names)
    outputs = [c for c in stored.columns if c not in keys and c != AGG_EVENT_TIMESTAMP]
    both = stored.merge(recomputed, on=keys, how="outer", suffixes=("", "__r"), indicator=True)
    compared = checks(layout)
    found: list[Difference] = []
    for row in both.to_dict("records"):
        bucket, key = int(row[AGG_TIMESTAMP]), tuple(row[k] for k in keys[1:])
        if row["_merge"] != "both":
            present = row["_merge"] == "left_only"
            found.append(Difference(level, bucket, key, None, "row" if present else None,
                                    None if present else "row"))
            continue
        recomputed_row = {**row, **{c[:-3]: row[c] for c in row if c.endswith("__r")}}
        for column in outputs:
            if skip and column in skip and bucket < skip[column]:
                continue
            a, b = row[column], row[f"{column}__r"]
            if _missing(a) and _missing(b):
                continue
            if _missing(a) or _missing(b) or not compared.get(column, _exact)(a, b, recomputed_row):
                found.append(Difference(level, bucket, key, column, None if _missing(a) else a,
                                        None if _missing(b) else b))
    return found
