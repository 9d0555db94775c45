"""``tiltframe verify``: every stored level of an aggregation recomputed from the raw inputs
(``engine.recompute``: one plain Spark batch job, each level straight from the events) and compared with
the store, bucket by bucket and key by key (``retrieval.comparison``; docs/lifecycle.md)."""

from __future__ import annotations

from dataclasses import dataclass, field

from pyspark.sql import SparkSession

from tiltframe.engine.hadoop_paths import Location
from tiltframe.engine.recompute import Recomputation, level_span
from tiltframe.engine.sources import FileInput
from tiltframe.model.app import AppSpec
from tiltframe.retrieval.comparison import Difference, compare, incomplete_before
from tiltframe.store.base import Store
from tiltframe.store.layout import AGG_TIMESTAMP, AggregationLayout
from tiltframe.store.pandas_merges import finalize, merge_rows

__all__ = ["Verification", "verify"]


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
    recomputation = Recomputation.of(spark, app, layout, store, source, checkpoint)
    result = Verification(layout.name, files=recomputation.files, events=recomputation.count,
                          notes=recomputation.notes)
    try:
        purged = {g.table_suffix: at for g, at in store.purged_before(layout).items()}
        skip = incomplete_before(layout, store.complete_from(layout))
        kll = [s.name for s in layout.states if s.merge.name == "KLL"]  # a KLL check reads the sketch
        for g in layout.spec.granularities:
            start, end = level_span(within, g, layout.zone)
            stored = finalize(merge_rows(store.read(layout, g, start, end), layout), layout)
            rows = recomputation.level(g, within)
            recomputed = finalize(rows, layout).assign(**{s: rows[s] for s in kll})
            cut = purged.get(g.table_suffix)
            if cut is not None:
                recomputed = recomputed[recomputed[AGG_TIMESTAMP] >= cut]
                stored = stored[stored[AGG_TIMESTAMP] >= cut]
            if within is not None:
                stored = stored[(stored[AGG_TIMESTAMP] >= within[0]) & (stored[AGG_TIMESTAMP] < within[1])]
            result.rows[str(g)] = max(len(stored), len(recomputed))
            result.differences += compare(str(g), stored.reset_index(drop=True), recomputed, layout, skip)
    finally:
        recomputation.close()
    return result
