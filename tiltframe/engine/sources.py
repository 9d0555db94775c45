"""Input streams: a directory of CSV, JSON Lines or Parquet files watched for new files, or a caller's
streaming DataFrame (Kafka or anything else Spark reads).

Text formats are read with every attribute as a string so that one bad value rejects one event (with a
reason) instead of failing the file; typing happens in ``tiltframe.engine.events``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

from pyspark.sql import DataFrame, DataFrameReader, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.streaming import DataStreamReader

from tiltframe.engine.events import ARRIVAL_PART, CORRUPT, SPARK_TYPES
from tiltframe.errors import UsageError
from tiltframe.spec.model import StreamDef

logger = logging.getLogger(__name__)

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


def _checked(source: FileInput, stream: StreamDef) -> tuple[Path, str]:
    """The folder of ``source`` and its format, or a usage error naming the problem."""
    folder = Path(source.path)
    fmt = source.format or detect_format(folder, stream.name)
    if fmt not in _GLOBS:
        msg = f"input of stream {stream.name}: unknown format '{fmt}' (expected csv, json or parquet)"
        raise UsageError(msg)
    if not folder.is_dir():
        msg = f"input of stream {stream.name}: '{folder}' is not a directory"
        raise UsageError(msg)
    return folder, fmt


def _formatted(
    reader: DataStreamReader | DataFrameReader, fmt: str, schema: T.StructType, csv_header: bool
) -> DataStreamReader | DataFrameReader:
    """``reader`` set up for the format: text formats keep unreadable rows (to reject them with a reason)."""
    reader = reader.format(fmt).schema(schema)
    if fmt == "csv":
        return reader.option("mode", "PERMISSIVE").option("header", str(csv_header).lower())
    if fmt == "json":
        return reader.option("mode", "PERMISSIVE").option("columnNameOfCorruptRecord", CORRUPT)
    return reader


def read_stream(spark: SparkSession, source: FileInput, stream: StreamDef, *, streaming: bool = True) -> DataFrame:
    """A (streaming) DataFrame over the files of ``source``: one column per attribute, plus the file of
    each row (``ARRIVAL_PART``), which defines arrival order."""
    folder, fmt = _checked(source, stream)
    reader = spark.readStream if streaming else spark.read
    if streaming and source.max_files_per_trigger:
        reader = reader.option("maxFilesPerTrigger", source.max_files_per_trigger)
    reader = reader.option("pathGlobFilter", source.glob or _GLOBS[fmt])
    # Text formats are read as strings: typing rejects a bad value with a reason instead of failing the file.
    schema = _parquet_schema(spark, folder, stream) if fmt == "parquet" else text_schema(stream, corrupt=fmt == "json")
    header = fmt == "csv" and _csv_has_header(folder, stream)
    return _with_arrival_part(_formatted(reader, fmt, schema, header).load(str(folder)))


class FileBatches:
    """The ``foreachBatch`` function of a file source's query: each micro-batch is read again as a plain
    batch read of the files Spark's file source gave it, then handed to ``process``.

    ``foreachBatch`` hands over a micro-batch as rows already computed (an RDD): the columnar Parquet
    scan, and its fusion with the aggregation in one generated loop, are lost.  Reading the same files
    as a batch keeps them: on W2 the whole pipeline runs 10-20% faster.  The files are
    the ones Spark's logs name for that batch id (``batch_files``), so a replayed batch reads the same
    files.  Where the logs are not in the form read here, the rows Spark handed over are used.
    """

    def __init__(
        self, spark: SparkSession, stream: DataFrame, source: FileInput, stream_def: StreamDef, checkpoint: Path,
        process: Callable[[DataFrame, int], object],
    ) -> None:
        """``stream``: the query's DataFrame (``read_stream``), whose format and schema batches are read with."""
        self.spark = spark
        self.stream_name = stream_def.name
        self.checkpoint = checkpoint
        self.process = process
        # Decided once, as for the query: a batch is read like the stream (and the folder is not listed again).
        folder, self._fmt = _checked(source, stream_def)
        self._header = self._fmt == "csv" and _csv_has_header(folder, stream_def)
        self._schema = T.StructType([f for f in stream.schema.fields if f.name != ARRIVAL_PART])
        self._warned = False

    def __call__(self, raw: DataFrame, batch_id: int) -> None:
        files = batch_files(self.checkpoint, batch_id)
        if files and not any(c in f for f in files for c in _GLOB_CHARS):
            reader = _formatted(self.spark.read, self._fmt, self._schema, self._header)
            self.process(_with_arrival_part(reader.load(files)), batch_id)
            return
        if files != [] and not self._warned:  # an empty batch has nothing to read again
            logger.warning("input of stream %s: the files of batch %s are not listed in the form known here; "
                           "reading the rows Spark hands over (slower)", self.stream_name, batch_id)
            self._warned = True
        self.process(raw, batch_id)


#: Characters a path handed to Spark's reader would be globbed on.
_GLOB_CHARS = frozenset("*?[]{}\\")


def batch_files(checkpoint: Path, batch_id: int) -> list[str] | None:
    """The files of micro-batch ``batch_id`` of the file-source query checkpointed at ``checkpoint``, from
    Spark's logs: the offset log gives the batch's range of the source log (``logOffset`` after the
    previous batch and after this one), the source log the files of each entry in it (in files
    ``<n>``, or ``<k>.compact`` once compacted).  ``None`` when the logs are not in that form."""
    try:
        end = _log_offset(checkpoint, batch_id)
        start = _log_offset(checkpoint, batch_id - 1) if batch_id > 0 else -1
        if end is None or start is None:
            return None
        log = checkpoint / "sources" / "0"
        compacts: list[int] | None = None  # listed only when an entry is no longer in a file of its own
        files: list[str] = []
        for entry in range(start + 1, end + 1):
            plain = log / str(entry)
            if plain.exists():
                found = _log_entries(plain)
            else:
                if compacts is None:
                    compacts = sorted(int(p.name.removesuffix(".compact")) for p in log.glob("*.compact"))
                k = next((k for k in compacts if k >= entry), None)
                found = None if k is None else _log_entries(log / f"{k}.compact")
            if found is None:
                return None
            files.extend(e["path"] for e in found if e.get("batchId") == entry)
        return [_hadoop_path(f) for f in files]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _log_offset(checkpoint: Path, batch_id: int) -> int | None:
    """The file source's ``logOffset`` recorded for ``batch_id`` in the offset log."""
    path = checkpoint / "offsets" / str(batch_id)
    if not path.exists():
        return None
    lines = path.read_text(encoding="utf-8").splitlines()
    if len(lines) != 3 or lines[0] != "v1":  # the version, the batch's metadata, the one source's offset
        return None
    return int(json.loads(lines[2])["logOffset"])


def _log_entries(path: Path) -> list[dict] | None:
    lines = path.read_text(encoding="utf-8").splitlines()
    if not lines or lines[0] != "v1":
        return None
    return [json.loads(line) for line in lines[1:] if line.strip()]


def _hadoop_path(uri: str) -> str:
    """A logged file URI as a path Spark's reader takes (what Hadoop's ``new Path(new URI(uri))`` gives:
    the path part decoded)."""
    parts = urlsplit(uri)
    authority = f"//{parts.netloc}" if parts.netloc else ""
    return f"{parts.scheme}:{authority}{unquote(parts.path)}" if parts.scheme else unquote(parts.path)
