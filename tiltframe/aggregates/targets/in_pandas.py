"""The registry's primitives in pandas: how each state column is built from a group's events (``BUILD``:
continuous queries' windows) and how a group of partial values merges (``GROUP_MERGE``: merge on read in
retrieval, continuous queries' windows), and ``PandasOps`` for the finalize and combine functions.
``NOT_MERGED`` names what pandas leaves to another part (``tests/aggregates/test_targets.py`` holds every
target to every primitive).

The sketch libraries are imported when a sketch is built or merged, not with this module: a read of numbers
alone (``tiltframe query``) need not load them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from tiltframe.aggregates.states import Build, Merge


class PandasOps:
    """The ``Ops`` of finalize and combine functions for pandas Series."""

    @staticmethod
    def div(a: Any, b: Any) -> Any:
        with np.errstate(divide="ignore", invalid="ignore"):
            return pd.Series(a, dtype="float64") / pd.Series(b, dtype="float64")

    @staticmethod
    def where(cond: Any, a: Any, b: Any) -> Any:
        keep = pd.Series(cond).astype("boolean").fillna(False).to_numpy(dtype=bool)
        return pd.Series(a).where(keep, pd.Series(b))

    @staticmethod
    def isnull(a: Any) -> Any:
        return pd.Series(a).isna()

    @staticmethod
    def sqrt(a: Any) -> Any:
        return np.sqrt(pd.Series(a, dtype="float64"))

    @staticmethod
    def coalesce(a: Any, value: int) -> Any:
        series = pd.Series(a)
        return series.where(series.notna(), value)

    @staticmethod
    def apply(fn: Callable[[Any], Any], a: Any) -> Any:
        return pd.Series([None if v is None else fn(v) for v in a], index=getattr(a, "index", None), dtype=object)


@dataclass(frozen=True, slots=True)
class BuildInput:
    """What a build reads: the events (one row each) and the same grouped by the keys (``grouped``, made
    once for every state), the column of the aggregate's argument (None only for ``count()``), the columns
    of the event time and of the arrival position, the batch that stands for the arrival batch of
    first/last tie-breaks, the field of the event an earliest or latest state keeps, the state's merge kind
    (which sketch) and the function's settings."""

    events: pd.DataFrame
    grouped: Any
    arg: str | None
    ts: str
    seq: str
    batch: int
    field: str | None = None
    merge: Merge | None = None
    settings: Mapping[str, Any] | None = None

    @property
    def column(self) -> str:
        if self.arg is None:
            msg = "this aggregate needs an argument"
            raise ValueError(msg)
        return self.arg

    @property
    def values(self) -> Any:
        """The argument's values per group."""
        return self.grouped[self.column]


def _event_field(b: BuildInput, *, latest: bool) -> pd.Series:
    """Per group (in order of first appearance), a field of the earliest or latest event with a non-null
    argument by (event time, arrival); NaN for a group without one."""
    events, arg = b.events, b.column
    groups = b.grouped.ngroup()
    ranked = pd.DataFrame({"g": groups, "ts": events[b.ts], "batch": b.batch, "seq": events[b.seq],
                           "value": events[arg]})[events[arg].notna().to_numpy()]
    ranked = ranked.sort_values(["g", "ts", "seq"], kind="stable")
    picked = ranked.groupby("g").tail(1) if latest else ranked.groupby("g").head(1)
    return picked.set_index("g")[b.field or "value"].reindex(range(groups.max() + 1 if len(groups) else 0))


def _sketch(b: BuildInput) -> pd.Series:
    from tiltframe.aggregates.sketches.stored import BUILD as SKETCHES

    assert b.merge is not None and b.settings is not None
    build, settings = SKETCHES[b.merge], b.settings
    return b.values.agg(lambda v: build(v.dropna().to_numpy(), settings))


#: Each build primitive as a pandas group operation over a group's events, one value per group.
BUILD: dict[Build, Callable[[BuildInput], pd.Series]] = {
    Build.COUNT: lambda b: b.grouped[b.arg].count() if b.arg is not None else b.grouped.size(),
    Build.SUM: lambda b: b.values.sum(min_count=1),
    Build.MIN: lambda b: b.values.min(),
    Build.MAX: lambda b: b.values.max(),
    Build.MEAN: lambda b: b.values.mean(),
    Build.M2: lambda b: b.values.var(ddof=0) * b.values.count(),
    Build.COLLECT: lambda b: b.values.agg(lambda v: v.dropna().tolist()),
    Build.EARLIEST: lambda b: _event_field(b, latest=False),
    Build.LATEST: lambda b: _event_field(b, latest=True),
    Build.HLL: _sketch,
    Build.KLL: _sketch,
    Build.DDS: _sketch,
    Build.HDR: _sketch,
}
NOT_BUILT: dict[Build, str] = {}


def _missing(value: Any) -> bool:
    return isinstance(value, float) and np.isnan(value)


def _concat(values: pd.Series) -> list[Any]:
    """Lists (or arrays, back from Arrow) joined, in row order."""
    return [v for part in values if part is not None and not _missing(part) for v in part]


def _fold(kind: Merge) -> Callable[[pd.Series], Any]:
    """A group's sketch binaries merged by the sketch library."""

    def fold(values: pd.Series) -> Any:
        from tiltframe.aggregates.sketches.stored import MERGE

        return functools.reduce(MERGE[kind], values)

    return fold


#: Each merge primitive as a pandas aggregation of a group's partial values of one state column (a name
#: ``groupby().agg()`` knows, or a function of the group's values).
GROUP_MERGE: dict[Merge, str | Callable[[pd.Series], Any]] = {
    Merge.SUM: "sum",
    Merge.MIN: "min",
    Merge.MAX: "max",
    Merge.CONCAT: _concat,
    Merge.HLL: _fold(Merge.HLL),
    Merge.KLL: _fold(Merge.KLL),
    Merge.DDS: _fold(Merge.DDS),
    Merge.HDR: _fold(Merge.HDR),
}
NOT_MERGED: dict[Merge, str] = {
    Merge.COMBINE: "a function's states fold together through its combine over PandasOps (pandas_merges.py)",
    Merge.EARLIEST: "one event's fields merge together: the earliest row by (ts, batch, seq) (pandas_merges.py)",
    Merge.LATEST: "one event's fields merge together: the latest row by (ts, batch, seq) (pandas_merges.py)",
}
