"""DDSketch states built and merged in Spark SQL, with built-in functions only (no Python UDF).

They are in the batch format (JSON; built-in functions cannot write protobuf), which the store turns into
the stored one.  Both formats, the binning and the Python side (merge, quantiles) are
:mod:`tiltframe.functions.ddsketch`'s; this module is apart so that reading a state needs no Spark.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from pyspark.sql import Column
from pyspark.sql import functions as F

from tiltframe.functions.ddsketch import STATE_SCHEMA, ZERO_THRESHOLD, _check_alpha, _gamma


def _let(value: Column, body: Callable[[Column], Column]) -> Column:
    """``body(v)`` with ``v`` evaluated once: ``value`` is bound as a lambda variable of a 1-element transform."""
    return F.get(F.transform(F.array(value), body), 0)


def _empty_store() -> Column:
    return F.create_map().cast("map<int,bigint>")


def _runs(keys: Column, weights: Column | None = None) -> Column:
    """``map<int,bigint>`` of each distinct key of the sorted array ``keys`` to its run length (or, when
    ``weights`` is the parallel array of counts, to the sum of its run's weights), keys ascending.

    Run ends are the positions ``p`` where ``keys[p] != keys[p+1]`` (or the last one); a run's length is
    the gap to the previous end.  Every step is one pass over an array bound by :func:`_let`, so the whole
    is O(n) after the sort.
    """

    def by_ends(s: Column, w: Column | None) -> Column:
        n = F.size(s)
        ends = F.when(
            n > 0,
            F.filter(F.sequence(F.lit(0), n - 1), lambda p: (p == n - 1) | (F.get(s, p) != F.get(s, p + 1))),
        ).otherwise(F.array().cast("array<int>"))

        def to_map(e: Column) -> Column:
            def start(p: Column, j: Column) -> Column:  # first position of the run that ends at p
                return F.when(j == 0, F.lit(0)).otherwise(F.get(e, j - 1) + 1)

            if w is None:
                counts = F.transform(e, lambda p, j: (p - start(p, j) + 1).cast("bigint"))
            else:
                counts = F.transform(
                    e,
                    lambda p, j: F.aggregate(
                        F.slice(w, start(p, j) + 1, p - start(p, j) + 1), F.lit(0).cast("bigint"), lambda a, v: a + v
                    ),
                )
            return F.map_from_arrays(F.transform(e, lambda p: F.get(s, p)), counts)

        return _let(ends, to_map)

    if weights is None:
        return _let(keys, lambda s: by_ends(s, None))
    return _let(keys, lambda s: _let(weights, lambda w: by_ends(s, w)))


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
    # collect_list skips the nulls, i.e. the values that belong to another store or to none.
    pos = _runs(F.array_sort(F.collect_list(pos_idx)))
    neg = _runs(F.array_sort(F.collect_list(neg_idx)))
    return F.when(F.count(F.when(finite, F.lit(1))) > 0, _encode(F.lit(alpha), zero, pos, neg))


def _merge_stores(states: Column, field: str) -> Column:
    """The per-index sum of store ``field`` over the array of parsed states: all entries sorted by index,
    then runs summed (O(T log T) in the total number of entries, whatever the number of states)."""

    def int_entries(st: Column) -> Column:  # JSON keys are strings: sort them as the ints they spell
        store = F.coalesce(F.transform_keys(st[field], lambda k, _v: k.cast("int")), _empty_store())
        return F.map_entries(store)

    entries = F.array_sort(F.flatten(F.transform(states, int_entries)))
    return _let(entries, lambda en: _runs(F.transform(en, lambda e: e["key"]), F.transform(en, lambda e: e["value"])))


def merge_agg(state: Column) -> Column:
    """Spark aggregate expression: merges the BINARY batch-format states of a group into one (null states
    ignored; null when all are null).

    The result has the same JSON shape (and, for the same bins, the same bytes) as :func:`build` writes.
    States of different ``alpha`` (their bins are incomparable) and non-null values that are not states raise an
    error in the query.
    """
    parsed = F.from_json(F.decode(state, "UTF-8"), STATE_SCHEMA)

    def merged(states: Column) -> Column:
        alphas = F.transform(states, lambda st: st["alpha"])
        lo, hi = F.array_min(alphas), F.array_max(alphas)
        zero = F.aggregate(states, F.lit(0).cast("bigint"), lambda a, st: a + F.coalesce(st["zero"], F.lit(0)))
        encoded = _encode(lo, zero, _merge_stores(states, "pos"), _merge_stores(states, "neg"))
        mixed = F.raise_error(
            F.concat(
                F.lit("ddsketch: cannot merge states of different relative accuracy: "),
                lo.cast("string"),
                F.lit(" and "),
                hi.cast("string"),
            )
        )
        # from_json reads text that is not a state as a struct of nulls: refuse it rather than drop its values.
        corrupt = F.raise_error(F.lit("ddsketch: not a ddsketch state (no alpha) in merge_agg"))
        return (
            F.when(F.size(states) == 0, F.lit(None).cast("binary"))
            .when(F.exists(states, lambda st: st["alpha"].isNull()), corrupt)
            .when(lo != hi, mixed)
            .otherwise(encoded)
        )

    return _let(F.collect_list(parsed), merged)


# -------------------------------------------------------------------------------------------- Python
