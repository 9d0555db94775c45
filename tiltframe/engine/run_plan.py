"""What a run needs, worked out once from the app, its inputs and its options before any query starts: the
inputs by stream, where the data and the checkpoints live, the Spark session, the stores, and a pipeline for
each aggregation fed here, opened over its store and checkpoint.

:func:`plan_run` goes from the checks without side effects to the ones with: the app and the inputs' names
first, then the checkpoint directory (a local one that cannot work fails before Spark starts), Spark (which a
checkpoint directory on a Hadoop file system is reached through), the shards claimed in the data directory,
and last each aggregation's store and checkpoint (``engine.rollup.identity``: a store that lost batches is
found here, and a rebuild drops what they hold).  The runner (``engine.runner``) starts the queries on it.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

from tiltframe.aggregates.layout import AggregationLayout
from tiltframe.engine.events.derived import derive
from tiltframe.engine.inputs.filesystems import check_checkpoint_root, checkpoint_root
from tiltframe.engine.inputs.hadoop_paths import Location
from tiltframe.engine.inputs.sources import FileInput, read_stream
from tiltframe.engine.rollup.identity import open_pipeline
from tiltframe.engine.rollup.markers import checkpoint_dir
from tiltframe.engine.rollup.pipeline import AggregationPipeline
from tiltframe.engine.rollup.shards import claim_shard
from tiltframe.engine.run_options import RunOptions
from tiltframe.engine.spark.session import get_session
from tiltframe.errors import UsageError
from tiltframe.lang.checks.cross_references import check_runnable
from tiltframe.model.app import AppSpec
from tiltframe.store.lifecycle.compaction import Compactor
from tiltframe.store.lifecycle.purge import Purger
from tiltframe.store.open_stores import StoreRegistry, default_data_dir

logger = logging.getLogger(__name__)

InputLike = FileInput | str | Path | DataFrame


@dataclass
class RunPlan:
    """A run's inputs, places, session and stores, and the pipelines of the aggregations it writes."""

    app: AppSpec
    options: RunOptions
    #: Each input stream's source (a table's input: its rows' stream), a folder as a :class:`FileInput`.
    inputs: dict[str, FileInput | DataFrame]
    #: Absolute with Python's working directory: Spark would resolve a relative one against the JVM's,
    #: which differs once the process has changed directory (a notebook's %cd).
    data_dir: Path
    #: Where the aggregations' and retrieval joins' checkpoints live (``--checkpoint-dir``).
    checkpoint_root: Location
    spark: SparkSession
    stores: StoreRegistry
    #: Aggregations without input are only read (seed 001's read-only use): never written or purged.
    readers: StoreRegistry
    #: The pipeline of each aggregation fed here, in the app's order.
    pipelines: dict[str, AggregationPipeline] = field(default_factory=dict)

    def source(self, stream: str) -> FileInput | DataFrame | None:
        """The input ``stream``'s events come from: its own, or its input stream's (stream queries)."""
        return self.inputs.get(self.app.root_stream(stream))

    def deriver(self, stream: str, time_attribute: str | None) -> Callable[[DataFrame], DataFrame] | None:
        """For a stream that stream queries write: its rows made from its input stream's (None otherwise)."""
        if self.app.writer_of(stream) is None:
            return None
        return functools.partial(derive, app=self.app, stream=stream, time_attribute=time_attribute)

    def events(self, source: FileInput | DataFrame, stream: str, time_attribute: str | None, checkpoint: Location,
               what: str) -> DataFrame:
        """The rows of ``stream`` as a (streaming) DataFrame: read from its input, derived if queries write it;
        ``checkpoint``: the query's that reads them (``what``), which must have read the same folder."""
        root = self.app.stream(self.app.root_stream(stream))
        events = source if isinstance(source, DataFrame) else read_stream(self.spark, source, root, checkpoint, what)
        deriver = self.deriver(stream, time_attribute)
        return deriver(events) if deriver is not None else events

    def checkpoint_dir(self, layout: AggregationLayout) -> Location:
        """The checkpoint directory of ``layout``'s pipeline (its pipeline marker, store note and Spark's)."""
        return checkpoint_dir(self.data_dir, layout, self.checkpoint_root)


def plan_run(app: AppSpec, inputs: Mapping[str, InputLike], options: RunOptions, *,
             spark: SparkSession | None = None, stores: StoreRegistry | None = None) -> RunPlan:
    """Check the app and its inputs, reach the data and checkpoint directories, and open a pipeline for each
    aggregation fed here; ``stores``: the registry the pipelines write through (default: a new one; the
    run's ``close`` closes it either way)."""
    check_runnable(app)
    sources = bind_inputs(app, inputs, options)
    data_dir = Path(options.data_dir or default_data_dir()).absolute()
    root = checkpoint_root(options.checkpoint_dir, data_dir)
    session = spark or get_session()
    check_checkpoint_root(root)
    plan = RunPlan(app, options, sources, data_dir, root, session, stores or StoreRegistry(data_dir),
                   StoreRegistry(data_dir, read_only=True))
    plan.pipelines = open_pipelines(plan)
    return plan


def bind_inputs(app: AppSpec, inputs: Mapping[str, InputLike], options: RunOptions) -> dict[str, FileInput | DataFrame]:
    """``inputs`` by the stream they feed (a table's: its rows' stream), a folder as a :class:`FileInput` with
    the options' bounds; a usage error for a stream the app does not define or one a stream query writes."""
    named = {app.input_stream(name): source for name, source in inputs.items()}
    strangers = [name for name in named if name not in {s.name for s in app.streams}]
    if strangers:
        names = ", ".join(s.name for s in app.streams)
        msg = f"--input names stream(s) {', '.join(strangers)} not defined in the app (streams: {names})"
        raise UsageError(msg)
    made = [(name, writer) for name in named if (writer := app.writer_of(name)) is not None]
    if made:
        name, writer = made[0]
        line = f" (line {writer.pos.line})" if writer.pos else ""
        msg = (f"--input {name}: stream {name} is written by a stream query{line}; give the input to stream "
               f"{app.root_stream(name)}, whose events it is made from")
        raise UsageError(msg)
    return {name: _as_input(source, options) for name, source in named.items()}


def _as_input(value: InputLike, options: RunOptions) -> FileInput | DataFrame:
    if isinstance(value, DataFrame | FileInput):
        return value
    return FileInput(str(value), max_files_per_trigger=options.max_files_per_trigger,
                     max_bytes_per_trigger=options.max_bytes_per_trigger)


def open_pipelines(plan: RunPlan) -> dict[str, AggregationPipeline]:
    """The pipeline of each aggregation fed here, over its store and checkpoint, after the data directory
    claimed the shards they write (an aggregation without input is only read: none)."""
    app, deployment = plan.app, plan.options.deployment
    written = [agg for agg in app.aggregations if plan.source(agg.source) is not None]
    layouts = {agg.name: AggregationLayout.of(app, agg.name, partition_by_default=deployment.partition_by_id)
               for agg in written}
    # A pre-aggregated table's rows name their worker; other partitioned aggregations, the deployment.
    shards = {agg.name: deployment.shard_for(agg) for agg in written
              if layouts[agg.name].partitioned and agg.workers is None}
    for shard in set(shards.values()):
        claim_shard(plan.data_dir, shard)
    pipelines: dict[str, AggregationPipeline] = {}
    for agg in app.aggregations:
        if agg.name not in layouts:
            logger.info("stream %s has no input; aggregation %s is only read", agg.source, agg.name)
            continue
        layout = layouts[agg.name]
        # The store must hold what the checkpoint wrote to it (rebuild: neither holds anything any more).
        store, pipeline_id = open_pipeline(plan.stores.for_aggregation(agg), layout, plan.checkpoint_dir(layout),
                                           rebuild=plan.options.rebuild, shard_id=shards.get(agg.name))
        pipelines[agg.name] = AggregationPipeline(layout, store, pipeline_id, on_batch=plan.options.on_batch,
                                                  purger=Purger(layout, store), shard_id=shards.get(agg.name),
                                                  compactor=Compactor(layout, store) if agg.workers else None,
                                                  derive=plan.deriver(agg.source, agg.time_attribute))
    return pipelines
