"""The registry's primitives on plain Python values, one partial state at a time: the state of one value
(``BUILD``), how two partial values of one state column merge (``MERGE``), how the state columns that merge
as one do (``MERGE_TOGETHER``: a combine function's, an event's fields), and ``PythonOps`` for the finalize
and combine functions.  ``Fold`` runs a registry function over them: Tremor's ``aggr::`` functions are
folds (``aggregates/trickle_stats.py``), one event and one tilt-frame merge at a time.

Adding a value is merging the state of that value alone, so each primitive's merge is written once and a
window's state is the same whether it took values or merged states.  Empty is ``None`` (the identity of
every merge); a fold takes every value it is given (Tremor's first and collect keep nulls), so leaving
out nulls, as SQL does, is the caller's part.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from tiltframe.aggregates import registry
from tiltframe.aggregates.registry import EVENT_ORDER, AggregateFunction, StateValues
from tiltframe.aggregates.states import Build, Merge


class PythonOps:
    """The ``Ops`` of finalize and combine functions for Python scalars; ``None`` is NULL."""

    @staticmethod
    def div(a: Any, b: Any) -> Any:
        return None if a is None or b is None or b == 0 else float(a) / b

    @staticmethod
    def where(cond: Any, a: Any, b: Any) -> Any:
        return a if cond else b

    @staticmethod
    def isnull(a: Any) -> bool:
        return a is None

    @staticmethod
    def coalesce(a: Any, value: int) -> Any:
        return value if a is None else a

    @staticmethod
    def sqrt(a: Any) -> Any:
        return None if a is None else math.sqrt(a)

    @staticmethod
    def apply(fn: Callable[[Any], Any], a: Any) -> Any:
        return None if a is None else fn(a)


def _sketch(kind: Merge) -> Callable[[Any, Mapping[str, Any]], Any]:
    def build(value: Any, settings: Mapping[str, Any]) -> Any:
        from tiltframe.aggregates.sketches.stored import BUILD as SKETCHES

        return SKETCHES[kind](np.asarray([value]), settings)

    return build


#: Each build primitive as the state of one value (for an earliest/latest state: the field it keeps of
#: the one event), with the function's settings.
BUILD: dict[Build, Callable[[Any, Mapping[str, Any]], Any]] = {
    Build.COUNT: lambda _v, _s: 1,
    Build.SUM: lambda v, _s: v,
    Build.MIN: lambda v, _s: v,
    Build.MAX: lambda v, _s: v,
    Build.MEAN: lambda v, _s: float(v),
    Build.M2: lambda _v, _s: 0.0,
    Build.EARLIEST: lambda v, _s: v,
    Build.LATEST: lambda v, _s: v,
    Build.COLLECT: lambda v, _s: [v],
    Build.HLL: _sketch(Merge.HLL),
    Build.KLL: _sketch(Merge.KLL),
    Build.DDS: _sketch(Merge.DDS),
    Build.HDR: _sketch(Merge.HDR),
}
NOT_BUILT: dict[Build, str] = {}


def _union(kind: Merge) -> Callable[[Any, Any], Any]:
    def merge(a: Any, b: Any) -> Any:
        from tiltframe.aggregates.sketches.stored import MERGE as SKETCHES

        return SKETCHES[kind](a, b)

    return merge


def _extend(a: list[Any], b: list[Any]) -> list[Any]:
    a.extend(b)
    return a


#: Each merge primitive of one state column as ``f(earlier, later)`` of two non-empty values (``Fold``
#: keeps the other side where one is empty).  ``min``/``max`` keep the earlier value on a tie.  A merge may
#: reuse the earlier value (a list is extended, not copied, so that a fold of n values costs n): a fold
#: owns its values, copying those of a state it starts from.
MERGE: dict[Merge, Callable[[Any, Any], Any]] = {
    Merge.SUM: lambda a, b: a + b,
    Merge.MIN: min,
    Merge.MAX: max,
    Merge.CONCAT: _extend,
    Merge.HLL: _union(Merge.HLL),
    Merge.KLL: _union(Merge.KLL),
    Merge.DDS: _union(Merge.DDS),
    Merge.HDR: _union(Merge.HDR),
}


def _combine(fn: AggregateFunction, a: StateValues, b: StateValues) -> dict[str, Any]:
    assert fn.combine is not None
    return fn.combine(a, b, PythonOps())


def _event(*, latest: bool) -> Callable[[AggregateFunction, StateValues, StateValues], dict[str, Any]]:
    """The fields of the earliest or latest of two events by (ts, batch, seq); on a full tie the earlier
    state's for the earliest and the later's for the latest, as the registry breaks ties by arrival (a fold
    whose events rank alike, as Tremor's, keeps the first and the last it was given)."""
    kind = Merge.LATEST if latest else Merge.EARLIEST

    def merge(fn: AggregateFunction, a: StateValues, b: StateValues) -> dict[str, Any]:
        rank = _rank(fn.name, kind)
        b_before = [b[s] for s in rank] < [a[s] for s in rank]
        return dict(a if b_before else b) if latest else dict(b if b_before else a)

    return merge


#: The merge primitives whose state columns merge as one, as ``f(function, earlier, later)`` over those
#: columns of two non-empty states.
MERGE_TOGETHER: dict[Merge, Callable[[AggregateFunction, StateValues, StateValues], dict[str, Any]]] = {
    Merge.COMBINE: _combine,
    Merge.EARLIEST: _event(latest=False),
    Merge.LATEST: _event(latest=True),
}
NOT_MERGED: dict[Merge, str] = {}


@functools.cache
def _function(name: str) -> AggregateFunction:
    return registry.get(name)


@functools.cache
def _rank(name: str, kind: Merge) -> tuple[str, ...]:
    """The state columns that rank the event an earliest or latest state keeps: its ts, batch and seq."""
    fields = {s.field: s.suffix for s in _function(name).states if s.merge is kind}
    return tuple(fields[f] for f in EVENT_ORDER)


@functools.cache
def _builds(name: str) -> tuple[tuple[str, Callable[[Any, Mapping[str, Any]], Any], int | None], ...]:
    """Each state column's suffix, build, and the place in an event's rank of the field it keeps (None: the
    value)."""
    return tuple((s.suffix, BUILD[s.build], None if s.field in (None, "value") else EVENT_ORDER.index(s.field))
                 for s in _function(name).states)


@functools.cache
def _plan(name: str) -> tuple[tuple[Merge, tuple[str, ...]], ...]:
    """A function's state columns by merge kind, in the order of its states."""
    kinds: dict[Merge, list[str]] = {}
    for state in _function(name).states:
        kinds.setdefault(state.merge, []).append(state.suffix)
    return tuple((kind, tuple(suffixes)) for kind, suffixes in kinds.items())


class Fold:
    """One registry function's partial state over Python values, built a value at a time (``add``) and
    merged with a later state (``merge``).  It keeps the function's name, not the function, so that it
    pickles (a Spark run keeps trickle's windows between micro-batches)."""

    __slots__ = ("name", "settings", "values")

    def __init__(self, name: str, settings: Mapping[str, Any] | None = None) -> None:
        self.name = _function(name).name
        self.settings = dict(settings or {})
        #: The state columns by suffix; None while empty.
        self.values: dict[str, Any] | None = None

    def add(self, value: Any, rank: tuple[int, int, int] = (0, 0, 0)) -> None:
        """Take one value; ``rank`` is its event's (ts, batch, seq), which first/last go by."""
        settings = self.settings
        self._merge({suffix: build(value if at is None else rank[at], settings)
                     for suffix, build, at in _builds(self.name)})

    def merge(self, later: Fold) -> None:
        """Merge a state of the same function that took its values after this one's."""
        if later.values is not None:
            self._merge(later.values)

    def _merge(self, later: dict[str, Any]) -> None:
        if self.values is None:
            self.values = {s: list(v) if isinstance(v, list) else v for s, v in later.items()}
            return
        fn, mine = _function(self.name), self.values
        for kind, suffixes in _plan(self.name):
            if kind in MERGE_TOGETHER:
                mine.update(MERGE_TOGETHER[kind](fn, {s: mine[s] for s in suffixes}, {s: later[s] for s in suffixes}))
            else:
                pair = MERGE[kind]
                for s in suffixes:
                    a, b = mine[s], later[s]
                    mine[s] = b if a is None else a if b is None else pair(a, b)

    def value(self) -> Any:
        """The function's final value; None while empty (each caller has its own empty value)."""
        if self.values is None:
            return None
        return _function(self.name).finalize(self.values, PythonOps(), self.settings)
