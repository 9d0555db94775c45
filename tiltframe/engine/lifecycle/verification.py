"""``tiltframe verify``: every stored level of an aggregation recomputed from the raw inputs
(``engine.lifecycle.recompute``: one plain Spark batch job, each level straight from the events) and compared with
the store, bucket by bucket and key by key (``retrieval.comparison``; docs/lifecycle.md)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from pyspark.sql import SparkSession

from tiltframe.aggregates.layout import AGG_TIMESTAMP, AggregationLayout
from tiltframe.engine.inputs.hadoop_paths import Location
from tiltframe.engine.inputs.sources import FileInput
from tiltframe.engine.lifecycle.recompute import ATTEMPTS, Recomputation, level_span
from tiltframe.model.app import AppSpec
from tiltframe.model.durations import Granularity
from tiltframe.retrieval.comparison import Difference, compare, incomplete_before
from tiltframe.store.base import Store
from tiltframe.store.reads.pandas_merges import finalize, merge_rows

__all__ = ["Verification", "level_differences", "verify"]


@dataclass
class Verification:
    """What ``verify`` compared and found for one aggregation."""

    aggregation: str
    #: Per level: the (bucket, key) rows compared.
    rows: dict[str, int] = field(default_factory=dict)
    differences: list[Difference] = field(default_factory=list)
    files: int = 0
    events: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.differences


def verify(spark: SparkSession, app: AppSpec, layout: AggregationLayout, store: Store, source: FileInput,
           checkpoint: Location, within: tuple[int, int] | None = None) -> Verification:
    """Recompute ``layout``'s levels from ``source`` (the input of its root stream) and compare them with
    ``store``'s; ``within``: only buckets that start in ``[start, end)``.  Buckets a level no longer keeps
    (purged), and a measure added later in the buckets before it is complete, are not compared."""
    for _ in range(ATTEMPTS - 1):
        mark = store.commit_mark(layout)
        result = _compared(spark, app, layout, store, source, checkpoint, within)
        # A batch a running pipeline committed meanwhile is in the store, not in the recomputation.
        if not result.differences or store.commit_mark(layout) == mark:
            return result
    return _compared(spark, app, layout, store, source, checkpoint, within)


def _compared(spark: SparkSession, app: AppSpec, layout: AggregationLayout, store: Store, source: FileInput,
              checkpoint: Location, within: tuple[int, int] | None) -> Verification:
    recomputation = Recomputation.of(spark, app, layout, store, source, checkpoint)
    result = Verification(layout.name, files=recomputation.files, events=recomputation.count,
                          notes=recomputation.notes)
    try:
        purged = store.purged_before(layout)
        skip = incomplete_before(layout, store.complete_from(layout))
        for g in layout.spec.granularities:
            result.rows[str(g)], found = level_differences(recomputation, store, layout, g, within, purged.get(g),
                                                           skip)
            result.differences += found
    finally:
        recomputation.close()
    return result


def level_differences(recomputation: Recomputation, store: Store, layout: AggregationLayout, g: Granularity,
                      within: tuple[int, int] | None, purged_before: int | None,
                      skip: Mapping[str, int]) -> tuple[int, list[Difference]]:
    """Level ``g`` as stored against its recomputation, for the buckets that start in ``within`` (every bucket
    without it) and not before ``purged_before``; returns the rows compared and the differences.  ``skip``:
    per output, the bucket start before which it is not compared (``incomplete_before``)."""
    start, end = level_span(within, g, layout.zone)
    stored = finalize(merge_rows(store.read(layout, g, start, end), layout), layout)
    rows = recomputation.level(g, within)
    kll = [s.name for s in layout.states if s.merge.name == "KLL"]  # a KLL check reads the recomputed sketch
    recomputed = finalize(rows, layout).assign(**{s: rows[s] for s in kll})
    if purged_before is not None:
        recomputed = recomputed[recomputed[AGG_TIMESTAMP] >= purged_before]
        stored = stored[stored[AGG_TIMESTAMP] >= purged_before]
    if within is not None:
        stored = stored[(stored[AGG_TIMESTAMP] >= within[0]) & (stored[AGG_TIMESTAMP] < within[1])]
    compared = max(len(stored), len(recomputed))
    return compared, compare(str(g), stored.reset_index(drop=True), recomputed.reset_index(drop=True), layout, skip)
