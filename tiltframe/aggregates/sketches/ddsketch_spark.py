"""DDSketch states built and merged in Spark SQL, with built-in functions only (no Python UDF).

They are in the batch format (JSON; built-in functions cannot write protobuf), which the store turns into
the stored one.  Both formats, the binning and the Python side (merge, quantiles) are
:mod:`tiltframe.aggregates.sketches.ddsketch`'s; this module is apart so that reading a state needs no Spark.
"""

from __future__ import annotations

import math

from pyspark.sql import Column
from pyspark.sql import functions as F

from tiltframe.aggregates.sketches.bins_spark import counts, merge_counts, merge_states
from tiltframe.aggregates.sketches.ddsketch import STATE_SCHEMA, ZERO_THRESHOLD, _check_alpha, _gamma


def _encode(alpha: Column, zero: Column, pos: Column, neg: Column) -> Column:
    state = F.struct(alpha.alias("alpha"), zero.alias("zero"), pos.alias("pos"), neg.alias("neg"))
    return F.encode(F.to_json(state), "UTF-8")


def build(arg: Column, relative_accuracy: float) -> Column:
    """Spark aggregate expression: the BINARY state of the non-null values of `arg` in each group (null
    when the group has no non-null value).

    ``arg`` is cast to double; NaN and +-infinity are ignored like nulls.  Usable inside
    ``df.groupBy(...).agg(...)`` next to other aggregates.
    """
    alpha = _check_alpha(relative_accuracy)
    ln_gamma = math.log(_gamma(alpha))
    x = arg.cast("double")
    finite = x.isNotNull() & ~F.isnan(x) & (F.abs(x) < F.lit(math.inf))

    def index(v: Column) -> Column:
        return F.ceil(F.log(v) / F.lit(ln_gamma)).cast("int")

    pos_idx = F.when(finite & (x >= ZERO_THRESHOLD), index(x))
    neg_idx = F.when(finite & (x <= -ZERO_THRESHOLD), index(-x))
    zero = F.count(F.when(finite & (F.abs(x) < ZERO_THRESHOLD), F.lit(1)))
    pos, neg = counts(pos_idx), counts(neg_idx)
    return F.when(F.count(F.when(finite, F.lit(1))) > 0, _encode(F.lit(alpha), zero, pos, neg))


def merge_agg(state: Column) -> Column:
    """Spark aggregate expression: merges the BINARY batch-format states of a group into one (null states
    ignored; null when all are null).

    The result has the same JSON shape (and, for the same bins, the same bytes) as :func:`build` writes.
    States of different ``alpha`` (their bins are incomparable) and non-null values that are not states raise an
    error in the query.
    """
    def encoded(alpha: Column, states: Column) -> Column:
        zero = F.aggregate(states, F.lit(0).cast("bigint"), lambda a, st: a + F.coalesce(st["zero"], F.lit(0)))
        return _encode(alpha, zero, merge_counts(states, "pos"), merge_counts(states, "neg"))

    return merge_states(state, STATE_SCHEMA, "alpha", "ddsketch: cannot merge states of different relative accuracy: ",
                        "ddsketch: not a ddsketch state (no alpha) in merge_agg", encoded)


# -------------------------------------------------------------------------------------------- Python
