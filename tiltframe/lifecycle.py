"""The Python API of a rollup's life after its first run (docs/lifecycle.md): ``migrate`` its tables to a
changed definition, ``plan_changes`` without changing anything, ``verify`` it against the raw events and
``rebuild`` a range of it from them.  The CLI's ``migrate``, ``validate -d``, ``verify`` and ``rebuild``
are one call each into this module; ``tiltframe`` exports them beside the rest of ``api``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from tiltframe.errors import StoreError, UsageError
from tiltframe.model.app import AppSpec
from tiltframe.store.open_stores import StoreRegistry, default_data_dir

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from tiltframe.aggregates.layout import AggregationLayout
    from tiltframe.engine.inputs.hadoop_paths import Location
    from tiltframe.engine.inputs.sources import FileInput
    from tiltframe.engine.lifecycle.range_rebuilds import RangeRebuild
    from tiltframe.engine.lifecycle.verification import Verification
    from tiltframe.store.base import Store
    from tiltframe.store.lifecycle.definitions import DefinitionPlan

__all__ = ["migrate", "pending_changes", "plan_changes", "rebuild", "verify"]


def migrate(
    app: AppSpec, *, data_dir: str | Path | None = None, shard_id: str | None = None, partition_by_id: bool = False,
    dry_run: bool = False, inputs: Mapping[str, str | Path | FileInput] | None = None,
    checkpoint_dir: str | Path | None = None, spark: SparkSession | None = None,
) -> dict[str, list[str]]:
    """Upgrade the stored tables to what ``app`` needs; returns the changes in words per aggregation or
    table (an empty list: up to date), and running it again changes nothing.  A pipeline of the earlier
    definition still running is refused at its next batch; start the app as it is now after.
    ``dry_run``: only say what would change (:func:`plan_changes`).

    - An aggregation whose definition changed: its stored tables follow the new one (measures and levels
      removed and added, docs/lifecycle.md); its pipeline's checkpoint goes on at its next start.  An
      aggregation of that name that another app defined is left alone.  With ``inputs`` (as given to
      ``run``), the measures added get their history from them (``rebuild`` of every bucket, once the
      inputs are found to hold what the store holds); otherwise they read NULL before they are complete.
      A changed zone, key or time attribute, or a level finer than every stored one, needs ``inputs``:
      the whole rollup is rebuilt from them beside the stored one and swapped in.

    - An aggregation partitioned by shard whose tables were made without shards: they gain a ``SHARD_ID``
      key column and their rows become ``shard_id``'s (the deployment that wrote them, which then keeps
      that id).
    - A pre-aggregated table whose definition changed: its stored rows follow the new definition
      (docs/preaggregation.md).
    - Sketch states stored in an older format (DDSketch's JSON) are rewritten in the current one (the
      DDSketch libraries' protobuf); readers take both, so this only makes them readable by other tools.
    """
    from tiltframe.aggregates.layout import AggregationLayout
    from tiltframe.engine.rollup.shards import Deployment, claim_shard
    from tiltframe.store.lifecycle.definitions import backfill_hint
    from tiltframe.store.raw_rows import unfolded_raw_rows

    _check_inputs(app, inputs)
    if dry_run:
        return plan_changes(app, data_dir=data_dir, partition_by_id=partition_by_id, inputs=inputs)
    deployment = Deployment(shard_id, partition_by_id)
    directory = data_dir or default_data_dir()
    stores = StoreRegistry(directory)
    try:
        changed: dict[str, list[str]] = {}
        for agg in app.aggregations:
            layout = AggregationLayout.of(app, agg.name, partition_by_default=partition_by_id)
            store = stores.for_aggregation(agg)
            changes = changed[agg.name] = []
            if layout.table is None and inputs and _rebuilds(store, layout):
                swapped = _swap(app, layout, store, inputs, directory, checkpoint_dir, spark)
                if swapped:  # else no input feeds it, and change_definition says what to give
                    # The checkpoint is carried at the next start: the old pipeline may still run on it.
                    changes += swapped
                    continue
            if layout.table is None:
                done = store.change_definition(layout)
                changes += done.steps() if done is not None else []
                if done is not None and done.other_app:
                    continue
                if done is not None:
                    _carry_checkpoint(layout, store, Path(directory), checkpoint_dir)
                fed = _input_of(app, layout, inputs) is not None
                if inputs and fed and store.complete_from(layout):
                    changes += _backfill(app, layout, store, inputs, directory, checkpoint_dir, spark)
                elif done is not None and done.added and not fed:
                    changes.append(backfill_hint([m.name for m in done.added], layout.input_stream))
            if layout.table is not None:
                changes += store.ensure_schema(layout)
                if unfolded_raw_rows(store, layout.table, layout):
                    from tiltframe.engine.lifecycle.inserts import fold_raw_rows
                    from tiltframe.engine.spark.session import get_session

                    stats = fold_raw_rows(get_session(), layout.table, layout, store)
                    if stats is not None:
                        changes.append(
                            f"{stats.events_read} rows stored raw before pre-aggregation folded into the rollup, "
                            f"{stats.events_rejected} of them rejected (recorded with their reason)"
                        )
            elif layout.partitioned:
                shard = deployment.shard_for(agg)
                tables = store.add_shards(layout, shard)
                if tables:
                    claim_shard(directory, shard)
                    changes.append(f"added SHARD_ID to {', '.join(tables)} (existing rows: shard {shard})")
            changes += [f"{rows:,} rows of {table} hold their sketch states in the current format now"
                        for table, rows in store.rewrite_older_states(layout).items()]
        return changed
    finally:
        stores.close()


def _carry_checkpoint(layout: AggregationLayout, store: Store, directory: Path,
                      checkpoint_dir: str | Path | None) -> None:
    """The checkpoint of the definition a migration changed from goes on as this one's now (else at the
    pipeline's next start, for checkpoints on a Hadoop file system, which need Spark)."""
    from tiltframe.engine.inputs.filesystems import checkpoint_root
    from tiltframe.engine.inputs.hadoop_paths import HadoopPath
    from tiltframe.engine.rollup.identity import carry_checkpoint
    from tiltframe.engine.rollup.markers import checkpoint_dir as folder_of

    root = checkpoint_root(checkpoint_dir, directory)
    if not isinstance(root, HadoopPath):
        carry_checkpoint(store, layout, folder_of(directory, layout, root))


def _rebuilds(store: Store, layout: AggregationLayout) -> bool:
    """Whether the stored rollup of ``layout``'s aggregation is rebuilt from the inputs to follow it: what
    every row depends on changed, or a level was added finer than every stored one (no stored level holds
    its buckets)."""
    return _rebuilt(store.definition_plan(layout), layout)


def _rebuilt(change: DefinitionPlan | None, layout: AggregationLayout) -> bool:
    """Whether ``change`` rebuilds the whole rollup from the inputs (see :func:`_rebuilds`)."""
    if change is None or change.other_app:
        return False
    order = [g.table_suffix for g in layout.spec.granularities]
    kept = [order.index(s) for s in change.stored.levels if s in order]
    finer = any(order.index(s) < min(kept, default=len(order)) for s in change.added_levels)
    return bool(change.rebuild) or finer


def _swap(app: AppSpec, layout: AggregationLayout, store: Store, inputs: Mapping[str, str | Path | FileInput],
          directory: str | Path, checkpoint_dir: str | Path | None, spark: SparkSession | None) -> list[str]:
    """Rebuild ``layout``'s rollup from ``inputs`` as the files its running pipeline committed, beside the
    stored one, and swap it in (``engine.lifecycle.rebuild_swaps``); what was done, in words."""
    from tiltframe.engine.lifecycle.rebuild_swaps import swap_rollup

    with contextlib.closing(_recomputations(app, inputs, directory, None, layout.name, checkpoint_dir,
                                            spark)) as found:
        for t in found:
            return swap_rollup(t.spark, app, layout, store, t.source, t.checkpoint).lines()
    return []


def _backfill(app: AppSpec, layout: AggregationLayout, store: Store, inputs: Mapping[str, str | Path | FileInput],
              directory: str | Path, checkpoint_dir: str | Path | None, spark: SparkSession | None) -> list[str]:
    """Give the measures a migration added their history from ``inputs``; what was done, in words."""
    from tiltframe.engine.lifecycle.range_rebuilds import rebuild_range

    incomplete = store.complete_from(layout)
    with contextlib.closing(_recomputations(app, inputs, directory, None, layout.name, checkpoint_dir,
                                            spark)) as found:
        for t in found:
            try:
                done = rebuild_range(t.spark, app, t.layout, t.store, t.source, t.checkpoint, None)
            except StoreError as exc:
                return [f"measures {', '.join(incomplete)} not backfilled, so they read NULL before they are "
                        f"complete: {exc}"]
            store.mark_complete(layout, list(incomplete))
            return [f"measures {', '.join(incomplete)} backfilled from {done.events:,} events of {done.files:,} "
                    f"input files: complete from the start"]
    return []


def plan_changes(
    app: AppSpec, *, data_dir: str | Path | None = None, partition_by_id: bool = False,
    inputs: Mapping[str, str | Path | FileInput] | None = None,
) -> dict[str, list[str]]:
    """What ``migrate`` would change in the stored tables of each aggregation of ``app``, in words (an empty
    list: nothing; an aggregation not stored yet says so), without changing anything or starting Spark.
    With ``inputs`` (as given to ``migrate``), the plan says what it would build from them: the measures
    backfilled or the rollup rebuilt, its levels and the input read; without, how ``--input`` would."""
    out: dict[str, list[str]] = {}
    for layout, _, change in _plans(app, data_dir, partition_by_id):
        if change is None:
            out[layout.name] = ["not stored yet: its tables are made by its first run"]
            continue
        incomplete = [m for m in change.stored.complete_from if change.new.measure(m) is not None]
        out[layout.name] = change.steps() + _from_inputs(app, layout, change, incomplete, inputs)
    return out


def _check_inputs(app: AppSpec, inputs: Mapping[str, object] | None) -> None:
    """Every input names a stream (or table) of ``app``: one that names none would backfill nothing."""
    streams = {s.name for s in app.streams}
    strangers = [name for name in inputs or {} if app.input_stream(name) not in streams]
    if strangers:
        msg = (f"--input names stream(s) {', '.join(strangers)} not defined in the app (streams: "
               f"{', '.join(sorted(streams))})")
        raise UsageError(msg)


def _input_of(app: AppSpec, layout: AggregationLayout, inputs: Mapping[str, str | Path | FileInput] | None
              ) -> str | None:
    """The input given for the stream that feeds ``layout``'s rollup, as written (None: none given)."""
    for name, value in (inputs or {}).items():
        if app.input_stream(name) == layout.input_stream:
            return str(getattr(value, "path", value))
    return None


def _from_inputs(app: AppSpec, layout: AggregationLayout, change: DefinitionPlan, incomplete: list[str],
                 inputs: Mapping[str, str | Path | FileInput] | None) -> list[str]:
    """The steps of a plan that read the inputs: what ``migrate`` with ``inputs`` would build from them
    (which levels, from which input), or what ``--input`` would do where none feeds the rollup."""
    from tiltframe.store.lifecycle.definitions import backfill_hint

    if change.other_app:
        return []
    stream, given = layout.input_stream, _input_of(app, layout, inputs)
    levels = ", ".join(str(g) for g in layout.spec.granularities)
    missing = "" if not inputs or given is not None else f"no --input for stream {stream}, which feeds it: "
    if _rebuilt(change, layout):
        if given is not None:
            return [f"every level ({levels}) rebuilt from input {stream}={given} (the files its pipeline "
                    f"committed) beside the stored rollup, then swapped in for it"]
        if change.rebuild:
            return [f"{missing}refused without --input {stream}=PATH: every level must be rebuilt from the inputs"]
        return [f"{missing}with --input {stream}=PATH, every level is rebuilt from the inputs instead, so the level "
                f"added holds every bucket they hold"]
    measures = [*(m.name for m in change.added), *(m for m in incomplete if m not in {a.name for a in change.added})]
    if not measures:
        return []
    if given is not None:
        return [f"measures {', '.join(measures)} backfilled from input {stream}={given}: every level ({levels}) "
                f"recomputed from the files its pipeline read, once they are found to hold what the store holds "
                f"(else the measures read NULL before they are complete)"]
    return [missing + backfill_hint(measures, stream)] if change.added else []


def pending_changes(app: AppSpec, *, data_dir: str | Path | None = None) -> dict[str, list[str]]:
    """Per stored aggregation of ``app`` whose tables ``migrate`` must change before they serve it (reads
    answer from what they hold until then): the steps that change what is stored."""
    return {layout.name: change.steps(notes=False) for layout, _, change in _plans(app, data_dir, False)
            if change is not None and not change.shapes_nothing}


def _plans(app: AppSpec, data_dir: str | Path | None,
           partition_by_id: bool) -> Iterator[tuple[AggregationLayout, Store, DefinitionPlan | None]]:
    """Each aggregation of ``app`` (not a pre-aggregated table's rollup), its store and the plan from its
    stored definition (None: not stored)."""
    from tiltframe.aggregates.layout import AggregationLayout

    stores = StoreRegistry(data_dir or default_data_dir())
    try:
        for agg in app.aggregations:
            layout = AggregationLayout.of(app, agg.name, partition_by_default=partition_by_id)
            if layout.table is None:
                store = stores.for_aggregation(agg)
                yield layout, store, store.definition_plan(layout)
    finally:
        stores.close()


def verify(
    app: AppSpec,
    inputs: Mapping[str, str | Path | FileInput],
    *,
    data_dir: str | Path | None = None,
    within: tuple[object, object] | None = None,
    aggregation: str | None = None,
    checkpoint_dir: str | Path | None = None,
    spark: SparkSession | None = None,
) -> dict[str, Verification]:
    """Recompute every stored level of each aggregation fed by ``inputs`` (or the one named) from the raw
    events with one plain Spark batch job, straight from the events to each level, and compare it with the
    store, bucket by bucket and key by key (docs/lifecycle.md).  ``within``: only the buckets that start in
    that range (any ``within`` form: ``"2024-01-**"``, ``"last 1 day"``, ISO times, epoch ms; the end may be
    None for one period)."""
    from tiltframe.engine.lifecycle.verification import verify as check

    return {t.layout.name: check(t.spark, app, t.layout, t.store, t.source, t.checkpoint, t.span)
            for t in _recomputations(app, inputs, data_dir, within, aggregation, checkpoint_dir, spark)}


def rebuild(
    app: AppSpec,
    inputs: Mapping[str, str | Path | FileInput],
    *,
    within: tuple[object, object],
    data_dir: str | Path | None = None,
    aggregation: str | None = None,
    checkpoint_dir: str | Path | None = None,
    spark: SparkSession | None = None,
) -> dict[str, RangeRebuild]:
    """Recompute the range ``within`` of each aggregation fed by ``inputs`` (or the one named) from the
    inputs as they are now (after a source was corrected) and replace the stored buckets of every level
    that overlap it, atomically and exactly once with respect to a running pipeline (docs/lifecycle.md)."""
    from tiltframe.engine.lifecycle.range_rebuilds import rebuild_range

    return {t.layout.name: rebuild_range(t.spark, app, t.layout, t.store, t.source, t.checkpoint, t.span)
            for t in _recomputations(app, inputs, data_dir, within, aggregation, checkpoint_dir, spark)}


class _Recomputed(NamedTuple):
    """One aggregation to recompute from its input."""

    spark: SparkSession
    layout: AggregationLayout
    store: Store
    source: FileInput
    #: The checkpoint of the pipeline whose files are read (``identity.going_on_from``).
    checkpoint: Location
    #: The range, epoch ms in the aggregation's zone (None: every bucket).
    span: tuple[int, int] | None


def _recomputations(
    app: AppSpec, inputs: Mapping[str, str | Path | FileInput], data_dir: str | Path | None,
    within: tuple[object, object] | None, aggregation: str | None, checkpoint_dir: str | Path | None,
    spark: SparkSession | None,
) -> Iterator[_Recomputed]:
    """Per aggregation fed by ``inputs`` (or the one named): what a recomputation from them needs."""
    from tiltframe.aggregates.layout import AggregationLayout
    from tiltframe.engine.inputs.filesystems import checkpoint_root
    from tiltframe.engine.inputs.sources import FileInput
    from tiltframe.engine.rollup.identity import going_on_from
    from tiltframe.engine.rollup.markers import checkpoint_dir as folder_of
    from tiltframe.engine.spark.session import get_session
    from tiltframe.timeutil.ranges import within_range

    directory = Path(data_dir or default_data_dir())
    roots = {app.input_stream(name): value if isinstance(value, FileInput) else FileInput(str(value))
             for name, value in inputs.items()}
    checkpoints = checkpoint_root(checkpoint_dir, directory)
    session = spark or get_session()
    stores = StoreRegistry(directory)
    try:
        for agg in app.aggregations_named(aggregation):
            source = roots.get(app.root_stream(agg.source))
            if source is None:
                continue
            layout = AggregationLayout.of(app, agg.name)
            span = None if within is None else within_range(*within, zone=layout.zone)
            store = stores.for_aggregation(agg)
            checkpoint = going_on_from(store, layout, folder_of(directory, layout, checkpoints))
            yield _Recomputed(session, layout, store, source, checkpoint, span)
    finally:
        stores.close()
