"""The registry's primitives in Spark: how each state column is built from a bucket's events (``BUILD``) and
how a group's partial values of it merge (``MERGE``), as Spark aggregate columns; ``SparkOps`` for the
finalize and combine functions.  The engine's rollups ask here for every primitive but those that merge
several state columns as one (a combine function's states, an event's fields), which
``engine/rollup/partials.py`` merges; ``NOT_BUILT`` and ``NOT_MERGED`` name what Spark leaves to another
part (``tests/aggregates/test_targets.py`` holds every target to every primitive).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F

from tiltframe.aggregates.sketches import ddsketch_spark, hdr_spark
from tiltframe.aggregates.states import Build, Merge
from tiltframe.model.streams import AttrType

#: Marks the error ``checked_sum`` raises outside ANSI mode, so the pipeline tells it from other failures.
OVERFLOW = "tiltframe: long sum overflow"


class SparkOps:
    """The ``Ops`` of finalize and combine functions for Spark columns (ANSI-safe division)."""

    @staticmethod
    def div(a: Column, b: Column) -> Column:
        return F.try_divide(a.cast("double"), b)

    @staticmethod
    def where(cond: Column, a: Column, b: Column) -> Column:
        return F.when(cond, a).otherwise(b)

    @staticmethod
    def isnull(a: Column) -> Column:
        return a.isNull()

    @staticmethod
    def sqrt(a: Column) -> Column:
        return F.sqrt(a)

    @staticmethod
    def coalesce(a: Column, value: int) -> Column:
        return F.coalesce(a, F.lit(value))

    @staticmethod
    def apply(fn: object, a: Column) -> Column:
        raise NotImplementedError


def checked_sum(col: Column, *, ansi: bool) -> Column:
    """The sum of a long column (null when it has no value), failing the job instead of wrapping.  In ANSI
    mode Spark's own sum fails on overflow; elsewhere a null ``try_sum`` over some value fails it (the count
    tells an overflow from a bucket without values), which costs a little more."""
    if ansi:
        return F.sum(col)
    return F.when(F.count(col) > 0, F.coalesce(F.try_sum(col), F.raise_error(F.lit(OVERFLOW))))


def some(values: Column, aggregate: Column) -> Column:
    """``aggregate`` where ``values`` holds a non-null value in the group, else NULL: a sketch of no value
    is NULL, never an empty sketch (``hll_sketch_agg``, ``kll_sketch_agg_double``, ``hll_union_agg`` and
    ``kll_merge_agg_double`` write an empty one over nothing but NULLs)."""
    return F.when(F.count(values) > 0, aggregate)


@dataclass(frozen=True, slots=True)
class BuildInput:
    """What a build reads: the aggregate's argument (a column of the events; None only for ``count()``), its
    type, the function's settings, whether the state is a long summed from values (which must not wrap), ANSI
    mode, and for the earliest/latest builds the event as ``struct(ts, batch, seq, value)`` and the field of
    it the state keeps."""

    arg: Column | None
    arg_type: AttrType | None
    settings: Mapping[str, Any]
    integral_sum: bool
    ansi: bool
    event: Column | None = None
    field: str | None = None

    @property
    def value(self) -> Column:
        if self.arg is None:
            msg = "this aggregate needs an argument"
            raise ValueError(msg)
        return self.arg

    @property
    def integral(self) -> bool:
        return self.arg_type is not None and self.arg_type.is_integral

    @property
    def number(self) -> Column:
        """The argument with NaN a missing value, as NULL is (for the sketches that would count it)."""
        floating = self.arg_type in (AttrType.FLOAT, AttrType.DOUBLE)
        return F.when(~F.isnan(self.value), self.value) if floating else self.value


def _hll(b: BuildInput) -> Column:
    """Integers as longs (int and long values hash alike), anything else as its text."""
    value = b.number.cast("long") if b.integral else b.number.cast("string")
    return some(value, F.hll_sketch_agg(value, b.settings["lg_k"]))


def _kll(b: BuildInput) -> Column:
    value = b.number.cast("double")
    return some(value, F.kll_sketch_agg_double(value, b.settings["k"]))


def _event(pick: Callable[[Column], Column]) -> Callable[[BuildInput], Column]:
    """The earliest or latest event with a value, by (ts, batch, seq): the field the state keeps."""

    def build(b: BuildInput) -> Column:
        assert b.event is not None and b.field is not None
        return pick(F.when(b.value.isNotNull(), b.event))[b.field]

    return build


#: Each build primitive as the Spark aggregate of a bucket's events.
BUILD: dict[Build, Callable[[BuildInput], Column]] = {
    Build.COUNT: lambda b: F.count(b.arg if b.arg is not None else F.lit(1)),
    Build.SUM: lambda b: checked_sum(b.value, ansi=b.ansi) if b.integral_sum else F.sum(b.value),
    Build.MIN: lambda b: F.min(b.value),
    Build.MAX: lambda b: F.max(b.value),
    Build.MEAN: lambda b: F.avg(b.value),
    Build.M2: lambda b: F.var_pop(b.value) * F.count(b.value),
    Build.EARLIEST: _event(F.min),
    Build.LATEST: _event(F.max),
    Build.HLL: _hll,
    Build.KLL: _kll,
    # DDSketch and HDR skip NaN themselves.
    Build.DDS: lambda b: ddsketch_spark.build(b.value.cast("double"), b.settings["relative_accuracy"]),
    Build.HDR: lambda b: hdr_spark.build(b.value, b.settings["digits"], b.integral),
}
NOT_BUILT: dict[Build, str] = {
    Build.COLLECT: "lists (group_array) are kept by continuous queries only, in pandas",
}

#: Each merge primitive as the Spark aggregate of a group's partial values of one state column: ``(column,
#: checked, ansi)``, where a checked sum (a long state summed from values) must fail rather than wrap.
MERGE: dict[Merge, Callable[[Column, bool, bool], Column]] = {
    Merge.SUM: lambda c, checked, ansi: checked_sum(c, ansi=ansi) if checked else F.sum(c),
    Merge.MIN: lambda c, _checked, _ansi: F.min(c),
    Merge.MAX: lambda c, _checked, _ansi: F.max(c),
    Merge.KLL: lambda c, _checked, _ansi: some(c, F.kll_merge_agg_double(c)),
    Merge.HLL: lambda c, _checked, _ansi: some(c, F.hll_union_agg(c, True)),
    Merge.DDS: lambda c, _checked, _ansi: ddsketch_spark.merge_agg(c),
    Merge.HDR: lambda c, _checked, _ansi: hdr_spark.merge_agg(c),
}
NOT_MERGED: dict[Merge, str] = {
    Merge.COMBINE: "a function's states fold together through its combine over SparkOps (engine/rollup/partials.py)",
    Merge.EARLIEST: "one event's fields merge together: the min of a struct ranked by (ts, batch, seq)",
    Merge.LATEST: "one event's fields merge together: the max of a struct ranked by (ts, batch, seq)",
    Merge.CONCAT: "lists (group_array) are kept by continuous queries only, in pandas",
}
