"""Tremor's aggregate functions (``aggr::stats::*``, ``aggr::win::*``) as mergeable states over JSON values.

Each state takes values (``add``), merges a later state into itself (``merge``: a tilt frame's coarser window
takes the finer window's state) and gives its value (``value``) in Tremor's output shape: ``count`` an
integer, ``sum``/``min``/``max``/``var``/``stdev`` floats, ``mean`` a float or null when empty, ``first`` and
``last`` the value as given, ``collect_*`` arrays.  A value of the wrong type is a ``TrickleRuntimeError``
(Tremor's "bad type"), never skipped.

Two merges differ from Tremor's on purpose (tests/compatibility/README.md): ``min`` merged into an empty
state takes the merged value (Tremor's stays empty and emits 0.0), and ``var``/``stdev`` merge exactly
(Chan's parallel formula; Tremor adds shifted sums, which is exact only when both states began with the same
value).
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

from tiltframe.aggregates.sketches import hdr
from tiltframe.functions.trickle_values import TrickleRuntimeError, is_number, type_name


def _number(name: str, value: Any) -> float:
    if not is_number(value):
        raise TrickleRuntimeError(f"aggr::stats::{name} takes numbers, not {type_name(value)} "
                                  f"({value!r})"[:200])
    return float(value)


class State:
    """One aggregate's state for one window of one group."""

    name: ClassVar[str]
    #: Takes numbers only: ``check`` refuses anything else before any state takes the event.
    numeric: ClassVar[bool] = False

    @classmethod
    def check(cls, value: Any) -> None:
        """Raise the error ``add`` would raise for ``value``, so that an event is taken by every aggregate of
        its group or by none."""
        if cls.numeric:
            _number(cls.name.rsplit("::", 1)[1], value)

    def add(self, value: Any) -> None:
        raise NotImplementedError

    def merge(self, later: State) -> None:
        raise NotImplementedError

    def value(self) -> Any:
        raise NotImplementedError


class Count(State):
    name = "aggr::stats::count"

    def __init__(self) -> None:
        self.n = 0

    def add(self, value: Any) -> None:
        self.n += 1

    def merge(self, later: State) -> None:
        assert isinstance(later, Count)
        self.n += later.n

    def value(self) -> int:
        return self.n


class Sum(State):
    name = "aggr::stats::sum"
    numeric = True

    def __init__(self) -> None:
        self.total = 0.0

    def add(self, value: Any) -> None:
        self.total += _number("sum", value)

    def merge(self, later: State) -> None:
        assert isinstance(later, Sum)
        self.total += later.total

    def value(self) -> float:
        return self.total


class Mean(State):
    name = "aggr::stats::mean"
    numeric = True

    def __init__(self) -> None:
        self.n, self.total = 0, 0.0

    def add(self, value: Any) -> None:
        self.total += _number("mean", value)
        self.n += 1

    def merge(self, later: State) -> None:
        assert isinstance(later, Mean)
        self.n, self.total = self.n + later.n, self.total + later.total

    def value(self) -> float | None:
        return self.total / self.n if self.n else None


class _Extreme(State):
    numeric = True

    keep: ClassVar[Any]

    def __init__(self) -> None:
        self.best: float | None = None

    def add(self, value: Any) -> None:
        v = _number(self.name.rsplit("::", 1)[1], value)
        self.best = v if self.best is None else type(self).keep(self.best, v)

    def merge(self, later: State) -> None:
        assert isinstance(later, type(self))
        if later.best is not None:
            self.best = later.best if self.best is None else type(self).keep(self.best, later.best)

    def value(self) -> float:
        return 0.0 if self.best is None else self.best


class Min(_Extreme):
    name = "aggr::stats::min"
    keep = min


class Max(_Extreme):
    name = "aggr::stats::max"
    keep = max


class Var(State):
    """Sample variance (n - 1), 0.0 below two values; Welford's running mean and squared deviations."""

    name = "aggr::stats::var"
    numeric = True

    def __init__(self) -> None:
        self.n, self.mean, self.m2 = 0, 0.0, 0.0

    def add(self, value: Any) -> None:
        x = _number("var", value)
        self.n += 1
        delta = x - self.mean
        self.mean += delta / self.n
        self.m2 += delta * (x - self.mean)

    def merge(self, later: State) -> None:
        assert isinstance(later, Var)
        if not later.n:
            return
        n = self.n + later.n
        delta = later.mean - self.mean
        self.m2 += later.m2 + delta * delta * self.n * later.n / n
        self.mean += delta * later.n / n
        self.n = n

    def value(self) -> float:
        return self.m2 / (self.n - 1) if self.n > 1 else 0.0


class Stdev(Var):
    name = "aggr::stats::stdev"

    def value(self) -> float:
        return math.sqrt(super().value())


class First(State):
    name = "aggr::win::first"

    def __init__(self) -> None:
        self.set, self.held = False, None

    def add(self, value: Any) -> None:
        if not self.set:
            self.set, self.held = True, value

    def merge(self, later: State) -> None:
        assert isinstance(later, First)
        if not self.set and later.set:
            self.set, self.held = True, later.held

    def value(self) -> Any:
        return self.held


class Last(State):
    name = "aggr::win::last"

    def __init__(self) -> None:
        self.set, self.held = False, None

    def add(self, value: Any) -> None:
        self.set, self.held = True, value

    def merge(self, later: State) -> None:
        assert isinstance(later, Last)
        if later.set:
            self.set, self.held = True, later.held

    def value(self) -> Any:
        return self.held


class CollectFlattened(State):
    name = "aggr::win::collect_flattened"

    def __init__(self) -> None:
        self.items: list[Any] = []

    def add(self, value: Any) -> None:
        self.items.append(value)

    def merge(self, later: State) -> None:
        assert isinstance(later, CollectFlattened)
        self.items.extend(later.items)

    def value(self) -> list[Any]:
        return list(self.items)


class CollectNested(CollectFlattened):
    """As ``collect_flattened``, but a merged window's values come in as one array."""

    name = "aggr::win::collect_nested"

    def merge(self, later: State) -> None:
        assert isinstance(later, CollectNested)
        self.items.append(list(later.items))


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
    and the percentiles are integers, ``mean``, ``stdev`` and ``var`` (population) floats."""

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
    percentile rounded up to one decimal."""

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
