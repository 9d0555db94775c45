"""The order rows are merged in (``store.writes.upserts.prepare_rows``): the primary key's, by one combined integer
where the keys allow it, by all the keys otherwise."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from tiltframe.store.writes.upserts import _key_order

LONGS = st.integers(-(2**63), 2**63 - 1)


def keys_of(n: int) -> st.SearchStrategy[np.ndarray]:
    return st.one_of(
        hnp.arrays(np.int64, n, elements=st.one_of(st.integers(-5, 5), LONGS)),  # small ranges and the widest
        hnp.arrays(np.int64, n, elements=st.integers(1_700_000_000_000, 1_700_000_009_000)),
        hnp.arrays(np.uint64, n, elements=st.integers(1, 50)),  # the ranks of string keys
        hnp.arrays(np.uint64, n, elements=st.integers(2**64 - 9, 2**64 - 1)),
        hnp.arrays(np.bool_, n),
        hnp.arrays(np.float64, n, elements=st.floats(-1e6, 1e6)))


@given(st.integers(1, 40).flatmap(lambda n: st.lists(keys_of(n), min_size=1, max_size=4)))
def test_the_order_is_the_keys_order_first_key_first(keys: list[np.ndarray]) -> None:
    order = _key_order(keys)
    want = np.lexsort(keys[::-1])
    assert sorted(order.tolist()) == list(range(len(keys[0])))
    assert [tuple(k[i] for k in keys) for i in order] == [tuple(k[i] for k in keys) for i in want]
