"""Input streams: a directory of CSV, JSON Lines or Parquet files (the text ones compressed or not) watched for
new files, on any file system Spark reaches (``tiltframe.engine.inputs.filesystems``), or a caller's streaming
DataFrame (Kafka or anything else Spark reads; ``tiltframe.engine.inputs.text_sources`` types a column of
JSON or CSV text).

An aggregation's folder is listed by Spark's file source (``list_stream``) and each micro-batch's files are
read by ``tiltframe.engine.inputs.file_batches``.  Continuous queries and request streams consume rows as Spark
reads them (``read_stream``).  Either way every file is read once whatever its modification time (a
backfilled or copied file is not too old), and text formats are read with every attribute as a string, so
that one bad value rejects one event (with a reason) instead of failing the file; typing happens in
``tiltframe.engine.events.typed``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from tiltframe.engine.events.typed import CORRUPT, SPARK_TYPES
from tiltframe.engine.inputs.compressed_files import CODECS, without_codec
from tiltframe.engine.inputs.file_reads import (
    blank_line,
    csv_header,
    head,
    parquet_schema,
    text_schema,
    with_arrival_part,
)
from tiltframe.engine.inputs.filesystems import Folder, open_folder
from tiltframe.engine.inputs.hadoop_paths import Location
from tiltframe.engine.inputs.input_moves import check_spark_folder, follow_folder
from tiltframe.env_values import env_int
from tiltframe.errors import UsageError
from tiltframe.model.streams import StreamDef

logger = logging.getLogger(__name__)

FORMATS = {
    ".csv": "csv",
    ".json": "json",
    ".jsonl": "json",
    ".ndjson": "json",
    ".parquet": "parquet",
}


#: The formats whose files may be compressed (``a.csv.gz``): Parquet compresses inside.
TEXT_FORMATS = frozenset({"csv", "json"})


def file_format(name: str) -> str | None:
    """The format a file's name says, in any case: its suffix (``.csv``), or the suffix under a compression
    suffix of a text format (``a.csv.gz``, ``b.jsonl.zst``); None for any other file."""
    plain = without_codec(name)
    fmt = FORMATS.get(Path(plain).suffix.lower())
    return fmt if plain == name or fmt in TEXT_FORMATS else None


def _any_case(suffix: str) -> str:
    return "".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else c for c in suffix)


def _suffixes(fmt: str) -> list[str]:
    plain = [s for s, f in FORMATS.items() if f == fmt]
    return plain + [s + c for s in plain for c in CODECS] if fmt in TEXT_FORMATS else plain


#: The names each format's files have, in any case (``DATA.CSV`` is a CSV file too), compressed or not.
_GLOBS = {fmt: "*.{" + ",".join(_any_case(s[1:]) for s in _suffixes(fmt)) + "}" for fmt in set(FORMATS.values())}
#: Spark's file source skips files older than this relative to the newest it has seen (default 7 days):
#: a backfilled file, a copy that kept its time or an unpacked archive would never be read.
NO_MAX_FILE_AGE = "100000d"
#: The rows of Spark's ``binaryFile`` source: one per file.
_BINARY_FILE = "path string, modificationTime timestamp, length long, content binary"


#: A backlog is read in micro-batches of about this many bytes of files (Spark's ``maxBytesPerTrigger``;
#: a larger file is a batch of its own), so figures move within seconds and memory stays bounded.
DEFAULT_MAX_BYTES_PER_TRIGGER = 64 * 1024 * 1024
MAX_BYTES_ENV = "TILTFRAME_MAX_BYTES_PER_TRIGGER"


@dataclass(frozen=True, slots=True)
class FileInput:
    """A watched directory; ``format`` is csv, json or parquet (None: detect from the files); ``glob``
    narrows the files read (default: every file of the format).  A micro-batch takes at most
    ``max_files_per_trigger`` new files if given, else about ``max_bytes_per_trigger`` bytes of them
    (None: ``$TILTFRAME_MAX_BYTES_PER_TRIGGER``, else 64 MiB; 0: no bound)."""

    path: str
    format: str | None = None
    max_files_per_trigger: int | None = None
    glob: str | None = None
    max_bytes_per_trigger: int | None = None

    def batch_bound(self) -> tuple[str, int] | None:
        """Spark's file source option bounding a micro-batch, and its value (None: unbounded)."""
        if self.max_files_per_trigger:
            return "maxFilesPerTrigger", self.max_files_per_trigger
        size = self.max_bytes_per_trigger
        if size is None:
            size = env_int(MAX_BYTES_ENV, DEFAULT_MAX_BYTES_PER_TRIGGER, expected="a number of bytes (0: no bound)")
        return ("maxBytesPerTrigger", size) if size > 0 else None


def json_glob() -> str:
    """The names of plain JSON-lines files, in any case (the files a trickle query reads: its reader does not
    check compressed files for damage, ``tiltframe.engine.inputs.compressed_files``)."""
    return "*.{" + ",".join(_any_case(s[1:]) for s, f in FORMATS.items() if f == "json") + "}"


def visible_files(path: Path) -> list[Path]:
    """The files of a folder that are read: not hidden, not Spark's (``.x``, ``_x``)."""
    return sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith((".", "_")))


def detect_format(path: str | Path, stream: str) -> str:
    """The format of the files in the local folder ``path``; a clear usage error when it cannot tell."""
    folder = Path(path)
    if not folder.is_dir():
        msg = f"input of stream {stream}: '{path}' is not a directory (give a folder of files to watch)"
        raise UsageError(msg)
    return _format_of([p.name for p in visible_files(folder)], Folder(str(path), folder), stream)


#: How many files in subfolders ``unread_files`` looks for at most, and in how many folders (a whole bucket
#: is not listed for a note).
UNREAD_LOOKED_FOR = 1000
UNREAD_FOLDERS_LOOKED_AT = 200


def unread_files(folder: Folder, formats: frozenset[str] = frozenset(FORMATS.values())) -> tuple[int, list[str]]:
    """Files of ``formats`` inside subfolders of ``folder`` that its stream never reads, and the subfolders
    holding them (nearest first).

    Spark's file source reads the folder's own files, unless the folder holds ``key=value`` partition
    folders: then it reads every file below it (and refuses a tree that mixes partitions with other
    folders).  So without partition folders, files in any subfolder are not read.  A sample: it stops at
    ``UNREAD_LOOKED_FOR`` files or ``UNREAD_FOLDERS_LOOKED_AT`` folders."""
    todo = folder.subfolders()
    partitions = [sub for sub in todo if "=" in sub.name]
    if partitions:
        others = [sub.path for sub in todo if "=" not in sub.name and _holds_files(sub)]
        if others:
            shown = ", ".join(f"'{o}'" for o in others[:3])
            msg = (f"'{folder.path}' holds key=value partition folders ('{partitions[0].name}', ...) and other "
                   f"folders with files ({shown}): Spark reads such a folder as one partitioned table and refuses "
                   f"the mix. Move the other folders out, or give them inputs of their own")
            raise UsageError(msg)
        return 0, []
    count = 0
    where: list[str] = []
    looked = 0
    while todo and count < UNREAD_LOOKED_FOR and looked < UNREAD_FOLDERS_LOOKED_AT:
        looked += 1
        sub = todo.pop(0)
        n = sum(1 for f in sub.files() if file_format(f.name) in formats)
        if n:
            count += n
            where.append(sub.path)
        todo.extend(sub.subfolders())
    return count, where


def _holds_files(folder: Folder) -> bool:
    """Whether ``folder`` or a folder inside it holds a visible file (a sample of the nearest folders)."""
    todo, looked = [folder], 0
    while todo and looked < UNREAD_FOLDERS_LOOKED_AT:
        looked += 1
        sub = todo.pop(0)
        if sub.files():
            return True
        todo.extend(sub.subfolders())
    return False


def _unread_note(count: int, where: list[str], what: str) -> str:
    shown = ", ".join(f"'{w}'" for w in where[:3]) + (f" and {len(where) - 3} more" if len(where) > 3 else "")
    files = f"{count}+" if count >= UNREAD_LOOKED_FOR else str(count)
    return (f"{files} {what} file{'' if count == 1 else 's'} in its subfolders ({shown}) "
            f"{'is' if count == 1 else 'are'} not read: a stream reads the files of its folder itself, or every "
            f"file below it when it holds key=value partition folders")


def _partition_formats(folder: Folder) -> set[str]:
    """The formats of the files below ``folder``'s key=value partition folders, which Spark reads (nearest
    first, a sample)."""
    found: set[str] = set()
    todo = [sub for sub in folder.subfolders() if "=" in sub.name]
    looked = 0
    while todo and looked < UNREAD_FOLDERS_LOOKED_AT:
        looked += 1
        sub = todo.pop(0)
        found |= {fmt for f in sub.files() if (fmt := file_format(f.name)) is not None}
        todo.extend(sub.subfolders())
    return found


def _format_of(names: list[str], folder: Folder, stream: str) -> str:
    """The one format the file names of a folder say, or a usage error."""
    path = folder.path
    found = {fmt for n in names if (fmt := file_format(n)) is not None}
    if not found:  # a folder of key=value partition folders (date=2024-01-05/...), which Spark reads
        found = _partition_formats(folder)
    if len(found) == 1:
        return found.pop()
    if not found:
        try:
            count, where = unread_files(folder)
        except UsageError as exc:
            raise UsageError(f"input of stream {stream}: {exc}") from None
        if count:
            msg = (f"input of stream {stream}: no .csv, .json/.jsonl or .parquet files in '{path}' itself; "
                   f"{_unread_note(count, where, 'such')}. Give the folder that holds them (for example "
                   f"--input {stream}={where[0]}), or move the files up")
            raise UsageError(msg)
        msg = (
            f"input of stream {stream}: no .csv, .json/.jsonl or .parquet files (compressed or not: .gz, .bz2, "
            f".deflate, .zst, .lz4, .snappy) in '{path}' to tell the format from; name it (for example "
            f"--input-format {stream}=json)"
        )
    else:
        formats = ", ".join(sorted(found))
        msg = f"input of stream {stream}: '{path}' mixes formats ({formats}); name one with --input-format"
    raise UsageError(msg)


def _csv_has_header(spark: SparkSession, folder: Folder, stream: StreamDef) -> bool:
    """Whether the first CSV file of a folder starts with a header (a row stream decides once)."""
    for f in folder.files():
        if file_format(f.name) == "csv":
            try:
                return csv_header(head(spark, f.path), stream) is not None
            except Exception:  # a damaged first file: Spark's read of it fails the stream with its reason
                return False
    return False


def _parquet_schema(spark: SparkSession, folder: Folder, stream: StreamDef) -> T.StructType:
    """The schema of the first Parquet file that can be read (a row stream has one schema)."""
    for f in folder.files():
        if file_format(f.name) == "parquet":
            try:
                return parquet_schema(spark, f.path)
            except Exception:  # a file that cannot be read is for its batch to record, not for the schema
                continue
    return T.StructType([T.StructField(a.name, SPARK_TYPES[a.type]) for a in stream.attributes])


def _check_format(fmt: str, stream: StreamDef) -> None:
    if fmt not in _GLOBS:
        msg = f"input of stream {stream.name}: unknown format '{fmt}' (expected csv, json or parquet)"
        raise UsageError(msg)


def checked(source: FileInput, stream: StreamDef) -> tuple[Path, str]:
    """The local folder of ``source`` and its format, or a usage error naming the problem."""
    folder = Path(source.path)
    fmt = source.format or detect_format(folder, stream.name)
    _check_format(fmt, stream)
    if not folder.is_dir():
        msg = f"input of stream {stream.name}: '{folder}' is not a directory"
        raise UsageError(msg)
    return folder, fmt


def located(spark: SparkSession, source: FileInput, stream: StreamDef) -> tuple[Folder, str]:
    """The folder of ``source`` on any file system Spark reaches (``tiltframe.engine.inputs.filesystems``) and its
    format, or a usage error naming the problem (a missing connector among them)."""
    folder = open_folder(spark, source.path, f"input of stream {stream.name}")
    fmt = source.format or _format_of([f.name for f in folder.files()], folder, stream.name)
    _check_format(fmt, stream)
    try:
        count, where = unread_files(folder, frozenset({fmt}))
    except UsageError as exc:
        raise UsageError(f"input of stream {stream.name}: {exc}") from None
    if count:  # said at every start: files put there later are not read either
        logger.warning("input of stream %s: %s. Give each folder its own input, or move the files into '%s'",
                       stream.name, _unread_note(count, where, fmt), source.path)
    return folder, fmt


def list_stream(
    spark: SparkSession, source: FileInput, stream: StreamDef, checkpoint: Location | None = None
) -> tuple[DataFrame, str]:
    """The streaming query that lists ``source``'s folder for an aggregation, and the files' format.

    Its rows are never computed (``FileBatches`` reads the files), so it reads the folder as
    ``binaryFile``: no schema to infer, no file opened while listing.  ``checkpoint``: the query's (Spark's
    ``spark/`` folder), whose logs follow the folder where it moved (``tiltframe.engine.inputs.input_moves``)."""
    folder, fmt = located(spark, source, stream)
    if checkpoint is not None:
        follow_folder(folder, checkpoint, stream.name)
    reader = spark.readStream.format("binaryFile").schema(_BINARY_FILE).option("maxFileAge", NO_MAX_FILE_AGE)
    if (bound := source.batch_bound()) is not None:
        reader = reader.option(*bound)
    return reader.option("pathGlobFilter", source.glob or _GLOBS[fmt]).load(folder.path), fmt


def read_stream(
    spark: SparkSession, source: FileInput, stream: StreamDef, checkpoint: Location | None = None, what: str = ""
) -> DataFrame:
    """A streaming DataFrame of the rows of ``source``'s files: one column per attribute, plus the file of
    each row (``ARRIVAL_PART``), which defines arrival order.

    Rows come as Spark reads them, with one schema for the stream: the CSV header (or its absence) of the
    first file, the Parquet schema of the first readable file (an aggregation reads each file as it is,
    ``tiltframe.engine.inputs.file_reads``).  ``checkpoint``: the query's (Spark's), read by ``what`` (``continuous
    query q``), which must have read this folder if any (``tiltframe.engine.inputs.input_moves``)."""
    folder, fmt = located(spark, source, stream)
    if checkpoint is not None:
        check_spark_folder(folder, checkpoint, stream.name, what)
    reader = spark.readStream.format(fmt).option("maxFileAge", NO_MAX_FILE_AGE)
    if (bound := source.batch_bound()) is not None:
        reader = reader.option(*bound)
    reader = reader.option("pathGlobFilter", source.glob or _GLOBS[fmt])
    names = [a.name for a in stream.attributes]
    if fmt == "parquet":
        reader = reader.schema(_parquet_schema(spark, folder, stream))
    else:
        reader = reader.schema(text_schema(names)).option("mode", "PERMISSIVE")
        reader = reader.option("columnNameOfCorruptRecord", CORRUPT)
    if fmt == "csv":
        reader = reader.option("header", str(_csv_has_header(spark, folder, stream)).lower())
        reader = reader.option("multiLine", "true").option("escape", '"')
        return with_arrival_part(reader.load(folder.path).where(~blank_line(names, len(names) == 1)))
    return with_arrival_part(reader.load(folder.path))
