"""Inserts into a pre-aggregated table (EventQL): a file, a folder or a DataFrame as one batch.

Each insert is its own pipeline (a fresh id), so two inserts of the same rows store them twice, as two
SQL INSERTs would; within one insert, a retry after a failure finds its commit record and writes nothing
again.  ``preaggregate=False`` is EventQL's INSERT_NOPREAGGR: each row becomes a partial row of its own,
merged on read like the workers' rows.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pandas as pd
from pyspark.sql import DataFrame, SparkSession

from tiltframe.engine.file_reads import FileProblem, read_files
from tiltframe.engine.pipeline import AggregationPipeline
from tiltframe.engine.reports import PipelineTotals
from tiltframe.engine.sources import FORMATS, FileInput, checked, visible_files
from tiltframe.errors import NotSupportedYet, UsageError
from tiltframe.spec.model import AppSpec
from tiltframe.store.layout import AggregationLayout
from tiltframe.store.registry import StoreRegistry


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
    if spec.preaggregation is None:
        msg = f"table {table} has no preaggregate clause; storing raw tables is not supported yet"
        raise NotSupportedYet.at(msg, spec.pos)
    layout = AggregationLayout.of(app, table)
    if isinstance(rows, pd.DataFrame):
        rows = spark.createDataFrame(_gmt(rows))
    problems: list[FileProblem] = []
    if isinstance(rows, DataFrame):
        frames = [rows]
    else:
        frames, problems = _read(spark, Path(rows), table, layout)
    insert_id = uuid.uuid4().hex
    stores = StoreRegistry(data_dir)
    try:
        store = stores.for_aggregation(layout.spec)
        store.ensure_schema(layout)
        pipeline = AggregationPipeline(layout, store, f"insert-{insert_id}",
                                       row_writer=None if preaggregate else f"row-{insert_id[:12]}-")
        pipeline.process(frames, 0, problems)
        return pipeline.totals
    finally:
        stores.close()


def _read(
    spark: SparkSession, path: Path, table: str, layout: AggregationLayout
) -> tuple[list[DataFrame], list[FileProblem]]:
    """The rows of a file, or of every file of a folder in its format, each file read as it is."""
    if not path.exists():
        msg = f"insert into {table}: '{path}' does not exist"
        raise UsageError(msg)
    if path.is_file():
        fmt = FORMATS.get(path.suffix.lower())
        if fmt is None:
            msg = f"insert into {table}: '{path}' is not a .csv, .json/.jsonl or .parquet file"
            raise UsageError(msg)
        files = [path.resolve()]
    else:
        folder, fmt = checked(FileInput(str(path.resolve())), layout.stream)
        files = [f for f in visible_files(folder) if FORMATS.get(f.suffix.lower()) == fmt]
    return read_files(spark, [f"file:{f}" for f in files], fmt, layout.stream)


def _gmt(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with its zone-less datetimes marked GMT: Spark would take them for wall-clock times of the
    session's time zone, and a naive time means GMT here, as Siddhi's ``yyyy-MM-dd HH:mm:ss`` does."""
    naive = [c for c in frame.columns if pd.api.types.is_datetime64_dtype(frame[c]) and frame[c].dt.tz is None]
    return frame.assign(**{c: frame[c].dt.tz_localize("UTC") for c in naive}) if naive else frame
