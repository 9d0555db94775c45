"""DDSketch: a mergeable quantile sketch with relative accuracy, built and merged in Spark SQL.

DDSketch (Masson, Rim, Lee, VLDB 2019) answers quantile queries with a *relative* error bound ``alpha``:
every estimate ``e`` of a true value ``v`` satisfies ``|e - v| <= alpha * |v|``, whatever the spread of
the data.  That bound survives merging because a sketch is only a histogram over fixed logarithmic bins,
so merging is a per-bin sum (associative, commutative, exact): the merge of partial sketches is the very
sketch built on all their values.  This is what lets rollups keep quantiles across buckets.

Binning.  ``gamma = (1 + alpha) / (1 - alpha)``.  A value ``x >= 1e-300`` goes to the *positive* store at
index ``i = ceil(ln(x) / ln(gamma))``, i.e. the bin ``(gamma**(i-1), gamma**i]``, whose representative
``2 * gamma**i / (gamma + 1)`` is within relative error ``alpha`` of every value in it.  A value
``x <= -1e-300`` goes to the *negative* store at the index of ``-x`` (representative negated).  Values with
``|x| < 1e-300`` (:data:`ZERO_THRESHOLD`, which includes exact zeros and nearly all subnormals) are counted
as zero: there is no log bin for them, and an estimate of 0 for such a value is off by less than 1e-300.
Null, NaN and +-infinity are ignored (they have no finite bin; Spark orders NaN above every number, so
they are excluded explicitly).  Bins are never collapsed: a sketch holds at most one bin per
``ln(gamma)`` of log-range, about ``ln(max/min) / ln(gamma)`` bins per sign, e.g. about 2,100 bins for
1% accuracy over 18 decades (232 bins per decade at alpha 0.01, 47 at alpha 0.05).  Typical data spans far
fewer decades and needs far fewer bins.

Quantile convention.  For ``n`` values and ``0 <= q <= 1``, ``rank = q * (n - 1)``; bins are walked in
value order (negative store from the highest index down, then zeros, then the positive store ascending)
and the estimate is the representative of the first bin whose cumulative count is ``> rank``.  That is the
bin holding ``sorted(values)[floor(q * (n - 1))]`` (numpy's ``method="lower"``), the convention of the
paper's reference implementation, so each estimate is within ``alpha`` of that exact lower quantile.

Stored format.  A stored state is the ``DDSketch`` protobuf message of ``ddsketch.proto``, the format the
DDSketch libraries share (sketches-py's ``DDSketchProto``, sketches-java, sketches-go), so any of them
reads a state straight out of the store:

- ``mapping``: ``gamma`` as above, ``indexOffset`` 0, ``interpolation`` NONE (the logarithmic mapping);
- ``positiveValues`` and ``negativeValues``: ``contiguousBinCounts`` from ``contiguousBinIndexOffset``
  (the lowest non-empty index), from the lowest to the highest non-empty bin, no empty bin at either end;
- ``zeroCount``: the count of zero-like values.

Counts are protobuf doubles holding whole numbers.  The same bins always give the same bytes.  Reading
also takes ``binCounts`` (the sparse form other writers may use).  A null state means "no values".
Quantiles are read by the ``ddsketch`` package's sketch over these bins.  A merge is the per-bin sum of
two contiguous stores as numpy arrays: the package's own merge walks the bins one by one in Python, a
hundred times slower, and the store merges every state of a batch with the stored one.

Batch format.  Inside a batch, Spark's ``build`` and ``merge_agg`` (built-in functions cannot write
protobuf) carry a state as UTF-8 JSON::

    {"alpha":0.01,"zero":3,"pos":{"-12":1,"5":2},"neg":{}}

``alpha`` (the relative accuracy), ``zero`` (the zero-like count), ``pos`` and ``neg`` (a bin index written
as a decimal integer string, mapped to its count; keys ascending).  The store turns each such state into
the stored format before it writes it (``store.writes.upserts.merge_sketches``).  Stores written before the
protobuf format hold JSON states: every function here reads both, and ``tiltframe migrate`` converts them.

Spark side (:mod:`tiltframe.aggregates.sketches.ddsketch_spark`, apart so that reading a state needs no Spark).
Its ``build`` and ``merge_agg`` are ordinary aggregate Column expressions made of
built-in functions only (no Python UDF), so they run in the JVM, mix with other aggregates in one
``agg(...)`` call and work under ``spark.sql.ansi.enabled``.  Both sort an array per group and turn runs of
equal bin indices into counts with O(n log n) array functions (:mod:`tiltframe.aggregates.sketches.bins_spark`).
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
from ddsketch.ddsketch import BaseDDSketch
from ddsketch.mapping import LogarithmicMapping
from ddsketch.pb.proto import pb
from ddsketch.store import DenseStore
from google.protobuf.message import DecodeError

__all__ = [
    "DEFAULT_RELATIVE_ACCURACY", "ZERO_THRESHOLD", "Bins", "bins", "build_values", "count", "is_stored_format",
    "merge", "quantiles", "to_stored",
]

#: The relative accuracy used when a definition does not name one (1%).
DEFAULT_RELATIVE_ACCURACY: float = 0.01

#: Values with ``|x|`` below this are counted as zero (they have no log bin worth keeping).
ZERO_THRESHOLD: float = 1e-300

#: The Spark type a batch state parses to with ``from_json`` (which only reads maps with string keys).
STATE_SCHEMA = "struct<alpha:double,zero:bigint,pos:map<string,bigint>,neg:map<string,bigint>>"

_INT_MAX = 2**31 - 1
# |ln(x)| for any binned x: ln(1e-300) ~ -690.8, ln(max double) ~ 709.8.
_MAX_ABS_LN = max(-math.log(ZERO_THRESHOLD), math.log(sys.float_info.max))
# Two writers' gammas for one relative accuracy may differ in the last bits ((1 + a) / (1 - a) against
# 1 + 2a / (1 - a)); states whose gammas differ by no more than this share their bins.
_GAMMA_REL_TOL = 1e-14

State = bytes | bytearray | memoryview
#: A store as its lowest index and the counts from there on.
_Bins = tuple[int, np.ndarray]
_EMPTY: _Bins = (0, np.zeros(0))


def _gamma(alpha: float) -> float:
    return (1.0 + alpha) / (1.0 - alpha)


def _alpha(gamma: float) -> float:
    """The relative accuracy of ``gamma``, rounded to the digits a definition can give (0.01, not 0.0100...02)."""
    return float(f"{(gamma - 1.0) / (gamma + 1.0):.12g}")


def _check_alpha(alpha: float) -> float:
    """The relative accuracy as a float, refused unless bin indices of all doubles fit a Spark int."""
    alpha = float(alpha)
    if not (0.0 < alpha < 1.0):
        raise ValueError(f"ddsketch relative accuracy must be strictly between 0 and 1, got {alpha!r}")
    if _MAX_ABS_LN / math.log(_gamma(alpha)) + 1 > _INT_MAX:
        raise ValueError(f"ddsketch relative accuracy {alpha!r} is too small: bin indices would overflow an int")
    return alpha


class Bins(NamedTuple):
    """A state's content, whatever its format: the relative accuracy, the zero-like count and each store
    as ``{index: count}`` (non-empty bins only)."""

    alpha: float
    zero: int
    pos: dict[int, int]
    neg: dict[int, int]


# ------------------------------------------------------------------------------------------- formats


def _from_counts(counts: Mapping[int, float]) -> _Bins:
    if not counts:
        return _EMPTY
    keys = np.fromiter(counts, dtype=np.int64, count=len(counts))
    lo = int(keys.min())
    dense = np.zeros(int(keys.max()) - lo + 1)
    dense[keys - lo] = np.fromiter(counts.values(), dtype=np.float64, count=len(counts))
    return lo, dense


def _bins_of(store: Any) -> _Bins:
    """A ``Store`` message's bins, from either of its forms (contiguous or sparse)."""
    dense = (store.contiguousBinIndexOffset, np.asarray(store.contiguousBinCounts, dtype=np.float64))
    return _sum(dense, _from_counts(store.binCounts)) if store.binCounts else dense


def _sum(a: _Bins, b: _Bins) -> _Bins:
    """The per-index sum of two stores."""
    if not b[1].size:
        return a
    if not a[1].size:
        return b
    lo = min(a[0], b[0])
    out = np.zeros(max(a[0] + a[1].size, b[0] + b[1].size) - lo)
    for offset, counts in (a, b):
        out[offset - lo : offset - lo + counts.size] += counts
    return lo, out


def _store(bins: _Bins) -> Any:
    """The ``Store`` message of ``bins``: contiguous from the lowest to the highest non-empty bin."""
    offset, counts = bins
    filled = np.flatnonzero(counts)
    if not filled.size:
        return pb.Store()
    first, last = int(filled[0]), int(filled[-1])
    return pb.Store(contiguousBinCounts=counts[first : last + 1].tolist(), contiguousBinIndexOffset=offset + first)


def _message(gamma: float, zero: float, pos: _Bins, neg: _Bins) -> Any:
    mapping = pb.IndexMapping(gamma=gamma, indexOffset=0.0, interpolation=pb.IndexMapping.NONE)
    return pb.DDSketch(mapping=mapping, positiveValues=_store(pos), negativeValues=_store(neg), zeroCount=float(zero))


def _encode(msg: Any) -> bytes:
    return msg.SerializeToString(deterministic=True)


def _not_a_state(raw: bytes, why: object) -> ValueError:
    return ValueError(f"not a ddsketch state: {raw[:200]!r} ({why})")


def _from_json(raw: bytes) -> Any:
    """The message of a batch-format (JSON) state."""
    try:
        obj: Any = json.loads(raw.decode("utf-8"))
        alpha = _check_alpha(obj["alpha"])
        zero = int(obj.get("zero", 0))
        stores = [{int(k): int(v) for k, v in (obj.get(name) or {}).items()} for name in ("pos", "neg")]
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise _not_a_state(raw, exc) from exc
    return _message(_gamma(alpha), zero, _from_counts(stores[0]), _from_counts(stores[1]))


def _load(state: State) -> Any:
    """The ``DDSketch`` message of a state in either format, refusing anything else."""
    raw = bytes(state)
    if raw[:1] == b"{":
        return _from_json(raw)
    msg = pb.DDSketch()
    try:
        msg.ParseFromString(raw)
    except DecodeError as exc:
        raise _not_a_state(raw, exc) from exc
    if not msg.HasField("mapping") or not msg.mapping.gamma > 1.0:
        raise _not_a_state(raw, "no index mapping")
    if msg.mapping.interpolation != pb.IndexMapping.NONE or msg.mapping.indexOffset != 0:
        raise _not_a_state(raw, "only the logarithmic mapping with index offset 0 is read")
    return msg


class _Mapping(LogarithmicMapping):
    """The package's logarithmic mapping with each bin's representative ``2 * gamma**i / (gamma + 1)``
    computed in logs: the top bin of the largest doubles would overflow ``gamma**i``."""

    def value(self, key: int) -> float:
        try:
            return math.exp(key * math.log(self.gamma) + math.log(2.0 / (1.0 + self.gamma)))
        except OverflowError:
            return sys.float_info.max


def _dense_store(bins: _Bins) -> DenseStore:
    """The package's store of ``bins``, filled through its documented attributes in one step (its
    ``add`` takes one bin per Python call)."""
    store = DenseStore()
    offset, counts = bins
    if counts.size:
        store.bins, store.offset, store.count = counts.tolist(), offset, float(counts.sum())
        store.min_key, store.max_key = offset, offset + counts.size - 1
    return store


def _sketch(msg: Any) -> BaseDDSketch:
    """The ``ddsketch`` package's sketch of ``msg``."""
    mapping = _Mapping.from_gamma_offset(msg.mapping.gamma, 0)
    return BaseDDSketch(mapping=mapping, store=_dense_store(_bins_of(msg.positiveValues)),
                        negative_store=_dense_store(_bins_of(msg.negativeValues)), zero_count=msg.zeroCount)


def is_stored_format(state: State) -> bool:
    """Whether ``state`` is in the stored (protobuf) format rather than the batch (JSON) one."""
    return bytes(state[:1]) != b"{"


def to_stored(state: State | None) -> bytes | None:
    """``state`` in the stored format (a state already in it is returned as it is)."""
    if state is None:
        return None
    raw = bytes(state)
    return raw if is_stored_format(raw) else _encode(_from_json(raw))


def bins(state: State) -> Bins:
    """The content of a state in either format."""
    msg = _load(state)

    def ints(store: Any) -> dict[int, int]:
        offset, counts = _bins_of(store)
        return {offset + int(i): round(counts[i]) for i in np.flatnonzero(counts)}

    return Bins(_alpha(msg.mapping.gamma), round(msg.zeroCount), ints(msg.positiveValues), ints(msg.negativeValues))


# -------------------------------------------------------------------------------------------- Python


def build_values(values: Any, relative_accuracy: float) -> bytes | None:
    """The stored state of ``values`` (an array of numbers) built in Python with numpy, with the bins of
    the Spark build, for engines that aggregate outside Spark's SQL (continuous queries)."""
    alpha = _check_alpha(relative_accuracy)
    ln_gamma = math.log(_gamma(alpha))
    x = np.asarray(values, dtype="float64")
    x = x[np.isfinite(x)]
    if x.size == 0:
        return None

    def binned(v: np.ndarray) -> _Bins:
        if v.size == 0:
            return _EMPTY
        keys = np.ceil(np.log(v) / ln_gamma).astype("int64")
        lo = int(keys.min())
        return lo, np.bincount(keys - lo).astype("float64")

    zero = int(np.count_nonzero(np.abs(x) < ZERO_THRESHOLD))
    return _encode(_message(_gamma(alpha), zero, binned(x[x >= ZERO_THRESHOLD]), binned(-x[x <= -ZERO_THRESHOLD])))


def merge(a: State | None, b: State | None) -> bytes | None:
    """Python merge of two states (either format; the result is in the stored format, with ``a``'s
    gamma); a null side yields the other.

    Raises ValueError naming both relative accuracies when they differ (their bins are incomparable).
    """
    if a is None or b is None:
        return to_stored(b if a is None else a)
    ma, mb = _load(a), _load(b)
    gamma = ma.mapping.gamma
    if not math.isclose(gamma, mb.mapping.gamma, rel_tol=_GAMMA_REL_TOL, abs_tol=0.0):
        msg = (f"ddsketch: cannot merge states of different relative accuracy: {_alpha(gamma)!r} and "
               f"{_alpha(mb.mapping.gamma)!r}")
        raise ValueError(msg)
    pos = _sum(_bins_of(ma.positiveValues), _bins_of(mb.positiveValues))
    neg = _sum(_bins_of(ma.negativeValues), _bins_of(mb.negativeValues))
    return _encode(_message(gamma, ma.zeroCount + mb.zeroCount, pos, neg))


def quantiles(state: State | None, qs: Sequence[float]) -> list[float | None]:
    """Python: the estimate of each quantile in ``qs`` (each in [0, 1]; None for a null/empty state)."""
    for q in qs:
        if not (0.0 <= q <= 1.0):  # also refuses NaN
            raise ValueError(f"quantile must be between 0 and 1, got {q!r}")
    if state is None:
        return [None] * len(qs)
    sketch = _sketch(_load(state))
    return [None if (v := sketch.get_quantile_value(q)) is None else float(v) for q in qs]


def count(state: State | None) -> int:
    """Python: number of values in the state (0 for a null state)."""
    if state is None:
        return 0
    msg = _load(state)
    return round(msg.zeroCount + sum(float(_bins_of(s)[1].sum()) for s in (msg.positiveValues, msg.negativeValues)))
