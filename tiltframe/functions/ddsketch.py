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

Stored format.  A state is a BINARY value holding UTF-8 JSON, readable by any JSON parser::

    {"alpha":0.01,"zero":3,"pos":{"-12":1,"5":2},"neg":{}}

``alpha`` (JSON number, the relative accuracy; Spark spells small values like ``1.0E-4``), ``zero``
(integer, the count of zero-like values), ``pos`` and ``neg`` (objects mapping a bin index, written as a
decimal integer string, to a positive integer count; an empty store is ``{}``).  Keys are written in
ascending numeric order and the object keys in that order, by :func:`build`, :func:`merge_agg` and
:func:`merge` alike (this is what Spark's ``to_json`` writes for a struct of ``double``, ``bigint`` and
two ``map<int,bigint>``).  A null state means "no values"; :func:`build` and :func:`merge_agg` never
write a state with zero values.

Spark side (:mod:`tiltframe.functions.ddsketch_spark`, apart so that reading a state needs no Spark).
Its ``build`` and ``merge_agg`` are ordinary aggregate Column expressions made of
built-in functions only (no Python UDF), so they run in the JVM, mix with other aggregates in one
``agg(...)`` call and work under ``spark.sql.ansi.enabled``.  Both sort an array per group and turn runs of
equal bin indices into counts with O(n log n) array functions.  An intermediate array is bound once with
:func:`_let` (a one-element ``transform``) because Spark neither eliminates common subexpressions inside
higher-order functions nor caches a column referenced from a lambda: referencing the sorted array from a
per-element lambda directly would re-sort it for every element.
"""

from __future__ import annotations

import bisect
import json
import math
import sys
from collections.abc import Sequence
from typing import Any

__all__ = [
    "DEFAULT_RELATIVE_ACCURACY", "ZERO_THRESHOLD", "build_values", "count", "merge", "quantiles",
]

#: The relative accuracy used when a definition does not name one (1%).
DEFAULT_RELATIVE_ACCURACY: float = 0.01

#: Values with ``|x|`` below this are counted as zero (they have no log bin worth keeping).
ZERO_THRESHOLD: float = 1e-300

#: The Spark type a stored state parses to with ``from_json`` (which only reads maps with string keys).
STATE_SCHEMA = "struct<alpha:double,zero:bigint,pos:map<string,bigint>,neg:map<string,bigint>>"

_INT_MAX = 2**31 - 1
# |ln(x)| for any binned x: ln(1e-300) ~ -690.8, ln(max double) ~ 709.8.
_MAX_ABS_LN = max(-math.log(ZERO_THRESHOLD), math.log(sys.float_info.max))


def _gamma(alpha: float) -> float:
    return (1.0 + alpha) / (1.0 - alpha)


def _check_alpha(alpha: float) -> float:
    """The relative accuracy as a float, refused unless bin indices of all doubles fit a Spark int."""
    alpha = float(alpha)
    if not (0.0 < alpha < 1.0):
        raise ValueError(f"ddsketch relative accuracy must be strictly between 0 and 1, got {alpha!r}")
    if _MAX_ABS_LN / math.log(_gamma(alpha)) + 1 > _INT_MAX:
        raise ValueError(f"ddsketch relative accuracy {alpha!r} is too small: bin indices would overflow an int")
    return alpha


# --------------------------------------------------------------------------------------------- Spark


class _State:
    """A parsed state: ``alpha``, the zero count and the two stores as ``{index: count}``."""

    __slots__ = ("alpha", "neg", "pos", "zero")

    def __init__(self, alpha: float, zero: int, pos: dict[int, int], neg: dict[int, int]) -> None:
        self.alpha, self.zero, self.pos, self.neg = alpha, zero, pos, neg

    @property
    def count(self) -> int:
        return self.zero + sum(self.pos.values()) + sum(self.neg.values())


def _load(state: bytes | bytearray | memoryview | str) -> _State:
    """Parse a stored state, refusing anything that is not the documented JSON object."""
    text = state if isinstance(state, str) else bytes(state).decode("utf-8")
    try:
        obj: Any = json.loads(text)
        alpha = _check_alpha(obj["alpha"])
        zero = int(obj.get("zero", 0))
        stores = [{int(k): int(v) for k, v in (obj.get(name) or {}).items()} for name in ("pos", "neg")]
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise ValueError(f"not a ddsketch state: {text[:200]!r} ({exc})") from exc
    return _State(alpha, zero, stores[0], stores[1])


def _dump(st: _State) -> bytes:
    def store(bins: dict[int, int]) -> dict[str, int]:
        return {str(k): bins[k] for k in sorted(bins)}

    obj = {"alpha": st.alpha, "zero": st.zero, "pos": store(st.pos), "neg": store(st.neg)}
    return json.dumps(obj, separators=(",", ":")).encode("utf-8")


def build_values(values: Any, relative_accuracy: float) -> bytes | None:
    """The state of ``values`` (an array of numbers) built in Python with numpy: the same bins and
    format as :func:`build`, for engines that aggregate outside Spark's SQL (continuous queries)."""
    import numpy as np

    alpha = _check_alpha(relative_accuracy)
    ln_gamma = math.log(_gamma(alpha))
    x = np.asarray(values, dtype="float64")
    x = x[np.isfinite(x)]
    if x.size == 0:
        return None

    def bins(v: Any) -> dict[int, int]:
        idx, counts = np.unique(np.ceil(np.log(v) / ln_gamma).astype("int64"), return_counts=True)
        return {int(i): int(c) for i, c in zip(idx, counts, strict=True)}

    zero = int(np.count_nonzero(np.abs(x) < ZERO_THRESHOLD))
    return _dump(_State(alpha, zero, bins(x[x >= ZERO_THRESHOLD]), bins(-x[x <= -ZERO_THRESHOLD])))


def merge(a: bytes | None, b: bytes | None) -> bytes | None:
    """Python merge of two stored states (sum of counts per bin); a null side yields the other.

    Raises ValueError naming both values when their relative accuracies differ.  The result is in the
    stored format (``alpha`` may be spelled differently from Spark's, e.g. ``0.0001`` for ``1.0E-4``).
    """
    if a is None:
        return b
    if b is None:
        return a
    sa, sb = _load(a), _load(b)
    if sa.alpha != sb.alpha:
        raise ValueError(f"ddsketch: cannot merge states of different relative accuracy: {sa.alpha!r} and {sb.alpha!r}")
    pos, neg = dict(sa.pos), dict(sa.neg)
    for mine, theirs in ((pos, sb.pos), (neg, sb.neg)):
        for k, v in theirs.items():
            mine[k] = mine.get(k, 0) + v
    return _dump(_State(sa.alpha, sa.zero + sb.zero, pos, neg))


def _representative(index: int, ln_gamma: float, ln_scale: float) -> float:
    """``2 * gamma**index / (gamma + 1)`` computed in logs (the top bin of the largest doubles would overflow)."""
    try:
        return math.exp(index * ln_gamma + ln_scale)
    except OverflowError:
        return sys.float_info.max


def quantiles(state: bytes | None, qs: Sequence[float]) -> list[float | None]:
    """Python: the estimate of each quantile in ``qs`` (each in [0, 1]; None for a null/empty state)."""
    for q in qs:
        if not (0.0 <= q <= 1.0):  # also refuses NaN
            raise ValueError(f"quantile must be between 0 and 1, got {q!r}")
    if state is None:
        return [None] * len(qs)
    st = _load(state)
    n = st.count
    if n == 0:
        return [None] * len(qs)
    gamma = _gamma(st.alpha)
    ln_gamma, ln_scale = math.log(gamma), math.log(2.0 / (gamma + 1.0))
    values: list[float] = []
    cumulative: list[int] = []
    total = 0
    bins = [(-_representative(i, ln_gamma, ln_scale), st.neg[i]) for i in sorted(st.neg, reverse=True)]
    bins.append((0.0, st.zero))
    bins += [(_representative(i, ln_gamma, ln_scale), st.pos[i]) for i in sorted(st.pos)]
    for value, c in bins:
        if c > 0:
            total += c
            values.append(value)
            cumulative.append(total)
    # The first bin whose cumulative count exceeds rank = q * (n - 1): the bin of sorted[floor(rank)].
    return [values[bisect.bisect_right(cumulative, q * (n - 1))] for q in qs]


def count(state: bytes | None) -> int:
    """Python: number of values in the state (0 for a null state)."""
    return 0 if state is None else _load(state).count
