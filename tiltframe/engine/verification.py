"""``tiltframe verify``: every stored level of an aggregation recomputed from the raw inputs by one plain
Spark batch job and compared, bucket by bucket and key by key (docs/lifecycle.md).

The recomputation shares nothing with the pipeline past reading and typing the events: no micro-batches,
no cascade (each level is grouped straight from the events), no store merges, no commit records.  It reads
the files the pipeline read (its checkpoint's record of them; every file of the input when there is none)
and accounts for the events as the pipeline did: invalid ones are left out as the typing leaves them out,
and the events the store recorded as too late, older than the buffer or moved are taken out, the moved
ones put back at the bucket they went into.  Only small, aggregated rows come to the driver.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import functools
from dataclasses import dataclass, field

import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from tiltframe.engine.arrival import ARRIVAL_SEQ, arrange
from tiltframe.engine.derived import derive
from tiltframe.engine.events import EVENT_TS, REASON, SPARK_TYPES, type_events
from tiltframe.engine.file_manifest import FileManifest
from tiltframe.engine.file_reads import read_files
from tiltframe.engine.filesystems import local_path
from tiltframe.engine.hadoop_paths import Location
from tiltframe.engine.partials import level_from_events
from tiltframe.engine.sources import FORMATS, FileInput, located
from tiltframe.errors import UsageError
from tiltframe.model.app import AppSpec
from tiltframe.model.bucket_bounds import bucket_end, bucket_start
from tiltframe.model.durations import Granularity
from tiltframe.retrieval.comparison import Difference, compare
from tiltframe.store.base import PipelineState, RecordKind, Store
from tiltframe.store.layout import AGG_TIMESTAMP, AggregationLayout
from tiltframe.store.pandas_merges import finalize, merge_rows

__all__ = ["Verification", "verify"]

#: Recorded kinds of events the pipeline did not aggregate into their own bucket (invalid ones are found
#: again by typing; events replayed before a recovery point were aggregated by an earlier pipeline).
_NOT_IN_OWN_BUCKET = (RecordKind.TOO_LATE.value, RecordKind.OLDER_THAN_BUFFER.value, RecordKind.MOVED.value)


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
    ``store``'s; ``within``: only buckets that start in ``[start, end)``."""
    spec = layout.spec
    if spec.time_attribute is None:
        msg = (f"aggregation {spec.name} groups events by their arrival time, which the inputs do not hold: it "
               f"cannot be recomputed from them")
        raise UsageError(msg)
    result = Verification(spec.name)
    root = app.stream(app.root_stream(spec.source))
    folder, fmt = located(spark, source, root)
    paths, note = _files_read([f.path for f in folder.files() if _matches(f.name, fmt, source.glob)], checkpoint)
    if note:
        result.notes.append(note)
    result.files = len(paths)
    frames, problems = read_files(spark, paths, fmt, root)
    if problems:
        result.notes.append(f"{len(problems)} files could not be read (left out, as the pipeline leaves them "
                            f"out): {', '.join(p.path for p in problems[:3])}")
    if app.writer_of(spec.source) is not None:
        frames = [derive(raw, app, spec.source, spec.time_attribute) for raw in frames]
    if not frames:
        events = None
    else:
        typed = functools.reduce(DataFrame.union, [
            type_events(raw, layout.stream, required=_required(layout), time_attribute=spec.time_attribute,
                        arrival_ms=0) for raw in frames])
        events = _as_the_pipeline_counted(spark, layout, store, typed).cache()
        result.events = events.count()
    try:
        purged = {g.table_suffix: at for g, at in store.purged_before(layout).items()}
        skip = {out: at for measure, at in store.complete_from(layout).items() for out in layout.outputs_of(measure)}
        for g in spec.granularities:
            start, end = _level_range(within, g, layout.zone)
            stored = finalize(merge_rows(store.read(layout, g, start, end), layout), layout)
            recomputed = _recomputed(events, layout, g, start, end, within)
            cut = purged.get(g.table_suffix)
            if cut is not None:
                recomputed = recomputed[recomputed[AGG_TIMESTAMP] >= cut]
                stored = stored[stored[AGG_TIMESTAMP] >= cut]
            if within is not None:
                stored = stored[(stored[AGG_TIMESTAMP] >= within[0]) & (stored[AGG_TIMESTAMP] < within[1])]
            result.rows[str(g)] = max(len(stored), len(recomputed))
            result.differences += compare(str(g), stored.reset_index(drop=True), recomputed, layout, skip)
    finally:
        if events is not None:
            events.unpersist()
    return result


def _required(layout: AggregationLayout) -> frozenset[str]:
    """The attributes without which an event has nowhere to go (as the pipeline requires them)."""
    spec = layout.spec
    return frozenset({*spec.group_by, *([spec.time_attribute] if spec.time_attribute else [])})


def _matches(name: str, fmt: str, glob: str | None) -> bool:
    """Whether the pipeline's file source reads the file ``name`` of a folder of ``fmt`` files."""
    if glob is not None:
        return fnmatch.fnmatch(name, glob)
    return any(name.lower().endswith(suffix) for suffix, f in FORMATS.items() if f == fmt)


def _files_read(paths: list[str], checkpoint: Location) -> tuple[list[str], str | None]:
    """The files of ``paths`` the pipeline read (its checkpoint's record), and a note on those left out."""
    read = {_same(p) for p in FileManifest(checkpoint).paths()}
    if not read:
        return paths, "the pipeline's checkpoint holds no record of the files it read: every file is read"
    kept = [p for p in paths if _same(p) in read]
    left = len(paths) - len(kept)
    return kept, (f"{left} files of the input are not read yet by the pipeline: left out" if left else None)


def _same(path: str) -> str:
    local = local_path(path)
    return str(local.resolve()) if local is not None else path


def _as_the_pipeline_counted(spark: SparkSession, layout: AggregationLayout, store: Store,
                             typed: DataFrame) -> DataFrame:
    """The valid events, less those the store recorded as not aggregated into their own bucket, plus the
    moved ones at the bucket they went into."""
    exact = dataclasses.replace(layout, spec=dataclasses.replace(
        layout.spec, buffer_size=None, ignore_events_older_than_buffer=None, allowed_lateness_ms=None))
    events = arrange(typed, exact, PipelineState()).where(F.col(REASON).isNull())
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


def _level_range(within: tuple[int, int] | None, g: Granularity, zone: str) -> tuple[int, int]:
    """The events (and stored rows) that make the buckets of ``g`` starting in ``within``."""
    if within is None:
        return -(2**62), 2**62
    last = bucket_start(within[1] - 1, g, zone)
    return bucket_start(within[0], g, zone), bucket_end(last, g, zone)


def _recomputed(events: DataFrame | None, layout: AggregationLayout, g: Granularity, start: int, end: int,
                within: tuple[int, int] | None) -> pd.DataFrame:
    """Final values of ``g`` straight from ``events``, with the states a KLL check reads."""
    if events is None:
        return finalize(merge_rows(pd.DataFrame(columns=list(layout.column_types)), layout), layout)
    part = events if within is None else events.where((F.col(EVENT_TS) >= start) & (F.col(EVENT_TS) < end))
    rows = level_from_events(part, layout, g).toPandas()
    if within is not None:
        rows = rows[(rows[AGG_TIMESTAMP] >= within[0]) & (rows[AGG_TIMESTAMP] < within[1])]
    rows = rows.reset_index(drop=True)
    final = finalize(rows, layout)
    sketches = [s.name for s in layout.states if s.merge.name == "KLL"]
    return final.assign(**{s: rows[s] for s in sketches}) if sketches else final

