"""A merge whose result a state cannot hold is a clear error and writes nothing: a long sum beyond 64 bits
(never wrapped, never turned into a float), a double sum beyond the double range, a non-finite double
where the store cannot keep it."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from tests.store.conftest import MIN, SEC, T0, batch, row
from tiltframe.errors import StoreError
from tiltframe.store.sql import SqlStore

BIG = 2**63 - 10


def test_a_long_sum_beyond_64_bits_is_a_clear_error(store: SqlStore, layout) -> None:
    first = [row(T0, "IBM", T0, 1, 0, 1.0, BIG), row(T0, "WSO2", T0, 1, 1, 1.0, 5)]
    assert store.write_batch(layout, batch(layout, 1, first, min_rows=first))
    before = (store.read(layout, SEC), store.read(layout, MIN), store.info(layout))
    more = [row(T0, "WSO2", T0 + 1, 2, 0, 2.0, 1), row(T0 + 1000, "IBM", T0 + 1000, 2, 1, 1.0, 20),
            row(T0, "IBM", T0 + 2, 2, 2, 1.0, 20)]
    with pytest.raises(StoreError) as err:
        store.write_batch(layout, batch(layout, 2, more, min_rows=[more[0], more[2]]))
    text = str(err.value)
    assert "aggregation TradeAggregation" in text and "TradeAggregation_SECONDS" in text, text
    assert "total_SUM" in text and "symbol='IBM'" in text and str(T0) in text, text
    assert f"{BIG} + 20" in text and "64-bit" in text and "not written" in text, text
    # The whole batch rolled back: nothing of it is stored, and it is not recorded as committed.
    pd.testing.assert_frame_equal(store.read(layout, SEC), before[0])
    pd.testing.assert_frame_equal(store.read(layout, MIN), before[1])
    assert store.info(layout) == before[2] and not store.is_committed(layout, "p1", 2)
    got = store.read(layout, SEC)
    assert got["total_SUM"].dtype.kind == "i" and got["total_SUM"].max() == BIG  # never a float


def test_a_negative_long_sum_beyond_64_bits_too(store: SqlStore, layout) -> None:
    store.write_batch(layout, batch(layout, 1, [row(T0, "A", T0, 1, 0, 1.0, -(2**63) + 1)]))
    with pytest.raises(StoreError, match=r"-9223372036854775807 \+ -2 .*64-bit"):
        store.write_batch(layout, batch(layout, 2, [row(T0, "A", T0, 2, 0, 1.0, -2)]))
    assert store.read(layout, SEC)["total_SUM"].tolist() == [-(2**63) + 1]


def test_a_double_sum_beyond_the_double_range_is_a_clear_error(store: SqlStore, layout) -> None:
    store.write_batch(layout, batch(layout, 1, [row(T0, "A", T0, 1, 0, 1e308, 1)]))
    with pytest.raises(StoreError) as err:
        store.write_batch(layout, batch(layout, 2, [row(T0, "A", T0, 2, 0, 1e308, 1)]))
    text = str(err.value)
    assert "avgPrice_SUM" in text and "symbol='A'" in text and "double" in text, text
    assert store.read(layout, SEC)["avgPrice_SUM"].tolist() == [1e308]


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_a_non_finite_double_is_kept_or_refused_never_altered(store: SqlStore, layout, value: float) -> None:
    """PostgreSQL keeps NaN and infinities; MySQL/MariaDB has neither and SQLite turns NaN into NULL, so
    those refuse it with a clear error before writing."""
    dialect = store.url.split(":", 1)[0].split("+", 1)[0]
    rows = [row(T0, "A", T0, 1, 0, value, 1)]
    holds = dialect == "postgresql" or (dialect == "sqlite" and not math.isnan(value))
    if holds:
        assert store.write_batch(layout, batch(layout, 1, rows))
        stored = store.read(layout, SEC)["avgPrice_SUM"][0]
        assert (math.isnan(stored) and math.isnan(value)) or stored == value
        return
    with pytest.raises(StoreError) as err:
        store.write_batch(layout, batch(layout, 1, rows))
    text = str(err.value)
    assert "avgPrice_SUM" in text and "symbol='A'" in text and "cannot hold" in text, text
    assert not store.is_committed(layout, "p1", 1)
