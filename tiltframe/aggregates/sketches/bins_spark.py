"""Histogram bins counted and merged in Spark SQL with built-in functions only (no Python UDF).

The histogram sketches (:mod:`~tiltframe.aggregates.sketches.ddsketch_spark`,
:mod:`~tiltframe.aggregates.sketches.hdr_spark`) differ only in how a value finds its bin index; both count
a group's indices as a ``map<int,bigint>`` and merge states by summing counts of equal indices, which is
what this module does once.

An intermediate array is bound once with :func:`let` (a one-element ``transform``) because Spark neither
eliminates common subexpressions inside higher-order functions nor caches a column referenced from a
lambda: referencing a sorted array from a per-element lambda directly would re-sort it for every element.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import Column
from pyspark.sql import functions as F


def let(value: Column, body: Callable[[Column], Column]) -> Column:
    """``body(v)`` with ``v`` evaluated once: ``value`` is bound as a lambda variable of a 1-element transform."""
    return F.get(F.transform(F.array(value), body), 0)


def _empty_counts() -> Column:
    return F.create_map().cast("map<int,bigint>")


def runs(keys: Column, weights: Column | None = None) -> Column:
    """``map<int,bigint>`` of each distinct key of the sorted array ``keys`` to its run length (or, when
    ``weights`` is the parallel array of counts, to the sum of its run's weights), keys ascending.

    Run ends are the positions ``p`` where ``keys[p] != keys[p+1]`` (or the last one); a run's length is
    the gap to the previous end.  Every step is one pass over an array bound by :func:`let`, so the whole
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

        return let(ends, to_map)

    if weights is None:
        return let(keys, lambda s: by_ends(s, None))
    return let(keys, lambda s: let(weights, lambda w: by_ends(s, w)))


def counts(indices: Column) -> Column:
    """Spark aggregate expression: each non-null bin index of the group mapped to how many times it occurs
    (``collect_list`` skips the nulls, i.e. the values that belong to another store or to none)."""
    return runs(F.array_sort(F.collect_list(indices)))


def merge_counts(states: Column, field: str) -> Column:
    """The per-index sum of the counts map ``field`` over the array of parsed states: all entries sorted by
    index, then runs summed (O(T log T) in the total number of entries, whatever the number of states)."""

    def int_entries(st: Column) -> Column:  # JSON keys are strings: sort them as the ints they spell
        store = F.coalesce(F.transform_keys(st[field], lambda k, _v: k.cast("int")), _empty_counts())
        return F.map_entries(store)

    entries = F.array_sort(F.flatten(F.transform(states, int_entries)))
    return let(entries, lambda en: runs(F.transform(en, lambda e: e["key"]), F.transform(en, lambda e: e["value"])))


def merge_states(state: Column, schema: str, setting: str, mixed: str, corrupt: str,
                 encode: Callable[[Column, Column], Column]) -> Column:
    """Spark aggregate expression: the BINARY batch-format (JSON) states of a group, parsed with ``schema``,
    merged into one by ``encode(setting's value, parsed states)``; null when all are null.

    States whose ``setting`` differs (their bins are incomparable) raise ``mixed`` followed by the lowest and
    highest value; a non-null value that is not a state (``from_json`` reads it as a struct of nulls) raises
    ``corrupt`` rather than drop its values.
    """
    parsed = F.from_json(F.decode(state, "UTF-8"), schema)

    def merged(states: Column) -> Column:
        values = F.transform(states, lambda st: st[setting])
        lo, hi = F.array_min(values), F.array_max(values)
        return (
            F.when(F.size(states) == 0, F.lit(None).cast("binary"))
            .when(F.exists(states, lambda st: st[setting].isNull()), F.raise_error(F.lit(corrupt)))
            .when(lo != hi, F.raise_error(F.concat(F.lit(mixed), lo.cast("string"), F.lit(" and "), hi.cast("string"))))
            .otherwise(encode(lo, states))
        )

    return let(F.collect_list(parsed), merged)
