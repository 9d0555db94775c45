"""An aggregation's rows recomputed from its raw inputs by one plain Spark batch job, for ``tiltframe
verify`` and ``tiltframe rebuild`` (docs/lifecycle.md).

The recomputation shares nothing with the pipeline past reading and typing the events: no micro-batches,
no cascade (each level is grouped straight from the events), no store merges, no commit records.  It reads
the files the pipeline read (its checkpoint's record of them; every file of the input when there is none),
as they are now, and counts the events as the pipeline did: invalid ones are left out as the typing leaves
them out, and the events the store recorded as too late, older than the buffer or moved are taken out, the
moved ones put back at the bucket they went into.  The files of a batch the pipeline has not committed to
the store yet (one running now) are left out: that batch adds them when it commits.  Only small, aggregated
rows come to the driver.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import functools
import json
from dataclasses import dataclass, field

import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from tiltframe.aggregates.layout import AGG_TIMESTAMP, AggregationLayout
from tiltframe.engine.events.arrival import ARRIVAL_SEQ, arrange
from tiltframe.engine.events.derived import derive
from tiltframe.engine.events.typed import EVENT_TS, REASON, SPARK_TYPES, type_events
from tiltframe.engine.inputs.file_manifest import FileManifest
from tiltframe.engine.inputs.file_reads import read_files
from tiltframe.engine.inputs.filesystems import local_path
from tiltframe.engine.inputs.hadoop_paths import Location
from tiltframe.engine.inputs.sources import FileInput, file_format, located
from tiltframe.engine.rollup.partials import level_from_events
from tiltframe.engine.rollup.pipeline import PIPELINE_FILE
from tiltframe.errors import UsageError
from tiltframe.model.app import AppSpec
from tiltframe.model.bucket_bounds import bucket_end, bucket_start
from tiltframe.model.durations import Granularity
from tiltframe.store.base import PipelineState, RecordKind, Store

__all__ = ["ATTEMPTS", "Recomputation", "level_span"]

#: Recomputations tried while a running pipeline keeps committing batches in between.
ATTEMPTS = 3

#: Recorded kinds of events the pipeline did not aggregate into their own bucket (invalid ones are found
#: again by typing; events replayed before a recovery point were aggregated by an earlier pipeline).
_NOT_IN_OWN_BUCKET = (RecordKind.TOO_LATE.value, RecordKind.OLDER_THAN_BUFFER.value, RecordKind.MOVED.value)


@dataclass
class Recomputation:
    """The events of one aggregation as the pipeline counted them, cached until :meth:`close`."""

    layout: AggregationLayout
    events: DataFrame | None
    files: int = 0
    count: int = 0
    notes: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, spark: SparkSession, app: AppSpec, layout: AggregationLayout, store: Store, source: FileInput,
           checkpoint: Location, *, fresh: bool = False) -> Recomputation:
        """Read ``source`` (the input of the aggregation's root stream) as the pipeline whose checkpoint is
        ``checkpoint`` read it.  ``fresh``: every valid event in its own bucket, as a pipeline of ``layout``
        that read those files in one batch would count them (a rollup rebuilt under a new definition, whose
        stored rows hold no late or moved events)."""
        spec = layout.spec
        if spec.time_attribute is None:
            msg = (f"aggregation {spec.name} groups events by their arrival time, which the inputs do not hold: "
                   f"it cannot be recomputed from them")
            raise UsageError(msg)
        if layout.partitioned:
            msg = (f"aggregation {spec.name} is partitioned by shard: each shard's rows come from its own inputs, "
                   f"which one recomputation cannot tell apart")
            raise UsageError(msg)
        root = app.stream(app.root_stream(spec.source))
        folder, fmt = located(spark, source, root)
        paths, note = _files_read([f.path for f in folder.files() if _matches(f.name, fmt, source.glob)], checkpoint,
                                  _last_committed(store, layout, checkpoint))
        notes = [note] if note else []
        frames, problems = read_files(spark, paths, fmt, root)
        if problems:
            notes.append(f"{len(problems)} files could not be read (left out, as the pipeline leaves them out): "
                         f"{', '.join(p.path for p in problems[:3])}")
        if app.writer_of(spec.source) is not None:
            frames = [derive(raw, app, spec.source, spec.time_attribute) for raw in frames]
        if not frames:
            return cls(layout, None, len(paths), 0, notes)
        required = frozenset({*spec.group_by, spec.time_attribute})
        typed = functools.reduce(DataFrame.union, [
            type_events(raw, layout.stream, required=required, time_attribute=spec.time_attribute, arrival_ms=0)
            for raw in frames])
        if fresh:
            events = arrange(typed, _exact(layout), PipelineState()).where(F.col(REASON).isNull()).cache()
        else:
            events = _as_the_pipeline_counted(spark, layout, store, typed).cache()
        return cls(layout, events, len(paths), events.count(), notes)

    def level(self, g: Granularity, within: tuple[int, int] | None = None) -> pd.DataFrame:
        """The partial rows of level ``g`` (the store's columns), of the buckets that start in ``within``."""
        if self.events is None:
            return pd.DataFrame({c: pd.Series(dtype=object) for c in self.layout.column_types})
        start, end = level_span(within, g, self.layout.zone)
        part = self.events if within is None else self.events.where((F.col(EVENT_TS) >= start)
                                                                    & (F.col(EVENT_TS) < end))
        rows = level_from_events(part, self.layout, g).toPandas()
        if within is not None:
            rows = rows[(rows[AGG_TIMESTAMP] >= within[0]) & (rows[AGG_TIMESTAMP] < within[1])]
        return rows.reset_index(drop=True)

    def close(self) -> None:
        if self.events is not None:
            self.events.unpersist()


def level_span(within: tuple[int, int] | None, g: Granularity, zone: str) -> tuple[int, int]:
    """From the start of the first to the end of the last bucket of ``g`` that starts in ``within``: the
    events (and stored rows) that make them."""
    if within is None:
        return -(2**62), 2**62
    last = bucket_start(within[1] - 1, g, zone)
    return bucket_start(within[0], g, zone), bucket_end(last, g, zone)


def _matches(name: str, fmt: str, glob: str | None) -> bool:
    """Whether the pipeline's file source reads the file ``name`` of a folder of ``fmt`` files."""
    if glob is not None:
        return fnmatch.fnmatch(name, glob)
    return file_format(name) == fmt


def _last_committed(store: Store, layout: AggregationLayout, checkpoint: Location) -> int | None:
    """The latest batch of the checkpoint's pipeline the store holds (None: no pipeline there, or the store
    holds none of its batches, so that every file it recorded counts)."""
    marker = checkpoint / PIPELINE_FILE
    if not marker.exists():
        return None
    return store.last_committed_batch(layout, str(json.loads(marker.read_text(encoding="utf-8"))["pipeline_id"]))


def _files_read(paths: list[str], checkpoint: Location, upto: int | None) -> tuple[list[str], str | None]:
    """The files of ``paths`` the pipeline read (its checkpoint's record) in the batches up to ``upto``, and
    a note on those left out."""
    read = {_same(p) for p in FileManifest(checkpoint).paths(upto)}
    if not read:
        return paths, "the pipeline's checkpoint holds no record of the files it read: every file is read"
    kept = [p for p in paths if _same(p) in read]
    left = len(paths) - len(kept)
    return kept, (f"{left} files of the input are not read yet by the pipeline: left out" if left else None)


def _same(path: str) -> str:
    local = local_path(path)
    return str(local.resolve()) if local is not None else path


def _exact(layout: AggregationLayout) -> AggregationLayout:
    """``layout`` without a buffer or lateness: no event is late in a recomputation."""
    return dataclasses.replace(layout, spec=dataclasses.replace(
        layout.spec, buffer_size=None, ignore_events_older_than_buffer=None, allowed_lateness_ms=None))


def _as_the_pipeline_counted(spark: SparkSession, layout: AggregationLayout, store: Store,
                             typed: DataFrame) -> DataFrame:
    """The valid events, less those the store recorded as not aggregated into their own bucket, plus the
    moved ones at the bucket they went into."""
    events = arrange(typed, _exact(layout), PipelineState()).where(F.col(REASON).isNull())
    recorded = store.recorded_events(layout, _NOT_IN_OWN_BUCKET)
    if recorded.empty:
        return events
    names = [a.name for a in layout.stream.attributes]
    schema = T.StructType([T.StructField(a.name, SPARK_TYPES[a.type]) for a in layout.stream.attributes])
    rows = spark.createDataFrame(recorded.astype(object).where(recorded.notna(), None),
                                 "kind string, raw string, event_timestamp long, adjusted_timestamp long")
    parsed = rows.select("kind", F.from_json("raw", schema).alias("e"), "event_timestamp", "adjusted_timestamp")
    out = [*(F.col(f"e.{n}").alias(n) for n in names)]
    taken = parsed.select(*out, F.col("event_timestamp").alias(EVENT_TS))
    moved = parsed.where(F.col("kind") == RecordKind.MOVED.value).select(
        *out, F.col("adjusted_timestamp").alias(EVENT_TS))
    kept = events.select(*names, EVENT_TS).exceptAll(taken).unionByName(moved)
    return kept.withColumn(ARRIVAL_SEQ, F.lit(0).cast("long")).withColumn(REASON, F.lit(None).cast("string"))
