"""Tremor's aggregate functions (``aggr::stats::*``, ``aggr::win::*``) as mergeable states over JSON values.

Each state takes values (``add``), merges a later state into itself (``merge``: a tilt frame's coarser window
takes the finer window's state) and gives its value (``value``) in Tremor's output shape: ``count`` an
integer, ``sum``/``min``/``max``/``var``/``stdev`` floats, ``mean`` a float or null when empty, ``first`` and
``last`` the value as given, ``collect_*`` arrays.  A value of the wrong type is a ``TrickleRuntimeError``
(Tremor's "bad type"), never skipped.

Most are the registry's functions (count, sum, avg, min, max, varSample, stdDevSample, first, last,
group_array) folded over Python values by ``aggregates/targets/in_python.py``, so their merges are the ones
SQL's rollups use; this module adds only Tremor's shapes, empty values and type errors.  ``collect_nested``,
``hdr`` and ``dds`` keep their own states (each class says why).

Two merges differ from Tremor's on purpose (tests/compatibility/README.md), both the registry's: ``min``
merged into an empty state takes the merged value (Tremor's stays empty and emits 0.0), and ``var``/``stdev``
merge exactly (Chan's parallel formula; Tremor adds shifted sums, which is exact only when both states began
with the same value).
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

from tiltframe.aggregates.sketches import hdr
from tiltframe.aggregates.targets.in_python import Fold, fold_type
from tiltframe.functions.trickle_values import TrickleRuntimeError, is_number, type_name


def _number(name: str, value: Any) -> float:
    if not is_number(value):
        raise TrickleRuntimeError(f"aggr::stats::{name} takes numbers, not {type_name(value)} "
                                  f"({value!r})"[:200])
    return float(value)


class State:
    """One aggregate's state for one window of one group."""

    name: ClassVar[str]
    #: The name without its module, for errors (``sum``).
    short: ClassVar[str]
    #: Takes numbers only: ``check`` refuses anything else before any state takes the event.
    numeric: ClassVar[bool] = False

    def __init_subclass__(cls) -> None:
        super().__init_subclass__()
        if "name" in vars(cls):
            cls.short = cls.name.rsplit("::", 1)[1]

    @classmethod
    def check(cls, value: Any) -> None:
        """Raise the error ``add`` would raise for ``value``, so that an event is taken by every aggregate of
        its group or by none."""
        if cls.numeric:
            _number(cls.short, value)

    def add(self, value: Any) -> None:
        raise NotImplementedError

    def merge(self, later: State) -> None:
        raise NotImplementedError

    def value(self) -> Any:
        raise NotImplementedError


class _Registered(State):
    """A Tremor function that is a registry function's fold (``aggregates/targets/in_python.py``): its
    merges are the registry's, and this adds Tremor's output shape (``shape``) and empty value."""

    #: The registry function's name.
    function: ClassVar[str]
    #: The value of a window that took nothing.
    empty: ClassVar[Any] = None
    #: The registry function's fold (found once: a select makes states for every window it emits).
    fold_type: ClassVar[type[Fold]]

    def __init_subclass__(cls) -> None:
        super().__init_subclass__()
        if "function" in vars(cls):
            cls.fold_type = fold_type(cls.function)

    def __init__(self) -> None:
        self.fold = self.fold_type(self.function)

    def add(self, value: Any) -> None:
        self.fold.add(value)

    def merge(self, later: State) -> None:
        assert isinstance(later, type(self))
        self.fold.merge(later.fold)

    def value(self) -> Any:
        got = self.fold.value()
        return self.empty if got is None else self.shape(got)

    @staticmethod
    def shape(value: Any) -> Any:
        return value


class _Numeric(_Registered):
    numeric = True

    def add(self, value: Any) -> None:  # Tremor's numbers are floats in its states
        self.fold.add(value if type(value) is float else _number(self.short, value))


class Count(_Registered):
    name, function, empty = "aggr::stats::count", "count", 0


class Sum(_Numeric):
    name, function, empty = "aggr::stats::sum", "sum", 0.0

    @staticmethod
    def shape(value: Any) -> Any:
        return 0.0 + value  # Tremor's sum starts at 0.0, so it is never -0.0


class Mean(Sum):
    name, function, empty = "aggr::stats::mean", "avg", None


class Min(_Numeric):
    name, function, empty = "aggr::stats::min", "min", 0.0


class Max(_Numeric):
    name, function, empty = "aggr::stats::max", "max", 0.0


class Var(_Numeric):
    """Sample variance (n - 1), 0.0 below two values (the registry's is NULL there)."""

    name, function, empty = "aggr::stats::var", "varSample", 0.0


class Stdev(Var):
    name, function = "aggr::stats::stdev", "stdDevSample"


class First(_Registered):
    """The first value taken, null included: the registry's first with every event ranked alike, so that
    the fold's order (Tremor's arrival order, a finer window's state merged after the coarser one's) decides."""

    name, function = "aggr::win::first", "first"


class Last(First):
    name, function = "aggr::win::last", "last"


class CollectFlattened(_Registered):
    """Every value taken, nulls included: the registry's ``group_array``."""

    name, function = "aggr::win::collect_flattened", "group_array"

    def value(self) -> list[Any]:
        return list(self.fold.value() or [])


class CollectNested(State):
    """As ``collect_flattened``, but a merged window's values come in as one array: a merge that nests is
    neither associative nor a merge of like states, so it is no registry primitive and stays here."""

    name = "aggr::win::collect_nested"

    def __init__(self) -> None:
        self.items: list[Any] = []

    def add(self, value: Any) -> None:
        self.items.append(value)

    def merge(self, later: State) -> None:
        assert isinstance(later, CollectNested)
        self.items.append(list(later.items))

    def value(self) -> list[Any]:
        return list(self.items)


#: The percentiles ``hdr`` and ``dds`` give when the query names none (Tremor's).
DEFAULT_PERCENTILES = ("0.5", "0.9", "0.95", "0.99", "0.999", "0.9999", "0.99999")


def _percentiles(name: str, given: list[Any] | None) -> tuple[tuple[str, float], ...]:
    """Each percentile's name as written and its value (``["0.5", "0.99"]``)."""
    out = []
    for item in given if given is not None else DEFAULT_PERCENTILES:
        try:
            out.append((item, float(item)))
        except (TypeError, ValueError):
            raise TrickleRuntimeError(f"{name}: the percentile {item!r} is not a number") from None
    return tuple(out)


class Hdr(State):
    """An HDR histogram (the ``hdrhistogram`` package) of whole values at two significant figures, as
    Tremor's ``hdr``: values are truncated to integers, negative ones left out; ``count``, ``min``, ``max``
    and the percentiles are integers, ``mean``, ``stdev`` and ``var`` (population) floats.

    The registry's ``hdr`` keeps the same histogram (``sketches/hdr.py``'s shape, whose moments and
    percentiles this reads) as an encoded binary, which a fold would decode and encode again on every value;
    the live histogram is kept here instead, encoded only when pickled."""

    name = "aggr::stats::hdr"
    numeric = True
    #: Tremor's histogram: two significant figures over the whole long range
    #: (``tiltframe.aggregates.sketches.hdr``'s shape).
    DIGITS = hdr.DEFAULT_DIGITS
    HIGHEST = hdr.HIGHEST

    def __init__(self, percentiles: list[Any] | None = None) -> None:
        from hdrh.histogram import HdrHistogram

        self.percentiles = _percentiles(self.name, percentiles)
        self.histogram = HdrHistogram(hdr.LOWEST, self.HIGHEST, self.DIGITS)

    def add(self, value: Any) -> None:
        v = int(_number("hdr", value))
        if v >= 0:
            self.histogram.record_value(min(v, self.HIGHEST))

    def merge(self, later: State) -> None:
        assert isinstance(later, Hdr)
        self.histogram.add(later.histogram)

    def __getstate__(self) -> dict[str, Any]:
        """Pickled in the package's own compressed encoding (its counters are a ctypes array, which pickle
        cannot take): the state kept between a Spark run's micro-batches (``engine.trickle.spark_run``)."""
        return {"percentiles": self.percentiles, "histogram": self.histogram.encode()}

    def __setstate__(self, state: dict[str, Any]) -> None:
        from hdrh.histogram import HdrHistogram

        self.percentiles = state["percentiles"]
        self.histogram = HdrHistogram.decode(state["histogram"])

    def value(self) -> dict[str, Any]:
        h = self.histogram
        total = int(h.get_total_count())
        if not total:
            return {"count": 0, "min": 0, "max": 0, "mean": 0.0, "stdev": 0.0, "var": 0.0,
                    "percentiles": {name: 0 for name, _ in self.percentiles}}
        bins = np.ctypeslib.as_array(h.counts)[: h.counts_len]
        mean, stdev = hdr.moments(bins, self.DIGITS)
        estimates = hdr.percentiles(bins, self.DIGITS, [q for _, q in self.percentiles])
        return {"count": total, "min": int(h.get_min_value()), "max": int(h.get_max_value()), "mean": mean,
                "stdev": stdev, "var": stdev * stdev,
                "percentiles": dict(zip([name for name, _ in self.percentiles], estimates, strict=True))}


class Dds(State):
    """A DDSketch (the ``ddsketch`` package) at 1% relative accuracy and at most 2048 bins, as Tremor's
    ``dds``: negative values left out; ``count`` an integer, ``sum``, ``min``, ``max``, ``mean`` floats, each
    percentile rounded up to one decimal.

    Not the registry's ``dds``: that one never collapses bins (``sketches/ddsketch.py``), while Tremor's
    collapses the lowest beyond 2048, so its percentiles would differ on wide data."""

    name = "aggr::stats::dds"
    numeric = True
    ACCURACY = 0.01
    BINS = 2048

    def __init__(self, percentiles: list[Any] | None = None) -> None:
        from ddsketch import LogCollapsingLowestDenseDDSketch

        self.percentiles = _percentiles(self.name, percentiles)
        self.sketch = LogCollapsingLowestDenseDDSketch(relative_accuracy=self.ACCURACY, bin_limit=self.BINS)
        self.lo, self.hi = math.inf, -math.inf  # exact, as the sketch's own are not part of its interface

    def add(self, value: Any) -> None:
        v = _number("dds", value)
        if v >= 0:
            self.sketch.add(v)
            self.lo, self.hi = min(self.lo, v), max(self.hi, v)

    def merge(self, later: State) -> None:
        assert isinstance(later, Dds)
        if later.sketch.count:
            self.sketch.merge(later.sketch)
            self.lo, self.hi = min(self.lo, later.lo), max(self.hi, later.hi)

    def value(self) -> dict[str, Any]:
        s = self.sketch
        count = int(s.count)
        if not count:
            return {"count": 0, "sum": 0.0, "min": 0.0, "max": 0.0, "mean": 0.0,
                    "percentiles": {name: 0.0 for name, _ in self.percentiles}}
        return {"count": count, "sum": float(s.sum), "min": self.lo, "max": self.hi,
                "mean": float(s.sum) / count,
                "percentiles": {name: math.ceil(s.get_quantile_value(q) * 10) / 10 for name, q in self.percentiles}}


#: Function name -> state class; a state is made with the call's constant arguments after the first.
STATES: dict[str, type[State]] = {cls.name: cls for cls in (Count, Sum, Mean, Min, Max, Var, Stdev, Hdr, Dds,
                                                            First, Last, CollectFlattened, CollectNested)}
