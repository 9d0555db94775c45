"""``tiltframe migrate --input`` of a definition that changes what every stored row depends on (its zone,
keys or time attribute), or adds a level finer than every stored one: the whole rollup recomputed from
its inputs and swapped in (docs/lifecycle.md), provided they still hold every event the store holds.

The recomputation reads the files the running pipeline has committed (``engine.lifecycle.recompute``), while the old
rollup stays readable and its pipeline goes on.  The swap (``Store.swap_rollup``) happens only if no batch
committed in between, else the rollup is recomputed again; from then on the old pipeline's batches are
refused, and the new definition's pipeline goes on from the old one's checkpoint, so each file is counted
once: the ones before the swap by the recomputation, the later ones by the pipeline.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa
from pyspark.sql import SparkSession

from tiltframe.aggregates.layout import AggregationLayout
from tiltframe.engine.inputs.hadoop_paths import Location
from tiltframe.engine.inputs.sources import FileInput
from tiltframe.engine.lifecycle.recompute import ATTEMPTS, Recomputation
from tiltframe.errors import StoreError
from tiltframe.model.app import AppSpec
from tiltframe.store.base import Store, StoreChanged

__all__ = ["RollupSwap", "swap_rollup"]


@dataclass
class RollupSwap:
    """What a swap did: the plan's steps, and the rows written per level."""

    aggregation: str
    steps: list[str]
    rows: dict[str, int] = field(default_factory=dict)
    files: int = 0
    events: int = 0
    notes: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        rows = ", ".join(f"{level} {n:,}" for level, n in self.rows.items())
        return [*self.steps, f"rebuilt from {self.events:,} events of {self.files:,} input files beside the stored "
                f"rollup, then swapped in for it (rows: {rows}); its pipeline goes on from the earlier one's "
                f"checkpoint", *self.notes]


def swap_rollup(spark: SparkSession, app: AppSpec, layout: AggregationLayout, store: Store, source: FileInput,
                checkpoint: Location) -> RollupSwap:
    """Recompute every level of ``layout`` from ``source`` (the files the pipeline whose checkpoint is
    ``checkpoint`` has committed) and swap it in for the stored rollup of its earlier definition.

    Raises:
        StoreError: batches kept committing, or the store refused the swap.
    """
    for _ in range(ATTEMPTS):
        mark = store.commit_mark(layout)
        recomputation = Recomputation.of(spark, app, layout, store, source, checkpoint, fresh=True)
        try:
            levels = {g: pa.Table.from_pandas(recomputation.level(g)[list(layout.column_types)], preserve_index=False)
                      for g in layout.spec.granularities}
            try:
                change, written = store.swap_rollup(layout, levels, recomputation.count, mark)
            except StoreChanged:
                continue
            return RollupSwap(layout.name, change.steps(), {str(g): n for g, n in written.items()},
                              recomputation.files, recomputation.count, recomputation.notes)
        finally:
            recomputation.close()
    msg = (f"aggregation {layout.name}: batches kept committing while it was rebuilt ({ATTEMPTS} times); stop its "
           f"pipeline and run migrate again")
    raise StoreError(msg)
