"""Stored final values against recomputed ones (``retrieval.comparison``): what counts as a difference."""

from __future__ import annotations

import datasketches as ds
import numpy as np
import pandas as pd

import tiltframe as tf
from tiltframe.aggregates.layout import AggregationLayout
from tiltframe.retrieval.comparison import Difference, compare

APP = """
define stream S (k string, x double, n long, ts long);
define aggregation A
from S
select k, sum(x) as total, count() as c, max(n) as top, kll(x, [0.5]) as q, distinctCount(n) as kinds
group by k
aggregate by ts every sec ... min;
"""
LAYOUT = AggregationLayout.of(tf.load_app(APP), "A")


def frame(rows: list[tuple]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["AGG_TIMESTAMP", "k", "total", "c", "top", "q_p50", "kinds"])


def test_equal_frames_and_double_sums_in_another_order_agree() -> None:
    stored = frame([(0, "a", 0.1 + 0.2 + 0.3, 3, 7, None, 2)])
    recomputed = frame([(0, "a", 0.3 + 0.2 + 0.1, 3, 7, None, 2)])
    assert 0.1 + 0.2 + 0.3 != 0.3 + 0.2 + 0.1
    assert compare("seconds", stored, recomputed, LAYOUT) == []


def test_each_value_and_row_that_differs_is_named() -> None:
    stored = frame([(0, "a", 1.0, 3, 7, None, 2), (1000, "a", 1.0, 1, 1, None, 1)])
    recomputed = frame([(0, "a", 1.001, 4, 7, None, None), (2000, "b", 1.0, 1, 1, None, 1)])
    assert compare("seconds", stored, recomputed, LAYOUT) == [
        Difference("seconds", 0, ("a",), "total", 1.0, 1.001),
        Difference("seconds", 0, ("a",), "c", 3, 4),
        Difference("seconds", 0, ("a",), "kinds", 2.0, None),
        Difference("seconds", 1000, ("a",), None, "row", None),
        Difference("seconds", 2000, ("b",), None, None, "row"),
    ]


def test_a_measure_added_later_is_compared_from_when_it_is_complete() -> None:
    stored = frame([(0, "a", None, 3, 7, None, 2), (1000, "a", 2.0, 1, 1, None, 1)])
    recomputed = frame([(0, "a", 5.0, 3, 7, None, 2), (1000, "a", 2.0, 1, 1, None, 1)])
    assert compare("seconds", stored, recomputed, LAYOUT, {"total": 1000}) == []
    assert compare("seconds", stored, recomputed, LAYOUT, {"total": 0}) == [
        Difference("seconds", 0, ("a",), "total", None, 5.0)]


def test_sketches_agree_within_their_error() -> None:
    values = np.random.default_rng(1).lognormal(3, 1, 20_000)
    sketch = ds.kll_doubles_sketch(200)
    for v in values:
        sketch.update(float(v))
    exact = float(np.quantile(values, 0.5))
    recomputed = frame([(0, "a", 1.0, 1, 1, exact, 1000)]).assign(q_KLL=[sketch.serialize()])
    near = float(np.quantile(values, 0.51))
    far = float(np.quantile(values, 0.6))
    assert compare("seconds", frame([(0, "a", 1.0, 1, 1, near, 1010)]), recomputed, LAYOUT) == []
    assert [(d.column, d.stored) for d in compare("seconds", frame([(0, "a", 1.0, 1, 1, far, 1300)]), recomputed,
                                                  LAYOUT)] == [("q_p50", far), ("kinds", 1300)]
