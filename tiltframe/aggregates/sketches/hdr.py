"""HDR histograms: the ``hdr`` measure's states (and Tremor's ``aggr::stats::hdr``), read and merged without Spark.

An HDR histogram (HdrHistogram, Gil Tene) counts whole values in bins whose width grows with the value,
so that every value is kept to ``digits`` significant decimal digits over the whole range.  Merging is a
per-bin sum (associative, commutative, exact): the merge of partial histograms *is* the histogram of all
their values, which is what lets rollups keep percentiles across buckets and levels.

Shape.  Every state here is a histogram of lowest discernible value 1 and highest trackable value
``2**63 - 1`` (the whole non-negative long range, as Tremor's), so bins depend on ``digits`` alone and
states of equal digits always merge.  With ``half = ceil(log2(2 * 10**digits)) - 1`` (7 for two digits)
and ``mask = 2**(half + 1) - 1``, the bin (HdrHistogram's *counts index*) of a value ``v >= 0`` is::

    hb = highest set bit of (v | mask);  bucket = hb - half;  sub = v >> bucket
    index = ((bucket + 1) << half) + sub - 2**half

Values below ``2**(half + 1)`` have bins of width 1 (exact); above, a bin is ``2**bucket`` wide and its
values at least ``2**(half + bucket)``, so every value in a bin is within ``1 / 2**half`` of its lowest
(1/128 for two digits, 1/16 for one, 1/1024 for three).  More digits are refused: a histogram over the
whole long range would then hold over 800,000 counters.

Values.  A value is truncated to a whole number (a histogram of milliseconds keeps whole milliseconds:
record microseconds for finer ones); values of 2**63 or more count as ``2**63 - 1``.  Negative values,
NaN and +-infinity have no bin and are not counted, like nulls (as Tremor's ``hdr`` leaves out negative
values); a ``count`` of the same argument says how many values there were.

Percentiles.  For a fraction ``q`` of ``n`` values, the target count is ``max(floor(q * n + 0.5), 1)``
and the estimate is the highest value of the first bin whose running count reaches it (the lowest for
``q = 0``): HdrHistogram's ``getValueAtPercentile(100 q)``.  It is at or above the exact value of that
rank and within ``1 / 2**half`` of it.

Stored format.  A stored state is the HdrHistogram libraries' compressed V2 encoding (cookie
``0x1c849314``, then the zlib-compressed counts), the bytes whose base64 the ``hdrh`` package's
``HdrHistogram.decode`` and Java's ``Histogram.decodeFromCompressedByteBuffer`` read, so any of them reads
a state straight out of the store.  The same bins always give the same bytes.  A null state means "no
values".

Batch format.  Inside a batch, Spark's ``build`` and ``merge_agg`` (:mod:`tiltframe.aggregates.sketches.hdr_spark`,
made of built-in functions, which cannot write the encoding) carry a state as UTF-8 JSON::

    {"digits":2,"counts":{"0":3,"1337":2}}

each non-empty bin index (a decimal string) mapped to its count.  The store turns each such state into the
stored format before it writes it (``store.writes.upserts.merge_sketches``); every function here reads both.
"""

from __future__ import annotations

import base64
import functools
import json
import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
from hdrh.histogram import HdrHistogram

__all__ = [
    "DEFAULT_DIGITS", "HIGHEST", "LOWEST", "MAX_DIGITS", "STATE_SCHEMA", "Shape", "bin_values", "build_values",
    "check_digits", "count", "counts", "indices", "merge", "moments", "percentiles", "quantiles", "shape", "to_stored",
]

#: Two significant digits when a definition names none (Tremor's ``hdr``).
DEFAULT_DIGITS = 2
MAX_DIGITS = 3
LOWEST = 1
HIGHEST = 2**63 - 1

#: The Spark type a batch state parses to with ``from_json`` (which only reads maps with string keys).
STATE_SCHEMA = "struct<digits:int,counts:map<string,bigint>>"

State = bytes | bytearray | memoryview


class Shape(NamedTuple):
    """The bin arithmetic of one number of significant digits (the module docstring's ``half``)."""

    digits: int
    half: int

    @property
    def mask(self) -> int:
        return (1 << (self.half + 1)) - 1

    @property
    def half_count(self) -> int:
        return 1 << self.half


def check_digits(digits: Any) -> int:
    """The number of significant digits as an int, refused unless whole and within 1..MAX_DIGITS."""
    if isinstance(digits, bool) or not isinstance(digits, int | float) or digits != int(digits):
        raise ValueError(f"hdr: significant digits must be a whole number, got {digits!r}")
    if not (1 <= int(digits) <= MAX_DIGITS):
        raise ValueError(f"hdr: significant digits must be between 1 and {MAX_DIGITS}, got {digits!r}")
    return int(digits)


def shape(digits: int) -> Shape:
    digits = check_digits(digits)
    # HdrHistogram's own arithmetic (sub_bucket_half_count_magnitude), in integers.
    return Shape(digits, (2 * 10**digits - 1).bit_length() - 1)


# ------------------------------------------------------------------------------------------- bins


def indices(values: np.ndarray, digits: int) -> np.ndarray:
    """The bin index of each value of an int64 array of non-negative whole values (numpy, exact for every
    long: the highest bit from the float exponent, corrected where the float rounded up to a power of 2)."""
    sh = shape(digits)
    v = np.asarray(values, dtype=np.int64)
    x = v | sh.mask
    _, exponent = np.frexp(x.astype(np.float64))
    hb = exponent.astype(np.int64) - 1
    hb -= (x >> hb) == 0
    bucket = hb - sh.half
    return ((bucket + 1) << sh.half) + (v >> bucket) - sh.half_count


def _whole(values: Any) -> np.ndarray:
    """The values a histogram counts, as int64: whole numbers kept exactly, other finite non-negative
    numbers truncated, 2**63 and above clamped; negative, NaN and infinite values left out."""
    a = np.asarray(values)
    if a.dtype == object:  # numbers as Python objects: numpy infers int64 for whole ones, float64 otherwise
        a = np.array(a.tolist())
    if a.dtype.kind in "iu":
        a = a[a >= 0]
        return np.minimum(a, HIGHEST).astype(np.int64) if a.dtype.kind == "u" else a.astype(np.int64)
    x = a.astype(np.float64)
    x = x[np.isfinite(x) & (x >= 0)]
    big = x >= 2.0**63
    out = np.where(big, 0, x).astype(np.int64)
    out[big] = HIGHEST
    return out


@functools.cache
def _empty(digits: int) -> HdrHistogram:
    return HdrHistogram(LOWEST, HIGHEST, digits)


def _counter_count(digits: int) -> int:
    return int(_empty(digits).counts_len)


class BinValues(NamedTuple):
    """Each bin's lowest and highest value (int64: exact) and median (float64), as the package has them."""

    lowest: np.ndarray
    median: np.ndarray
    highest: np.ndarray


@functools.cache
def bin_values(digits: int) -> BinValues:
    histogram = _empty(digits)
    low = [histogram.get_value_from_index(i) for i in range(histogram.counts_len)]
    return BinValues(np.array(low, dtype=np.int64),
                     np.array([histogram._hdr_median_equiv_value(v) for v in low], dtype=np.float64),
                     np.array([histogram.get_highest_equivalent_value(v) for v in low], dtype=np.int64))


# ------------------------------------------------------------------------------------------- formats


def _not_a_state(raw: bytes, why: object) -> ValueError:
    return ValueError(f"not an hdr state: {raw[:200]!r} ({why})")


def _encode(digits: int, bins: np.ndarray) -> bytes | None:
    """The stored state of ``bins`` (counts by index; None when all are zero)."""
    filled = np.flatnonzero(bins)
    if not filled.size:
        return None
    histogram = HdrHistogram(LOWEST, HIGHEST, digits)
    np.ctypeslib.as_array(histogram.counts)[: bins.size] = bins
    histogram.set_internal_tacking_values(int(filled[0]), int(filled[-1]), int(bins.sum()))
    # The package writes the libraries' header only around its base64 text; the bytes under it are the encoding.
    return base64.b64decode(histogram.encode())


def _from_json(raw: bytes) -> tuple[int, np.ndarray]:
    try:
        obj: Any = json.loads(raw.decode("utf-8"))
        digits = check_digits(obj["digits"])
        entries = {int(k): int(v) for k, v in (obj.get("counts") or {}).items()}
        out = np.zeros(_counter_count(digits), dtype=np.uint64)
        if entries:
            out[np.fromiter(entries, dtype=np.int64)] = np.fromiter(entries.values(), dtype=np.uint64)
    except (ValueError, TypeError, KeyError, AttributeError, IndexError, OverflowError) as exc:
        raise _not_a_state(raw, exc) from exc
    return digits, out


def counts(state: State) -> tuple[int, np.ndarray]:
    """The digits of a state in either format and its counts by bin index (uint64, every bin)."""
    raw = bytes(state)
    if raw[:1] == b"{":
        return _from_json(raw)
    try:
        histogram = HdrHistogram.decode(base64.b64encode(raw))
    except Exception as exc:  # the package raises its own cookie/length errors, zlib's and ctypes'
        raise _not_a_state(raw, exc) from exc
    if histogram.unit_magnitude != 0:
        raise _not_a_state(raw, f"lowest discernible value {histogram.lowest_trackable_value}, only 1 is read")
    digits = check_digits(histogram.significant_figures)
    out = np.zeros(_counter_count(digits), dtype=np.uint64)
    read = np.ctypeslib.as_array(histogram.counts)[: histogram.counts_len]
    width = min(out.size, read.size)
    if read[width:].any():
        raise _not_a_state(raw, "counts above 2**63 - 1")
    out[:width] = read[:width]
    return digits, out


def is_stored_format(state: State) -> bool:
    """Whether ``state`` is in the stored (HdrHistogram) format rather than the batch (JSON) one."""
    return bytes(state[:1]) != b"{"


def to_stored(state: State | None) -> bytes | None:
    """``state`` in the stored format (a state already in it is returned as it is)."""
    if state is None:
        return None
    raw = bytes(state)
    return raw if is_stored_format(raw) else _encode(*_from_json(raw))


# -------------------------------------------------------------------------------------------- Python


def build_values(values: Any, digits: int = DEFAULT_DIGITS) -> bytes | None:
    """The stored state of ``values`` (an array of numbers) built with numpy, with the bins of the Spark
    build, for engines that aggregate outside Spark's SQL (continuous queries)."""
    whole = _whole(values)
    if not whole.size:
        return None
    return _encode(digits, np.bincount(indices(whole, digits), minlength=_counter_count(digits)).astype(np.uint64))


def merge(a: State | None, b: State | None) -> bytes | None:
    """Python merge of two states (either format; the result in the stored format); a null side yields
    the other.  Raises ValueError naming both when their digits differ (their bins are incomparable)."""
    if a is None or b is None:
        return to_stored(b if a is None else a)
    (da, ca), (db, cb) = counts(a), counts(b)
    if da != db:
        raise ValueError(f"hdr: cannot merge histograms of different significant digits: {da} and {db}")
    return _encode(da, ca + cb)


def percentiles(bins: np.ndarray, digits: int, qs: Sequence[float]) -> list[int]:
    """The estimate of each fraction in ``qs`` from the counts of a non-empty histogram (module docstring)."""
    running = np.cumsum(bins.astype(np.float64))
    total = running[-1]
    values = bin_values(digits)
    out = []
    for q in qs:
        target = max(int(min(q * 100, 100.0) * total / 100 + 0.5), 1)
        at = int(np.searchsorted(running, target, side="left"))
        out.append(int(values.highest[at] if q else values.lowest[at]))
    return out


def quantiles(state: State | None, qs: Sequence[float]) -> list[float | None]:
    """Python: the estimate of each quantile in ``qs`` (each in [0, 1]; None for a null/empty state)."""
    for q in qs:
        if not (0.0 <= q <= 1.0):  # also refuses NaN
            raise ValueError(f"quantile must be between 0 and 1, got {q!r}")
    if state is None:
        return [None] * len(qs)
    digits, bins = counts(state)
    if not bins.any():
        return [None] * len(qs)
    return [float(v) for v in percentiles(bins, digits, qs)]


def count(state: State | None) -> int:
    """Python: number of values in the state (0 for a null state)."""
    return 0 if state is None else int(counts(state)[1].sum())


def moments(bins: np.ndarray, digits: int) -> tuple[float, float]:
    """Mean and population deviation of a non-empty histogram, each bin counting at its median value
    (HdrHistogram's ``getMean`` and ``getStdDeviation``, over the counters as one array: the package walks
    its thousands of counters in Python)."""
    weights = bins.astype(np.float64)
    median = bin_values(digits).median
    mean = float(weights @ median) / float(weights.sum())
    return mean, math.sqrt(float(weights @ (median - mean) ** 2) / float(weights.sum()))
