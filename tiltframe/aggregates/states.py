"""The primitives every partial state is made of: how a state column is built from a bucket's events
(:class:`Build`) and how two partial values of it merge (:class:`Merge`).

The registry composes aggregates from them; each target (Spark, the store's SQL, pandas, the sketch
libraries) translates every primitive once.
"""

from __future__ import annotations

import enum

#: The range of a long (64-bit) state: a sum beyond it is refused, never wrapped.
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1


class Build(enum.Enum):
    """How a state column is computed from the events of one bucket."""

    SUM = "sum"
    COUNT = "count"
    MIN = "min"
    MAX = "max"
    #: Mean of the non-null values (Spark's ``avg``).
    MEAN = "mean"
    #: Sum of squared deviations from the mean (``var_pop * count``; Spark computes it stably).
    M2 = "m2"
    #: A field (``State.field``) of the earliest or latest non-null event by (event time, arrival).
    EARLIEST = "earliest"
    LATEST = "latest"
    #: Apache DataSketches HLL sketch (Spark's ``hll_sketch_agg``), KLL doubles sketch
    #: (``kll_sketch_agg_double``), tiltframe's DDSketch (``tiltframe.aggregates.sketches.ddsketch``) and HDR
    #: histogram (``tiltframe.aggregates.sketches.hdr``).
    HLL = "hll"
    KLL = "kll"
    DDS = "dds"
    HDR = "hdr"
    #: The non-null values themselves, as a list (Spark's ``collect_list``).
    COLLECT = "collect"


class Merge(enum.Enum):
    """How two partial values of one state column combine (associative and commutative)."""

    SUM = "sum"
    MIN = "min"
    MAX = "max"
    #: The states of one aggregate merge together through its ``combine`` function (Chan's formula for
    #: moments, the earlier or later event for first/last).
    COMBINE = "combine"
    #: The states of one aggregate with this merge are the fields of one event (``State.field``: ts,
    #: batch, seq, value); the merge keeps those of the earliest or the latest event by (ts, batch, seq).
    EARLIEST = "earliest"
    LATEST = "latest"
    #: Sketch unions; the states are binaries merged by the sketch library outside a database.
    HLL = "hll_union"
    KLL = "kll_merge"
    DDS = "dds_merge"
    HDR = "hdr_merge"
    #: Lists concatenated.
    CONCAT = "concat"

    @property
    def is_sketch(self) -> bool:
        return self in (Merge.HLL, Merge.KLL, Merge.DDS, Merge.HDR)
