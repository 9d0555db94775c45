"""The registry's functions folded over Python values, a value and a merge at a time, against plain
Python over all the values at once: however the values are split into states merged in order, the fold
gives the same answer (sketches: the sketch of all the values); a value is added by the arithmetic trickle's
aggregates always had, Welford's update for the moments."""

from __future__ import annotations

import itertools
import math
import pickle
import statistics
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tiltframe.aggregates import registry
from tiltframe.aggregates.sketches import stored
from tiltframe.aggregates.states import Merge
from tiltframe.aggregates.targets.in_python import ADD, BUILD, MERGE, MERGE_TOGETHER, Fold

#: Values in the order taken, each with its rank (ts, batch, seq), split into consecutive parts.
values_st = st.lists(st.tuples(st.integers(-1000, 1000), st.integers(0, 5)), min_size=1, max_size=30)
cuts_st = st.lists(st.integers(0, 30), max_size=4)


def fold(name: str, items: list[tuple[int, int]], cuts: list[int], params: tuple[Any, ...] = ()) -> Fold:
    bounds = sorted({0, len(items), *(c for c in cuts if c <= len(items))})
    settings_ = registry.get(name).resolve(params)
    parts = []
    for lo, hi in itertools.pairwise(bounds):
        part = Fold(name, settings_)
        for seq in range(lo, hi):
            value, ts = items[seq]
            part.add(value, (ts, 0, seq))
        parts.append(pickle.loads(pickle.dumps(part)))  # a fold pickles (a Spark run keeps it)
    first = parts[0]
    for later in parts[1:]:
        first.merge(later)
    return first


def close(got: Any, want: float) -> bool:
    return math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-9)


@settings(max_examples=80, deadline=None)
@given(items=values_st, cuts=cuts_st)
def test_a_fold_of_parts_is_the_function_of_all_values(items: list[tuple[int, int]], cuts: list[int]) -> None:
    xs = [v for v, _ in items]
    assert fold("count", items, cuts).value() == len(xs)
    assert fold("sum", items, cuts).value() == sum(xs)
    assert close(fold("avg", items, cuts).value(), statistics.fmean(xs))
    assert fold("min", items, cuts).value() == min(xs)
    assert fold("max", items, cuts).value() == max(xs)
    assert close(fold("var", items, cuts).value(), statistics.pvariance(xs))
    assert close(fold("stdDev", items, cuts).value(), statistics.pstdev(xs))
    if len(xs) > 1:
        assert close(fold("varSample", items, cuts).value(), statistics.variance(xs))
        assert close(fold("stdDevSample", items, cuts).value(), statistics.stdev(xs))
    else:
        assert fold("varSample", items, cuts).value() is None
    # first/last: by event time, ties by arrival (the earlier for first, the later for last)
    first = min(range(len(items)), key=lambda i: (items[i][1], i))
    last = max(range(len(items)), key=lambda i: (items[i][1], i))
    assert fold("first", items, cuts).value() == xs[first]
    assert fold("last", items, cuts).value() == xs[last]
    assert fold("delta", items, cuts).value() == xs[last] - xs[first]
    assert fold("group_array", items, cuts).value() == xs


@settings(max_examples=30, deadline=None)
@given(items=values_st, cuts=cuts_st)
def test_a_fold_of_sketches_is_the_sketch_of_all_values(items: list[tuple[int, int]], cuts: list[int]) -> None:
    xs = np.asarray([v for v, _ in items], dtype="float64")
    qs = (0.1, 0.5, 0.9)
    for name, reader in (("hdr", stored.hdr_quantiles), ("dds", stored.dds_quantiles)):
        fn = registry.get(name)
        settings_ = fn.resolve((qs,))
        state = fold(name, items, cuts, (qs,))
        assert state.values is not None
        whole = stored.BUILD[fn.states[0].merge](xs, settings_)
        suffix = fn.states[0].suffix
        assert reader(state.values[suffix], qs) == reader(whole, qs)
        assert state.value() == tuple(reader(whole, qs))


def test_an_empty_fold_has_no_value() -> None:
    for name in registry.names():
        assert Fold(name).value() is None


def test_each_add_is_the_merge_of_the_value_s_own_state() -> None:
    """``ADD[build]`` of a column is ``MERGE[merge]`` of it and the value's one-value state, for every column
    of a registered function that merges alone."""
    pairs = {(s.build, s.merge) for name in registry.names() for s in registry.get(name).states
             if s.merge not in MERGE_TOGETHER and s.build in ADD}
    assert pairs
    for build, merge in pairs:
        listed = merge is Merge.CONCAT  # a fresh list each side: both extend the column in place
        for held, value in ((5, 3), (2.5, -7.25), (-0.0, 0.0), (1, 1)):
            want = MERGE[merge]([held] if listed else held, BUILD[build](value, {}))
            assert ADD[build]([held] if listed else held, value) == want, (build, merge, held, value)


@settings(max_examples=60, deadline=None)
@given(xs=st.lists(st.floats(-1e12, 1e12) | st.floats(-1, 1), min_size=1, max_size=40))
def test_the_moments_take_a_value_by_welford_s_update(xs: list[float]) -> None:
    """Bit for bit Welford's running mean and squared deviations (not Chan's merge of a one-value state,
    which rounds differently): trickle's var and stdev give the figures they always gave."""
    n, mean, m2 = 0, 0.0, 0.0
    for x in xs:
        n += 1
        delta = x - mean
        mean += delta / n
        m2 += delta * (x - mean)
    state = Fold("varSample")
    for x in xs:
        state.add(x)
    assert state.values is not None
    assert (state.values["COUNT"], state.values["M2"]) == (n, m2)
    assert state.values["MEAN"] == mean  # == (not the repr): 0.0 and -0.0 alike
    assert state.value() == (m2 / (n - 1) if n > 1 else None)
