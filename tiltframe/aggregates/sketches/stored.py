"""Sketch states outside Spark: merge and read the binaries the engine stores.

HLL and KLL states are the Apache DataSketches binaries Spark's ``hll_sketch_agg`` and
``kll_sketch_agg_double`` write (the ``datasketches`` package reads and merges them, no Spark needed);
DDSketch states are the DDSketch libraries' protobuf message and HDR histograms HdrHistogram's compressed
encoding, each made from the JSON Spark's batches carry (``tiltframe.aggregates.sketches.ddsketch``, ``.hdr``).
The store merges states of buckets it already holds with these functions, and retrieval merges and reads
them.

A bucket with no value has no sketch: its state is NULL wherever it is made (Spark's builds and merges,
``BUILD`` here).  Stores written before held an *empty* sketch there (Spark's ``hll_sketch_agg`` and
``kll_sketch_agg_double`` over nothing but NULLs write one), and a zero-length binary says as little: every
merge and reader here takes both as NULL, so a merge with them is the identity and a read gives NULL
(``hll_estimate``: 0, distinctCount's empty value).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import datasketches as ds
import numpy as np

from tiltframe.aggregates.sketches import ddsketch, hdr
from tiltframe.aggregates.states import Merge

Binary = bytes | None


def _present(state: Binary) -> bytes | None:
    """The bytes of a state, None for NULL or a zero-length binary (no sketch at all)."""
    return None if state is None or len(state) == 0 else bytes(state)


def _hll(state: Binary) -> Any:
    """The HLL sketch of a state; None for NULL, a zero-length binary or an empty sketch."""
    raw = _present(state)
    sketch = None if raw is None else ds.hll_sketch.deserialize(raw)
    return None if sketch is None or sketch.is_empty() else sketch


def _kll(state: Binary) -> Any:
    """The KLL doubles sketch of a state; None for NULL, a zero-length binary or an empty sketch."""
    raw = _present(state)
    sketch = None if raw is None else ds.kll_doubles_sketch.deserialize(raw)
    return None if sketch is None or sketch.is_empty() else sketch


def _kept(state: Binary) -> bytes | None:
    """The side of a merge that has values, as it is: a side of no value is the identity."""
    return None if state is None else bytes(state)


def _merge_hll(a: Binary, b: Binary) -> Binary:
    left, right = _hll(a), _hll(b)
    if left is None or right is None:
        return _kept(a if left is not None else b if right is not None else None)
    union = ds.hll_union(max(left.lg_config_k, right.lg_config_k))
    union.update(left)
    union.update(right)
    # HLL_8, as Spark's hll_sketch_agg and hll_union_agg write.
    return union.get_result(ds.tgt_hll_type.HLL_8).serialize_updatable()


def _merge_kll(a: Binary, b: Binary) -> Binary:
    left, right = _kll(a), _kll(b)
    if left is None or right is None:
        return _kept(a if left is not None else b if right is not None else None)
    left.merge(right)
    return left.serialize()


def _bins_merge(merge: Callable[[Binary, Binary], Binary]) -> Callable[[Binary, Binary], Binary]:
    """A DDSketch or HDR merge where a zero-length binary is NULL (their merges take NULL and empty
    sketches already: an empty one adds no bin)."""
    return lambda a, b: merge(_present(a), _present(b))


#: The Python merge of each sketch kind of the registry; NULL and empty states are its identity.
MERGE: dict[Merge, Callable[[Binary, Binary], Binary]] = {
    Merge.HLL: _merge_hll,
    Merge.KLL: _merge_kll,
    Merge.DDS: _bins_merge(ddsketch.merge),
    Merge.HDR: _bins_merge(hdr.merge),
}


#: The stored form of a state a Spark batch made, for the kinds whose batch form differs (the store
#: applies it to every state it writes).
TO_STORED: dict[Merge, Callable[[Binary], Binary]] = {
    Merge.DDS: ddsketch.to_stored,
    Merge.HDR: hdr.to_stored,
}


def _build_hll(values: Any, settings: Mapping[str, Any]) -> Binary:
    sketch = ds.hll_sketch(settings["lg_k"], ds.tgt_hll_type.HLL_8)
    for v in values:  # the binding takes one value per call: ints hash as longs, anything else as text
        sketch.update(int(v) if isinstance(v, int | np.integer) else str(v))
    return None if sketch.is_empty() else sketch.serialize_updatable()


def _build_kll(values: Any, settings: Mapping[str, Any]) -> Binary:
    sketch = ds.kll_doubles_sketch(settings["k"])
    sketch.update(np.asarray(values, dtype="float64"))
    return None if sketch.is_empty() else sketch.serialize()


#: The Python build of each sketch kind from the non-null values of one group, with the item's settings.
BUILD: dict[Merge, Callable[[Any, Mapping[str, Any]], Binary]] = {
    Merge.HLL: _build_hll,
    Merge.KLL: _build_kll,
    Merge.DDS: lambda values, settings: ddsketch.build_values(values, settings["relative_accuracy"]),
    Merge.HDR: lambda values, settings: hdr.build_values(values, settings["digits"]),
}


def hll_estimate(state: Binary) -> int:
    """Estimated number of distinct values, rounded; 0 for a state of no value (NULL or empty)."""
    sketch = _hll(state)
    return 0 if sketch is None else round(sketch.get_estimate())


def kll_quantiles(state: Binary, qs: Sequence[float]) -> list[float | None]:
    """The estimates of quantiles ``qs``, from one read of the binary; NULLs for a state of no value."""
    sketch = _kll(state)
    return [None] * len(qs) if sketch is None else [float(v) for v in sketch.get_quantiles(list(qs))]


def dds_quantiles(state: Binary, qs: Sequence[float]) -> list[float | None]:
    return ddsketch.quantiles(_present(state), qs)


def hdr_quantiles(state: Binary, qs: Sequence[float]) -> list[float | None]:
    return hdr.quantiles(_present(state), qs)
