"""Inserts into a table (EventQL): a file, a folder or a DataFrame as one batch.

Each insert is its own pipeline (a fresh id), so two inserts of the same rows store them twice, as two
SQL INSERTs would; within one insert, a retry after a failure finds its commit record and writes nothing
again.  ``preaggregate=False`` is EventQL's INSERT_NOPREAGGR: each row becomes a partial row of its own,
merged on read like the workers' rows.  A raw table (no ``preaggregate`` clause) stores its rows as they are
(``store.raw_rows``): typed as its columns, a row that cannot be typed recorded with its reason.
"""

from __future__ import annotations

import logging
import time
import uuid
from pathlib import Path

import pandas as pd
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from tiltframe.aggregates.layout import AggregationLayout
from tiltframe.engine.events.typed import REASON, type_events
from tiltframe.engine.inputs.file_reads import FileProblem, read_files
from tiltframe.engine.inputs.sources import FileInput, checked, file_format, visible_files
from tiltframe.engine.rollup.pipeline import AggregationPipeline, file_records, invalid_records
from tiltframe.engine.rollup.reports import BatchReport, PipelineTotals
from tiltframe.errors import UsageError
from tiltframe.model.app import AppSpec
from tiltframe.model.streams import StreamDef
from tiltframe.model.tables import TableSpec
from tiltframe.store.base import BatchStats, Store
from tiltframe.store.open_stores import StoreRegistry
from tiltframe.store.raw_rows import RAW_FOLD, read_raw_rows, unfolded_raw_rows, write_raw_rows
from tiltframe.store.reads.frames import ARROW_TYPES

logger = logging.getLogger(__name__)


def insert_rows(
    app: AppSpec,
    table: str,
    rows: DataFrame | pd.DataFrame | str | Path,
    *,
    data_dir: str | Path,
    spark: SparkSession,
    preaggregate: bool = True,
) -> PipelineTotals:
    """Insert ``rows`` (a Spark or pandas DataFrame, or a CSV / JSON Lines / Parquet file or folder) into
    ``table``; returns the counts (read = aggregated + rejected; rejected rows are kept with a reason)."""
    spec = app.table(table)
    stream = spec.as_stream()
    if isinstance(rows, pd.DataFrame):
        rows = spark.createDataFrame(_gmt(rows))
    problems: list[FileProblem] = []
    if isinstance(rows, DataFrame):
        frames = [rows]
    else:
        frames, problems = _read(spark, Path(rows), table, stream)
    insert_id = uuid.uuid4().hex
    stores = StoreRegistry(data_dir)
    try:
        if spec.preaggregation is None:
            # Ids that sort as the inserts were made: SELECT * gives rows in insert order.
            ordered = f"{time.time_ns():016x}-{insert_id[:16]}"
            return _insert_raw(spec, frames, problems, stores.for_spec(spec.store), ordered)
        layout = AggregationLayout.of(app, table)
        store = stores.for_aggregation(layout.spec)
        store.ensure_schema(layout)
        fold_raw_rows(spark, spec, layout, store)
        pipeline = AggregationPipeline(layout, store, f"insert-{insert_id}",
                                       row_writer=None if preaggregate else f"row-{insert_id[:12]}-")
        pipeline.process(frames, 0, problems)
        return pipeline.totals
    finally:
        stores.close()


def fold_raw_rows(spark: SparkSession, table: TableSpec, layout: AggregationLayout, store: Store) -> BatchStats | None:
    """The rows ``table`` stored raw before its pre-aggregation was enabled, pre-aggregated into its rollup
    once (EventQL: enabling pre-aggregation keeps the rows stored and counts them).  They go through the
    aggregation pipeline as one batch of pipeline ``RAW_FOLD``, whose commit record makes a second call (or
    a replay after a crash) a no-op; a row the rollup cannot take (no time, no dimension value) is recorded
    with its reason.  The raw rows stay where they are.  Returns the batch's counts (None: nothing to do)."""
    if not unfolded_raw_rows(store, table, layout):
        return None
    rows = read_raw_rows(store, table)
    arrow = pa.table({c.name: pa.array(rows[c.name], type=ARROW_TYPES[c.type], from_pandas=True)
                      for c in table.columns})
    stats = AggregationPipeline(layout, store, RAW_FOLD).process([spark.createDataFrame(arrow)], 0).stats
    logger.warning("table %s: %d rows stored raw before pre-aggregation was enabled folded into its rollup, %d "
                   "rejected", table.name, stats.events_read, stats.events_rejected)
    return stats


def _insert_raw(
    table: TableSpec, frames: list[DataFrame], problems: list[FileProblem], store: Store, insert_id: str
) -> PipelineTotals:
    """A raw table's rows, typed as its columns, stored as they are in one transaction with the rows that
    could not be typed; the rows pass through the driver to the store."""
    t0 = time.perf_counter()
    stream = table.as_stream()
    columns = [c.name for c in table.columns]
    kept: list[pa.Table] = []
    recorded = [file_records(problems)]
    arrival = time.time_ns() // 1_000_000
    for frame in frames:
        typed = type_events(frame, stream, required=(), time_attribute=None, arrival_ms=arrival).cache()
        try:
            kept.append(typed.filter(F.col(REASON).isNull()).select(*columns).toArrow())
            recorded.append(invalid_records(typed))
        finally:
            typed.unpersist()
    rows = pa.concat_tables(kept) if kept else pa.table({c: pa.array([], pa.null()) for c in columns})
    records = pa.concat_tables(recorded)
    records = records.append_column("stream", pa.array([stream.name] * records.num_rows, pa.string()))
    t1 = time.perf_counter()
    written = write_raw_rows(store, table, rows, insert_id, records)
    rejected = records.num_rows - len(problems)
    totals = PipelineTotals()
    totals.add(BatchReport(table.name, 0, BatchStats(written + rejected, written, rejected), written, False,
                           t1 - t0, time.perf_counter() - t1, 0, len(problems)))
    return totals


def _read(
    spark: SparkSession, path: Path, table: str, stream: StreamDef
) -> tuple[list[DataFrame], list[FileProblem]]:
    """The rows of a file, or of every file of a folder in its format, each file read as it is."""
    if not path.exists():
        msg = f"insert into {table}: '{path}' does not exist"
        raise UsageError(msg)
    if path.is_file():
        fmt = file_format(path.name)
        if fmt is None:
            msg = (f"insert into {table}: '{path}' is not a .csv, .json/.jsonl or .parquet file (the text ones "
                   f"compressed or not)")
            raise UsageError(msg)
        files = [path.resolve()]
    else:
        folder, fmt = checked(FileInput(str(path.resolve())), stream)
        files = [f for f in visible_files(folder) if file_format(f.name) == fmt]
    return read_files(spark, [f"file:{f}" for f in files], fmt, stream)


def _gmt(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with its zone-less datetimes marked GMT: Spark would take them for wall-clock times of the
    session's time zone, and a naive time means GMT here, as Siddhi's ``yyyy-MM-dd HH:mm:ss`` does."""
    naive = [c for c in frame.columns if pd.api.types.is_datetime64_dtype(frame[c]) and frame[c].dt.tz is None]
    return frame.assign(**{c: frame[c].dt.tz_localize("UTC") for c in naive}) if naive else frame
