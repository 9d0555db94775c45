"""HDR histogram states built and merged in Spark SQL, with built-in functions only (no Python UDF).

They are in the batch format (JSON; built-in functions cannot write HdrHistogram's encoding), which the
store turns into the stored one.  The bins, both formats and the Python side are
:mod:`tiltframe.aggregates.sketches.hdr`'s; this module is apart so that reading a state needs no Spark.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from tiltframe.aggregates.sketches.bins_spark import counts, merge_counts, merge_states
from tiltframe.aggregates.sketches.hdr import HIGHEST, STATE_SCHEMA, shape


def whole(arg: Column, integral: bool) -> Column:
    """The value an HDR histogram counts, as a long (module :mod:`~tiltframe.aggregates.sketches.hdr`'s "Values"):
    null for a null, negative, NaN or infinite value.  Integral arguments are taken as longs (a double
    would round those above 2**53); others are truncated toward zero, 2**63 and above clamped."""
    if integral:
        v = arg.cast("long")
        return F.when(v >= 0, v)
    x = arg.cast("double")
    usable = ~F.isnan(x) & (x >= 0) & (x < F.lit(float("inf")))
    return F.when(usable & (x >= F.lit(2.0**63)), F.lit(HIGHEST)).when(usable, x.cast("long"))


def index(v: Column, digits: int) -> Column:
    """The bin index of the non-negative long ``v`` (null for null), exactly as HdrHistogram's counts
    index: the highest bit from the length of ``bin()``'s binary text (exact for every long, where a log
    in doubles rounds near powers of two)."""
    sh = shape(digits)
    hb = F.length(F.bin(v.bitwiseOR(F.lit(sh.mask)))) - 1
    bucket = hb - sh.half
    sub = F.call_function("shiftright", v, bucket)
    return (F.call_function("shiftleft", (bucket + 1).cast("long"), F.lit(sh.half)) + sub - sh.half_count).cast("int")


def _encode(digits: Column, bins: Column) -> Column:
    return F.encode(F.to_json(F.struct(digits.alias("digits"), bins.alias("counts"))), "UTF-8")


def build(arg: Column, digits: int, integral: bool = False) -> Column:
    """Spark aggregate expression: the BINARY state of the values of ``arg`` the histogram counts, in each
    group (null when it counts none).  Usable inside ``df.groupBy(...).agg(...)`` next to other aggregates."""
    v = whole(arg, integral)
    return F.when(F.count(v) > 0, _encode(F.lit(shape(digits).digits), counts(index(v, digits))))


def merge_agg(state: Column) -> Column:
    """Spark aggregate expression: merges the BINARY batch-format states of a group into one (null states
    ignored; null when all are null), with the JSON shape (and, for the same bins, the bytes) :func:`build`
    writes.  States of different digits and non-null values that are not states raise an error in the query."""
    return merge_states(state, STATE_SCHEMA, "digits", "hdr: cannot merge histograms of different significant digits: ",
                        "hdr: not an hdr state (no digits) in merge_agg",
                        lambda digits, states: _encode(digits, merge_counts(states, "counts")))
