"""Sketch states outside Spark: merge and read the binaries the engine stores.

HLL and KLL states are the Apache DataSketches binaries Spark's ``hll_sketch_agg`` and
``kll_sketch_agg_double`` write (the ``datasketches`` package reads and merges them, no Spark needed);
DDSketch states are the DDSketch libraries' protobuf message and HDR histograms HdrHistogram's compressed
encoding, each made from the JSON Spark's batches carry (``tiltframe.functions.ddsketch``, ``.hdr``).
The store merges states of buckets it already holds with these functions, and retrieval merges and reads
them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import datasketches as ds
import numpy as np

from tiltframe.functions import ddsketch, hdr
from tiltframe.functions.states import Merge

Binary = bytes | None


def _merge_hll(a: bytes, b: bytes) -> bytes:
    left, right = ds.hll_sketch.deserialize(a), ds.hll_sketch.deserialize(b)
    union = ds.hll_union(max(left.lg_config_k, right.lg_config_k))
    union.update(left)
    union.update(right)
    # HLL_8, as Spark's hll_sketch_agg and hll_union_agg write.
    return union.get_result(ds.tgt_hll_type.HLL_8).serialize_updatable()


def _merge_kll(a: bytes, b: bytes) -> bytes:
    left = ds.kll_doubles_sketch.deserialize(a)
    left.merge(ds.kll_doubles_sketch.deserialize(b))
    return left.serialize()


def _either(merge: Callable[[bytes, bytes], bytes]) -> Callable[[Binary, Binary], Binary]:
    """A merge where a NULL state (no values) is the identity."""

    def merged(a: Binary, b: Binary) -> Binary:
        if a is None or b is None:
            return b if a is None else a
        return merge(bytes(a), bytes(b))

    return merged


#: The Python merge of each sketch kind of the registry.
MERGE: dict[Merge, Callable[[Binary, Binary], Binary]] = {
    Merge.HLL: _either(_merge_hll),
    Merge.KLL: _either(_merge_kll),
    Merge.DDS: ddsketch.merge,
    Merge.HDR: hdr.merge,
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


def hll_estimate(state: bytes) -> int:
    """Estimated number of distinct values, rounded."""
    return round(ds.hll_sketch.deserialize(bytes(state)).get_estimate())


def kll_quantiles(state: bytes, qs: Sequence[float]) -> list[float]:
    """The estimates of quantiles ``qs``, from one read of the binary."""
    return [float(v) for v in ds.kll_doubles_sketch.deserialize(bytes(state)).get_quantiles(list(qs))]


def dds_quantiles(state: bytes, qs: Sequence[float]) -> list[float | None]:
    return ddsketch.quantiles(bytes(state), qs)


def hdr_quantiles(state: bytes, qs: Sequence[float]) -> list[float | None]:
    return hdr.quantiles(bytes(state), qs)
