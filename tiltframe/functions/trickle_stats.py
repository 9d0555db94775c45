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

from tiltframe.functions.trickle_values import TrickleRuntimeError, is_number, type_name


def _number(name: str, value: Any) -> float:
    if not is_number(value):
        raise TrickleRuntimeError(f"aggr::stats::{name} takes numbers, not {type_name(value)} "
                                  f"({value!r})"[:200])
    return float(value)


class State:
    """One aggregate's state for one window of one group."""

    name: ClassVar[str]

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


#: Function name -> state class.  ``hdr`` and ``dds`` are not built yet.
STATES: dict[str, type[State]] = {cls.name: cls for cls in (Count, Sum, Mean, Min, Max, Var, Stdev, First, Last,
                                                            CollectFlattened, CollectNested)}
