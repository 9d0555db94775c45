"""``merge_rows`` never wraps a long sum around: a sum beyond 64 bits is refused by name, and one whose
terms are huge but whose total fits comes out exact."""

from __future__ import annotations

import pandas as pd
import pytest

import tiltframe as tf
from tiltframe.aggregates.layout import AggregationLayout
from tiltframe.errors import DataError
from tiltframe.store.reads.pandas_merges import merge_rows

APP = """
define stream S (k string, n long, ts long);
define aggregation A from S select k, sum(n) as total group by k aggregate by ts every min;
"""
BIG = 2**62


def rows(values: list[tuple[str, int]]) -> tuple[pd.DataFrame, AggregationLayout, str]:
    """Partial rows of one bucket, ``(key, sum)`` each, with the layout and the sum's state column."""
    layout = AggregationLayout.of(tf.load_app(APP), "A")
    (state,) = [s.name for s in layout.states if s.item.alias == "total"]
    return pd.DataFrame({"AGG_TIMESTAMP": [0] * len(values), "k": [k for k, _ in values],
                         "AGG_EVENT_TIMESTAMP": [0] * len(values), "AGG_COUNT": [1] * len(values),
                         state: [v for _, v in values]}), layout, state


def test_a_sum_beyond_64_bits_is_refused_naming_its_key() -> None:
    frame, layout, state = rows([("a", 5), ("b", BIG), ("a", 7), ("b", BIG), ("b", BIG)])
    with pytest.raises(DataError, match=rf"the sum {state} of the partial rows at AGG_TIMESTAMP 0, k 'b' is "
                                        rf"{3 * BIG}, beyond the 64-bit range"):
        merge_rows(frame, layout)


def test_huge_terms_whose_sum_fits_are_exact() -> None:
    frame, layout, state = rows([("a", BIG), ("a", BIG), ("a", -BIG), ("b", -BIG), ("b", -BIG), ("b", 1)])
    merged = merge_rows(frame, layout).set_index("k")[state]
    assert merged.to_dict() == {"a": BIG, "b": -2 * BIG + 1}
