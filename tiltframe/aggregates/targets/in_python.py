"""The registry's primitives on plain Python values, one partial state at a time: the state of one value
(``BUILD``), how two partial values of one state column merge (``MERGE``), how the state columns that merge
as one do (``MERGE_TOGETHER``: a combine function's, an event's fields), and ``PythonOps`` for the finalize
and combine functions.  ``Fold`` runs a registry function over them: Tremor's ``aggr::`` functions are
folds (``aggregates/trickle_stats.py``), one event and one tilt-frame merge at a time.

Adding a value is, in exact arithmetic, merging the state of that value alone; ``ADD`` and ``ADD_TOGETHER``
do it in place, without building that state, since a fold takes far more values than states: a column
by the plain comparison or addition, the moments by Welford's update (Chan's merge of a one-value state
rounds differently, and trickle's var/stdev have always been Welford's).  Merging two states is the
registry's merge.  Empty is ``None`` (the identity of every merge); a fold takes every value it is given
(Tremor's first and collect keep nulls), so leaving out nulls, as SQL does, is the caller's part; a
numeric function's values are numbers.
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

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


_OPS = PythonOps()


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


def _combine(fn: AggregateFunction, a: StateValues, b: StateValues) -> StateValues:
    assert fn.combine is not None
    return fn.combine(a, b, _OPS)


def _event(*, latest: bool) -> Callable[[AggregateFunction, StateValues, StateValues], StateValues]:
    """The fields of the earliest or latest of two events by (ts, batch, seq); on a full tie the earlier
    state's for the earliest and the later's for the latest, as the registry breaks ties by arrival (a fold
    whose events rank alike, as Tremor's, keeps the first and the last it was given)."""
    kind = Merge.LATEST if latest else Merge.EARLIEST

    def merge(fn: AggregateFunction, a: StateValues, b: StateValues) -> StateValues:
        rank = _ranker(fn.name, kind)
        b_before = rank(b) < rank(a)
        return (a if b_before else b) if latest else (b if b_before else a)

    return merge


#: The merge primitives whose state columns merge as one, as ``f(function, earlier, later)`` over those
#: columns of two non-empty states (a mapping the caller only reads).
MERGE_TOGETHER: dict[Merge, Callable[[AggregateFunction, StateValues, StateValues], StateValues]] = {
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
def _ranker(name: str, kind: Merge) -> Callable[[StateValues], tuple[Any, ...]]:
    """The (ts, batch, seq) of the event an earliest or latest state keeps, from the state's columns."""
    return operator.itemgetter(*_rank(name, kind))


#: Adds one value with its event's rank (ts, batch, seq) to a non-empty state's columns, in place.
Adder = Callable[[dict[str, Any], Any, tuple[int, int, int]], None]


def _append(a: list[Any], v: Any) -> list[Any]:
    a.append(v)
    return a


#: Each build primitive of a column that merges alone, as ``f(column, value)``: a non-empty column with one
#: more value, the arithmetic of ``MERGE[merge](column, BUILD[build](value))`` (``min``/``max`` keep the
#: column on a tie, as the merge does).
ADD: dict[Build, Callable[[Any, Any], Any]] = {
    Build.COUNT: lambda a, _v: a + 1,
    Build.SUM: operator.add,
    Build.MIN: min,
    Build.MAX: max,
    Build.COLLECT: _append,
}
_SKETCH = "a sketch binary takes a value as the merge of that value's sketch (BUILD, then MERGE)"
NOT_ADDED: dict[Build, str] = {
    Build.MEAN: "added with its count and M2 (ADD_TOGETHER[Merge.COMBINE]: Welford's update)",
    Build.M2: "added with its count and mean (ADD_TOGETHER[Merge.COMBINE]: Welford's update)",
    Build.EARLIEST: "added with the other fields of its event (ADD_TOGETHER[Merge.EARLIEST])",
    Build.LATEST: "added with the other fields of its event (ADD_TOGETHER[Merge.LATEST])",
    Build.HLL: _SKETCH, Build.KLL: _SKETCH, Build.DDS: _SKETCH, Build.HDR: _SKETCH,
}


def _moments(fn: AggregateFunction, suffixes: tuple[str, ...]) -> Adder | None:
    """Welford's update of count, mean and M2 (None for another combine: its one-value state is merged)."""
    by_build = {s.build: s.suffix for s in fn.states if s.suffix in suffixes}
    if len(suffixes) != 3 or set(by_build) != {Build.COUNT, Build.MEAN, Build.M2}:
        return None
    count, mean, m2 = by_build[Build.COUNT], by_build[Build.MEAN], by_build[Build.M2]

    def add(values: dict[str, Any], x: Any, _rank: tuple[int, int, int]) -> None:
        n = values[count] + 1
        before = values[mean]
        delta = x - before
        after = before + delta / n
        values[count], values[mean] = n, after
        values[m2] += delta * (x - after)

    return add


def _one_event(*, latest: bool) -> Callable[[AggregateFunction, tuple[str, ...]], Adder]:
    """The value and rank of the added event if it ranks before the kept one (earliest) or not before it
    (latest): ``MERGE_TOGETHER``'s choice, ties included."""
    kind = Merge.LATEST if latest else Merge.EARLIEST

    def make(fn: AggregateFunction, _suffixes: tuple[str, ...]) -> Adder:
        ts, batch, seq = _rank(fn.name, kind)
        value = next(s.suffix for s in fn.states if s.merge is kind and s.field == "value")

        def add(values: dict[str, Any], v: Any, rank: tuple[int, int, int]) -> None:
            if (rank < (values[ts], values[batch], values[seq])) is not latest:
                values[ts], values[batch], values[seq] = rank
                values[value] = v

        return add

    return make


#: Each merge primitive whose columns merge as one (``MERGE_TOGETHER``), as a maker of the adder of a
#: function's columns of that kind, run once per function; None: the function's one-value state is merged.
ADD_TOGETHER: dict[Merge, Callable[[AggregateFunction, tuple[str, ...]], Adder | None]] = {
    Merge.COMBINE: _moments,
    Merge.EARLIEST: _one_event(latest=False),
    Merge.LATEST: _one_event(latest=True),
}


@functools.cache
def _plan(name: str) -> tuple[tuple[Merge, tuple[str, ...]], ...]:
    """A function's state columns by merge kind, in the order of its states."""
    kinds: dict[Merge, list[str]] = {}
    for state in _function(name).states:
        kinds.setdefault(state.merge, []).append(state.suffix)
    return tuple((kind, tuple(suffixes)) for kind, suffixes in kinds.items())


def _columns(fn: AggregateFunction, suffixes: tuple[str, ...]) -> Adder | None:
    states = [s for s in fn.states if s.suffix in suffixes]
    if not all(s.build in ADD for s in states):
        return None
    pairs = [(s.suffix, ADD[s.build]) for s in states]

    def add(values: dict[str, Any], v: Any, _rank: tuple[int, int, int]) -> None:
        for suffix, f in pairs:
            values[suffix] = f(values[suffix], v)

    return add


@functools.cache
def _adder(name: str) -> Adder | None:
    """A function's add of one value, made once from ``ADD`` and ``ADD_TOGETHER`` (None: a column has none,
    and the value's state is built and merged)."""
    fn = _function(name)
    steps = []
    for kind, suffixes in _plan(name):
        step = ADD_TOGETHER[kind](fn, suffixes) if kind in MERGE_TOGETHER else _columns(fn, suffixes)
        if step is None:
            return None
        steps.append(step)
    if len(steps) == 1:
        return steps[0]

    def add(values: dict[str, Any], v: Any, rank: tuple[int, int, int]) -> None:
        for step in steps:
            step(values, v, rank)

    return add


def _merger(name: str) -> Callable[[dict[str, Any], Mapping[str, Any]], None]:
    """A function's merge of a later non-empty state into a non-empty one, in place, made once."""
    fn = _function(name)
    together = [(MERGE_TOGETHER[kind], suffixes) for kind, suffixes in _plan(name) if kind in MERGE_TOGETHER]
    apart = [(MERGE[kind], s) for kind, suffixes in _plan(name) if kind not in MERGE_TOGETHER for s in suffixes]
    if not apart and len(together) == 1:  # one kind holds every column (moments, first, last): no sub-states
        ((whole, _),) = together

        def merge_whole(mine: dict[str, Any], later: Mapping[str, Any]) -> None:
            mine.update(whole(fn, mine, later))

        return merge_whole

    def merge(mine: dict[str, Any], later: Mapping[str, Any]) -> None:
        for both, suffixes in together:
            mine.update(both(fn, {s: mine[s] for s in suffixes}, {s: later[s] for s in suffixes}))
        for pair, s in apart:
            a, b = mine[s], later[s]
            mine[s] = b if a is None else a if b is None else pair(a, b)

    return merge


#: Every event ranked alike: the fold's order decides first and last (Tremor's arrival order).
ALIKE = (0, 0, 0)
_NO_SETTINGS: Mapping[str, Any] = {}


class Fold:
    """One registry function's partial state over Python values, built a value at a time (``add``) and
    merged with a later state (``merge``).  ``Fold(name)`` is of a subclass made once per function
    (``fold_type``) that holds what its ``add`` and ``merge`` run, found once (a fold takes far more values
    than states, so ``add`` is one call); it pickles as the function's name, settings and values, so that a
    Spark run can keep trickle's windows between micro-batches."""

    __slots__ = ("settings", "values")
    #: Each subclass's: the registry function's name, each column's (suffix, build, place in the event's
    #: rank of the field it keeps, None: the value), the columns a merge extends in place (lists), the
    #: merge of a later non-empty state into a non-empty one, and the function's finalize.
    name: ClassVar[str] = ""
    builds: ClassVar[tuple[tuple[str, Callable[[Any, Mapping[str, Any]], Any], int | None], ...]] = ()
    extended: ClassVar[tuple[str, ...]] = ()
    merge_into: ClassVar[Callable[[dict[str, Any], Mapping[str, Any]], None]]
    finalize: ClassVar[Callable[[StateValues, PythonOps, Mapping[str, Any]], Any]]

    def __new__(cls, name: str, settings: Mapping[str, Any] | None = None) -> Fold:
        return object.__new__(fold_type(name) if cls is Fold else cls)

    def __init__(self, name: str, settings: Mapping[str, Any] | None = None) -> None:
        self.settings = dict(settings) if settings else _NO_SETTINGS
        #: The state columns by suffix; None while empty.
        self.values: dict[str, Any] | None = None

    def __reduce__(self) -> tuple[Any, ...]:
        return _unpickle, (self.name, self.settings, self.values)

    def add(self, value: Any, rank: tuple[int, int, int] = ALIKE) -> None:
        """Take one value; ``rank`` is its event's (ts, batch, seq), which first/last go by."""
        raise NotImplementedError  # each function's subclass has its own (fold_type)

    def _built(self, value: Any, rank: tuple[int, int, int]) -> dict[str, Any]:
        """The state of one value (the first value's; or merged, for a column ``ADD`` lacks)."""
        settings = self.settings
        return {suffix: build(value if at is None else rank[at], settings) for suffix, build, at in self.builds}

    def _start(self, value: Any, rank: tuple[int, int, int]) -> None:
        self.values = self._built(value, rank)

    def _build_and_merge(self, value: Any, rank: tuple[int, int, int] = ALIKE) -> None:
        self._merge(self._built(value, rank))

    def merge(self, later: Fold) -> None:
        """Merge a state of the same function that took its values after this one's."""
        if later.values is not None:
            self._merge(later.values)

    def _merge(self, later: dict[str, Any]) -> None:
        if self.values is None:  # a copy, with its own lists (a merge extends them)
            self.values = copied = dict(later)
            for suffix in self.extended:
                copied[suffix] = list(copied[suffix])
        else:
            self.merge_into(self.values, later)

    def value(self) -> Any:
        """The function's final value; None while empty (each caller has its own empty value)."""
        if self.values is None:
            return None
        return self.finalize(self.values, _OPS, self.settings)


def _unpickle(name: str, settings: Mapping[str, Any], values: dict[str, Any] | None) -> Fold:
    fold = Fold(name, settings)
    fold.values = values
    return fold


def fold_type(name: str) -> type[Fold]:
    """The ``Fold`` subclass of the function ``name`` (an alias too): ``fold_type(name)(name)`` makes a fold
    without looking the function up again."""
    return _specialised(_function(name).name)


@functools.cache
def _specialised(name: str) -> type[Fold]:
    """``Fold`` for one function: its ``add`` runs the function's adder (``_adder``), or builds and merges
    the value's state where there is none; the adds of columns that merge alone are inlined."""
    fn = _function(name)
    body, start = _adder(name), Fold._start
    add: Callable[..., None]

    if body is None:
        add = Fold._build_and_merge
    elif all(s.merge not in MERGE_TOGETHER for s in fn.states):
        pairs = tuple((s.suffix, ADD[s.build]) for s in fn.states)
        if len(pairs) == 1:
            ((suffix, f),) = pairs

            def add(self: Fold, value: Any, rank: tuple[int, int, int] = ALIKE) -> None:
                values = self.values
                if values is None:
                    start(self, value, rank)
                else:
                    values[suffix] = f(values[suffix], value)
        else:
            def add(self: Fold, value: Any, rank: tuple[int, int, int] = ALIKE) -> None:
                values = self.values
                if values is None:
                    start(self, value, rank)
                else:
                    for suffix, f in pairs:
                        values[suffix] = f(values[suffix], value)
    else:
        adder = body

        def add(self: Fold, value: Any, rank: tuple[int, int, int] = ALIKE) -> None:
            values = self.values
            if values is None:
                start(self, value, rank)
            else:
                adder(values, value, rank)

    builds = tuple((s.suffix, BUILD[s.build], None if s.field in (None, "value") else EVENT_ORDER.index(s.field))
                   for s in fn.states)
    extended = tuple(s.suffix for s in fn.states if s.merge is Merge.CONCAT)
    return type(f"Fold_{name}", (Fold,), {
        "__slots__": (), "__doc__": f"A fold of {name}.", "__module__": __name__, "name": name, "add": add,
        "builds": builds, "extended": extended, "merge_into": staticmethod(_merger(name)),
        "finalize": staticmethod(fn.finalize),
    })
