"""``tiltframe rebuild --within``: a range of an aggregation recomputed from its inputs (after a source was
corrected) and put in place of the stored buckets of every level at once (docs/lifecycle.md).

Every level's buckets that overlap the range are replaced: for a finer level those inside it, for a
coarser one the whole bucket around it (a month holding the day rebuilt), recomputed from all the events
it holds (``engine.lifecycle.recompute``).  So that nothing outside the range changes, the rest of those coarse
buckets must be what the store holds: the finest level that keeps them is compared with the
recomputation there first, and the rebuild is refused, naming the buckets, when they differ (an input
changed or went away outside the range).

Exactly once with a running pipeline: the rows are replaced in one write transaction of the aggregation,
which excludes its batches, and only if no batch committed since the inputs were read; otherwise the
range is recomputed again.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa
from pyspark.sql import SparkSession

from tiltframe.aggregates.layout import AggregationLayout
from tiltframe.engine.inputs.hadoop_paths import Location
from tiltframe.engine.inputs.sources import FileInput
from tiltframe.engine.lifecycle.recompute import ATTEMPTS, Recomputation, level_span
from tiltframe.engine.lifecycle.verification import level_differences
from tiltframe.errors import StoreError
from tiltframe.model.app import AppSpec
from tiltframe.model.durations import Granularity
from tiltframe.retrieval.comparison import Difference, incomplete_before
from tiltframe.store.base import Store, StoreChanged

__all__ = ["RangeRebuild", "rebuild_range"]

#: The span of every bucket (a rebuild without a range).
EVERYTHING = (-(2**62), 2**62)


@dataclass
class RangeRebuild:
    """What ``rebuild`` replaced for one aggregation."""

    aggregation: str
    #: Per level: the span of buckets replaced and the rows written there.
    spans: dict[str, tuple[int, int]] = field(default_factory=dict)
    rows: dict[str, int] = field(default_factory=dict)
    files: int = 0
    events: int = 0
    notes: list[str] = field(default_factory=list)


def rebuild_range(spark: SparkSession, app: AppSpec, layout: AggregationLayout, store: Store, source: FileInput,
                  checkpoint: Location, within: tuple[int, int] | None) -> RangeRebuild:
    """Replace the buckets of every level of ``layout`` that overlap ``within`` by their recomputation from
    ``source``.  Without ``within``, every bucket: the measures a migration added get their history, so the
    recomputation must first equal the store in every other measure (inputs gone would lose history).

    Raises:
        StoreError: the recomputation differs from the store outside the range (or anywhere, without
            one), or batches kept committing.
    """
    for _ in range(ATTEMPTS):
        mark = store.commit_mark(layout)
        recomputation = Recomputation.of(spark, app, layout, store, source, checkpoint)
        try:
            spans = {g: level_span(within, g, layout.zone) if within is not None else EVERYTHING
                     for g in layout.spec.granularities}
            try:
                if within is None:
                    _check_everywhere(recomputation, store, layout)
                else:
                    _check_outside(recomputation, store, layout, within, spans)
            except StoreError:
                if store.commit_mark(layout) != mark:
                    continue  # a batch committed meanwhile is in the store, not in the recomputation
                raise
            levels = {g: (start, end, pa.Table.from_pandas(recomputation.level(g, within and (start, end))[
                list(layout.column_types)], preserve_index=False)) for g, (start, end) in spans.items()}
            try:
                written = store.replace_buckets(layout, levels, mark)
            except StoreChanged:
                continue
            return RangeRebuild(layout.name, {str(g): s for g, s in spans.items()},
                                {str(g): n for g, n in written.items()}, recomputation.files, recomputation.count,
                                recomputation.notes)
        finally:
            recomputation.close()
    msg = (f"aggregation {layout.name}: batches kept committing while the range was recomputed ({ATTEMPTS} "
           f"times); run rebuild again when the pipeline is quieter")
    raise StoreError(msg)


def _check_everywhere(recomputation: Recomputation, store: Store, layout: AggregationLayout) -> None:
    """Refuse when the inputs do not hold what the store holds (besides the measures still incomplete)."""
    skip = incomplete_before(layout, store.complete_from(layout))
    purged = store.purged_before(layout)
    differences = [d for g in layout.spec.granularities
                   for d in level_differences(recomputation, store, layout, g, None, purged.get(g), skip)[1]]
    if differences:
        raise StoreError(_differ(layout, "", differences))


def _differ(layout: AggregationLayout, where: str, differences: list[Difference]) -> str:
    shown = "; ".join(f"{d.level} bucket {d.bucket} key {d.key} {d.column or 'row'}: stored {d.stored}, "
                      f"recomputed {d.recomputed}" for d in differences[:3])
    return (f"aggregation {layout.name}: the inputs differ from the store{where} ({len(differences)} differences: "
            f"{shown})")


def _check_outside(recomputation: Recomputation, store: Store, layout: AggregationLayout, within: tuple[int, int],
                   spans: dict[Granularity, tuple[int, int]]) -> None:
    """Refuse when the parts of the replaced buckets outside ``within`` differ from what the store holds."""
    start = min(s for s, _ in spans.values())
    end = max(e for _, e in spans.values())
    if start >= within[0] and end <= within[1]:
        return
    purged = store.purged_before(layout)
    kept = [g for g in layout.spec.granularities if purged.get(g, start) <= start]
    if not kept:
        recomputation.notes.append("no level keeps the buckets around the range whole: the parts of coarse buckets "
                                   "outside it were not checked against the store")
        return
    g = kept[0]
    skip = incomplete_before(layout, store.complete_from(layout))
    differences = []
    for lo, hi in ((start, within[0]), (within[1], end)):
        if lo < hi:
            differences += level_differences(recomputation, store, layout, g, (lo, hi), purged.get(g), skip)[1]
    if differences:
        where = f" outside the range, in the {g} buckets around it that coarser levels hold"
        msg = (f"{_differ(layout, where, differences)}; rebuild a range that covers them (or the whole coarse "
               f"buckets), or run verify to see them all")
        raise StoreError(msg)
