"""Input streams: a directory of CSV, JSON Lines or Parquet files watched for new files, or a caller's
streaming DataFrame (Kafka or anything else Spark reads).

Text formats are read with every attribute as a string so that one bad value rejects one event (with a
reason) instead of failing the file; typing happens in ``tiltframe.engine.events``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from tiltframe.engine.events import ARRIVAL_PART, CORRUPT, SPARK_TYPES
from tiltframe.errors import UsageError
from tiltframe.spec.model import StreamDef

FORMATS = {
    ".csv": "csv",
    ".json": "json",
    ".jsonl": "json",
    ".ndjson": "json",
    ".parquet": "parquet",
}
_GLOBS = {"csv": "*.csv", "json": "*.{json,jsonl,ndjson}", "parquet": "*.parquet"}


@dataclass(frozen=True, slots=True)
class FileInput:
    """A watched directory; ``format`` is csv, json or parquet (None: detect from the files); ``glob``
    narrows the files read (default: every file of the format)."""

    path: str
    format: str | None = None
    max_files_per_trigger: int | None = None
    glob: str | None = None


def _visible_files(path: Path) -> list[Path]:
    return sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith((".", "_")))


def detect_format(path: str | Path, stream: str) -> str:
    """The format of the files in ``path``; a clear usage error when it cannot tell."""
    folder = Path(path)
    if not folder.is_dir():
        msg = f"input of stream {stream}: '{path}' is not a directory (give a folder of files to watch)"
        raise UsageError(msg)
    found = {FORMATS[p.suffix.lower()] for p in _visible_files(folder) if p.suffix.lower() in FORMATS}
    if len(found) == 1:
        return found.pop()
    if not found:
        msg = (
            f"input of stream {stream}: no .csv, .json/.jsonl or .parquet files in '{path}' to tell the "
            f"format from; name it (for example --input-format {stream}=json)"
        )
    else:
        formats = ", ".join(sorted(found))
        msg = f"input of stream {stream}: '{path}' mixes formats ({formats}); name one with --input-format"
    raise UsageError(msg)


def _csv_has_header(folder: Path, stream: StreamDef) -> bool:
    """A CSV folder has a header when the first line of its first file lists the attribute names."""
    for f in _visible_files(folder):
        if f.suffix.lower() == ".csv":
            with f.open(encoding="utf-8", errors="replace") as fh:
                first = fh.readline().strip()
            names = [c.strip().strip('"') for c in first.split(",")]
            return names == [a.name for a in stream.attributes]
    return False


def text_schema(stream: StreamDef, *, corrupt: bool) -> T.StructType:
    fields = [T.StructField(a.name, T.StringType()) for a in stream.attributes]
    if corrupt:
        fields.append(T.StructField(CORRUPT, T.StringType()))
    return T.StructType(fields)


def _parquet_schema(spark: SparkSession, folder: Path, stream: StreamDef) -> T.StructType:
    files = [f for f in _visible_files(folder) if f.suffix.lower() == ".parquet"]
    if files:
        return spark.read.parquet(str(files[0])).schema
    return T.StructType([T.StructField(a.name, SPARK_TYPES[a.type]) for a in stream.attributes])


def _with_arrival_part(df: DataFrame) -> DataFrame:
    """Tag rows with their file, so arrival order follows the files even where Spark packs several small
    files into one partition (it sorts them by size, not by time)."""
    meta = [F.col(f"_metadata.{f}") for f in ("file_modification_time", "file_path", "file_block_start")]
    return df.select("*", F.struct(*meta).alias(ARRIVAL_PART))


def read_stream(spark: SparkSession, source: FileInput, stream: StreamDef, *, streaming: bool = True) -> DataFrame:
    """A (streaming) DataFrame over the files of ``source``: one column per attribute, plus the file of
    each row (``ARRIVAL_PART``), which defines arrival order."""
    folder = Path(source.path)
    fmt = source.format or detect_format(folder, stream.name)
    if fmt not in _GLOBS:
        msg = f"input of stream {stream.name}: unknown format '{fmt}' (expected csv, json or parquet)"
        raise UsageError(msg)
    if not folder.is_dir():
        msg = f"input of stream {stream.name}: '{folder}' is not a directory"
        raise UsageError(msg)
    reader = spark.readStream if streaming else spark.read
    if streaming and source.max_files_per_trigger:
        reader = reader.option("maxFilesPerTrigger", source.max_files_per_trigger)
    reader = reader.option("pathGlobFilter", source.glob or _GLOBS[fmt])
    if fmt == "csv":
        reader = reader.schema(text_schema(stream, corrupt=False)).option("mode", "PERMISSIVE")
        reader = reader.option("header", str(_csv_has_header(folder, stream)).lower())
        return _with_arrival_part(reader.csv(str(folder)))
    if fmt == "json":
        reader = (
            reader.schema(text_schema(stream, corrupt=True))
            .option("mode", "PERMISSIVE")
            .option("columnNameOfCorruptRecord", CORRUPT)
        )
        return _with_arrival_part(reader.json(str(folder)))
    return _with_arrival_part(reader.schema(_parquet_schema(spark, folder, stream)).parquet(str(folder)))
