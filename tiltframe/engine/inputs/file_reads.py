"""A micro-batch's files read as DataFrames, each file as it is: its own CSV header (or none), its own
Parquet schema, its line breaks, its compression, its name never taken for a pattern.

Files of one folder differ in ordinary ways: one CSV file has a header and the next does not, or lists
the columns in another order; a Parquet file written later has a column of another type, or nanosecond
timestamps.  Files are grouped by what they look like (a CSV header, a Parquet schema), each group read
with its own options, and a file that cannot be read at all is named with the reason instead of failing
the batch (``FileProblem``), as is a compressed file that Spark would read as fewer rows than it holds
(``tiltframe.engine.inputs.compressed_files``).  A blank or whitespace-only line of a CSV file is no row, as
pandas and Spark's own JSON reader have it.  Rows of every group then go through the same typing
(``tiltframe.engine.events.typed``).
"""

from __future__ import annotations

import csv
import functools
import io
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import Column, DataFrame, DataFrameReader, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from tiltframe.engine.events.typed import ARRIVAL_PART, CORRUPT
from tiltframe.engine.inputs.compressed_files import codec_of, decompressed_head, file_damage
from tiltframe.engine.inputs.filesystems import local_path
from tiltframe.engine.inputs.hadoop_paths import hadoop_head
from tiltframe.model.streams import StreamDef

logger = logging.getLogger(__name__)

#: Characters Hadoop would take for a pattern in a path handed to Spark's reader.
GLOB_CHARS = frozenset("*?[]{}\\")
#: Spark's reader option (used by its own file stream source) that takes each path for one file's name.
NO_GLOB = "__globPaths__"
#: A path's scheme and authority (``file:``, ``hdfs://host:8020``), before the path proper.
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:(//[^/]*)?")
#: The first bytes of a CSV file read to find its header; a header line is far shorter.
_HEAD_BYTES = 64 * 1024
_QUOTE_OR_BREAK = re.compile('"|\r\n|\r|\n')
_BOM = "\ufeff"
#: Spark reads Parquet nanosecond timestamps only as longs (of nanoseconds), and only when asked to.
NANOS_AS_LONG = "spark.sql.legacy.parquet.nanosAsLong"
#: A line of nothing but blanks as pandas' reader takes them: spaces and tabs (and the CR of a line break).
_WHITE = r"^[ \t\r]*$"


@dataclass(frozen=True, slots=True)
class FileProblem:
    """A file that could not be read: nothing of it was aggregated, and it is recorded with ``reason``."""

    path: str
    reason: str


def escape_glob(path: str) -> str:
    """``path`` with Hadoop's pattern characters escaped, so Spark reads exactly that file."""
    return "".join(f"\\{c}" if c in GLOB_CHARS else c for c in path)


def _escapable(path: str) -> bool:
    """Whether Hadoop resolves ``path`` once its pattern characters are escaped: not where the path proper
    also holds a ':' (Hadoop's pattern matcher then takes the name for a URI with a scheme)."""
    proper = _SCHEME.sub("", path, count=1)
    return ":" not in proper or not GLOB_CHARS & set(proper)


def load_exactly(
    reader: Callable[[], DataFrameReader], paths: Sequence[str], finish: Callable[[DataFrame], DataFrame]
) -> DataFrame:
    """``finish`` of the rows of exactly the files ``paths``, whatever their names.  Escaped names are read
    together; a name Hadoop cannot resolve once escaped is read alone with Spark's no-pattern option,
    which reads one file right but a list of them wrongly (a file of the list read twice)."""
    together = [escape_glob(p) for p in paths if _escapable(p)]
    frames = [finish(reader().load(together))] if together else []
    frames += [finish(reader().option(NO_GLOB, "false").load(p)) for p in paths if not _escapable(p)]
    return functools.reduce(DataFrame.union, frames)


def with_arrival_part(df: DataFrame, columns: Sequence[Column | str] = ("*",)) -> DataFrame:
    """``columns`` of a file scan, tagged with their file, so arrival order follows the files even where
    Spark packs several small files into one partition (it sorts them by size, not by time)."""
    meta = [F.col(f"_metadata.{f}") for f in ("file_modification_time", "file_path", "file_block_start")]
    return df.select(*columns, F.struct(*meta).alias(ARRIVAL_PART))


def text_schema(names: Sequence[str], *, corrupt: bool = True) -> T.StructType:
    """Every column as a string (typing rejects a bad value with a reason instead of failing the file)."""
    fields = [T.StructField(n, T.StringType()) for n in names]
    if corrupt:
        fields.append(T.StructField(CORRUPT, T.StringType()))
    return T.StructType(fields)


def read_files(
    spark: SparkSession, paths: Sequence[str], fmt: str, stream: StreamDef
) -> tuple[list[DataFrame], list[FileProblem]]:
    """The rows of ``paths`` (Hadoop paths of files in ``fmt``) as one DataFrame per group of alike files,
    each with ``ARRIVAL_PART``, and the files that cannot be read."""
    if not paths:
        return [], []
    if any(local_path(p) is not None for p in paths):
        _skip_local_checksums(spark)
    paths, problems = _whole(spark, paths)
    if not paths:
        return [], problems
    if fmt == "csv":
        groups, more = _csv_groups(spark, paths, stream)
    elif fmt == "parquet":
        groups, more = _parquet_groups(spark, paths)
    else:
        schema = text_schema([a.name for a in stream.attributes])

        def reader() -> DataFrameReader:
            return spark.read.format("json").schema(schema).option("mode", "PERMISSIVE").option(
                "columnNameOfCorruptRecord", CORRUPT)

        groups, more = [_Group(list(paths), lambda files: load_exactly(reader, files, with_arrival_part))], []
    problems.extend(more)
    frames: list[DataFrame] = []
    for group in groups:
        df, bad = _load(group)
        problems.extend(bad)
        if df is not None:
            frames.append(df)
    return frames, problems


def _whole(spark: SparkSession, paths: Sequence[str]) -> tuple[list[str], list[FileProblem]]:
    """``paths`` less the compressed files that are damaged in a way Spark would not notice, and those."""
    kept: list[str] = []
    problems: list[FileProblem] = []
    for path in paths:
        try:
            reason = file_damage(spark, path)
        except Exception as exc:  # a file that cannot even be opened is recorded, the others are read
            reason = f"file cannot be read: {root_cause(exc)}"
        if reason is None:
            kept.append(path)
        else:
            problems.append(FileProblem(path, reason))
    return kept, problems


def blank_line(columns: Sequence[str], single: bool) -> Column:
    """Whether a row of a CSV read (its fields ``columns`` in the file's order, all strings) is a blank or
    whitespace-only line: Spark skips an empty line but reads ``"  "`` as a row of one field, malformed
    where the file has more columns.  ``single``: the file has one column (a row of one field is no
    malformed record there).  Never true of a row of empty fields (``,,``), which is a row."""
    first = F.col(columns[0])
    rest = [F.col(c).isNull() for c in columns[1:]]
    corrupt = F.col(CORRUPT).isNull() if single else F.col(CORRUPT).rlike(_WHITE)
    return F.coalesce(functools.reduce(Column.__and__, [first.rlike(_WHITE), *rest, corrupt]), F.lit(False))


def _skip_local_checksums(spark: SparkSession) -> None:
    """Open local files without looking for Hadoop checksum files beside them (inputs have none): the
    checksum file's name of ``a:b.csv``, ``.a:b.csv.crc``, is not a valid path, and the file could not be
    read at all.  Set on the process's cached local file system, which Spark's local reads share."""
    jvm = spark.sparkContext._jvm  # type: ignore[attr-defined]
    conf = spark.sparkContext._jsc.hadoopConfiguration()  # type: ignore[attr-defined]
    jvm.org.apache.hadoop.fs.FileSystem.getLocal(conf).setVerifyChecksum(False)


@dataclass
class _Group:
    """Files read alike: ``load`` reads a list of them into the stream's columns and ``ARRIVAL_PART``."""

    paths: list[str]
    load: Callable[[list[str]], DataFrame]


def _load(group: _Group) -> tuple[DataFrame | None, list[FileProblem]]:
    """The group's DataFrame; a file whose path Spark cannot even resolve (a name Hadoop refuses) is left
    out with the reason, found by resolving the files one by one."""
    try:
        return group.load(group.paths), []
    except Exception:  # resolved file by file below to name the file
        logger.info("resolving %d files together failed; resolving them one by one", len(group.paths))
    good: list[str] = []
    problems: list[FileProblem] = []
    for path in group.paths:
        try:
            group.load([path])
            good.append(path)
        except Exception as exc:  # any failure leaves this one file out, with its reason
            problems.append(FileProblem(path, f"file cannot be read: {root_cause(exc)}"))
    return (group.load(good) if good else None), problems


def root_cause(exc: BaseException) -> str:
    """One line saying why ``exc`` happened: the last ``Caused by`` of a Java stack trace, else the first
    line of the message (a Spark error's own message, not its stack)."""
    text = str(exc).strip()
    if "Caused by: " in text:
        text = text.rsplit("Caused by: ", 1)[1]
    line = next((part.strip() for part in text.splitlines() if part.strip()), type(exc).__name__)
    return line[:500]


# --- CSV: the header decided file by file ------------------------------------------------------------------


def head(spark: SparkSession, path: str, size: int = _HEAD_BYTES) -> bytes:
    """The first ``size`` bytes of a file's text: from the local disk, else through Spark's Hadoop file
    system; a compressed file's decompressed as Spark decompresses it."""
    if codec_of(path.rsplit("/", 1)[-1]) is not None:
        return decompressed_head(spark, path, size)
    local = local_path(path)
    if local is not None:
        with open(local, "rb") as fh:
            return fh.read(size)
    jvm = spark.sparkContext._jvm  # type: ignore[attr-defined]
    conf = spark.sparkContext._jsc.hadoopConfiguration()  # type: ignore[attr-defined]
    return hadoop_head(jvm.org.apache.hadoop.fs.Path(path).getFileSystem(conf), jvm, path, size)


def csv_header(first_bytes: bytes, stream: StreamDef) -> tuple[str, ...] | None:
    """The column names of a CSV file whose first line names every attribute of ``stream`` (in any order,
    any case, with other columns too, after a byte order mark); None when the first line is data."""
    text = first_bytes.decode("utf-8", errors="replace").removeprefix(_BOM)
    line = text.splitlines()[0] if text else ""
    try:
        fields = next(csv.reader(io.StringIO(line)), [])
    except csv.Error:
        return None
    names = tuple(f.strip() for f in fields)
    lowered = [n.lower() for n in names]
    if len(set(lowered)) != len(lowered) or not {a.name.lower() for a in stream.attributes} <= set(lowered):
        return None
    return names


def csv_line_break(first_bytes: bytes) -> str:
    """How a CSV file's lines end, from its first bytes, counting only line breaks outside quotes (a quoted
    field may hold any): ``"\\r\\n"`` when they all end in CRLF, ``"\\n"`` when they all end in a line feed,
    ``"\\r"`` for a lone carriage return (as old Mac tools write), and ``"mixed"`` for both CRLF and lone
    line feeds.  Spark is told the file's own break, so a quoted field's own CR (``"a\\r"``) stays whole;
    only a mixed file is read by line feeds with the CR of its CRLF lines taken off the last field."""
    text = first_bytes.decode("utf-8", errors="replace")
    if len(first_bytes) >= _HEAD_BYTES and text.endswith("\r"):
        text = text[:-1]  # cut by the head's size: maybe the CR of a CRLF
    breaks: set[str] = set()
    quoted = False
    for found in _QUOTE_OR_BREAK.finditer(text):
        if found.group() == '"':
            quoted = not quoted
        elif not quoted:
            breaks.add(found.group())
    if breaks == {"\r"}:
        return "\r"
    if breaks == {"\r\n"}:
        return "\r\n"
    return "mixed" if "\r\n" in breaks else "\n"


@dataclass(frozen=True, slots=True)
class _CsvLayout:
    """How a CSV file is written: its header (None: none) and its line break."""

    header: tuple[str, ...] | None
    line_break: str


def _csv_groups(spark: SparkSession, paths: Sequence[str], stream: StreamDef) -> tuple[list[_Group], list[FileProblem]]:
    by_layout: dict[_CsvLayout, list[str]] = {}
    problems: list[FileProblem] = []
    for path in paths:
        try:
            first = head(spark, path)
        except Exception as exc:  # an unreadable file is recorded, the others are read
            problems.append(FileProblem(path, f"file cannot be read: {root_cause(exc)}"))
            continue
        if len(first) < _HEAD_BYTES and not first.decode("utf-8", "replace").removeprefix(_BOM).strip("\r\n"):
            continue  # empty but for a byte order mark (as editors save an empty file): no events
        layout = _CsvLayout(csv_header(first, stream), csv_line_break(first))
        by_layout.setdefault(layout, []).append(path)
    return [_Group(files, _csv_loader(spark, layout, stream)) for layout, files in by_layout.items()], problems


def _csv_loader(spark: SparkSession, layout: _CsvLayout, stream: StreamDef) -> Callable[[list[str]], DataFrame]:
    """Files of ``layout`` read into the stream's columns, as RFC 4180 has it: a quote inside a quoted
    field is doubled, a backslash is a character, a quoted field may hold line breaks.  A row with more or
    fewer fields than the file's columns is a malformed record."""
    header = layout.header
    names = header if header is not None else tuple(a.name for a in stream.attributes)
    positional = [f"_tiltframe_c{i}" for i in range(len(names))]

    def reader() -> DataFrameReader:
        return (
            spark.read.format("csv").schema(text_schema(positional))
            .option("header", str(header is not None).lower()).option("escape", '"')
            .option("multiLine", "true")
            .option("lineSep", "\n" if layout.line_break == "mixed" else layout.line_break)
            .option("mode", "PERMISSIVE").option("columnNameOfCorruptRecord", CORRUPT)
        )

    by_name = {n.lower(): i for i, n in enumerate(names)}
    columns: list[Column] = []
    for attr in stream.attributes:
        i = by_name.get(attr.name.lower())
        if i is not None:
            value = F.col(positional[i])
            if i == 0:  # a byte order mark that Spark leaves on a header-less file's first field
                value = F.regexp_replace(value, f"^{_BOM}", "")
            if i == len(names) - 1 and layout.line_break == "mixed":  # the CR of a CRLF line, left on its last field
                value = F.when(value != "\r", F.regexp_replace(value, "\r\\z", ""))  # alone: an empty field
            columns.append(value.alias(attr.name))

    blank = blank_line(positional, len(positional) == 1)

    def load(files: list[str]) -> DataFrame:
        return load_exactly(reader, files, lambda df: with_arrival_part(df.where(~blank), [*columns, CORRUPT]))

    return load


# --- Parquet: each file with its own schema ----------------------------------------------------------------


def _parquet_groups(spark: SparkSession, paths: Sequence[str]) -> tuple[list[_Group], list[FileProblem]]:
    """Files grouped by their footer's schema; a file whose footer cannot be read is a problem."""
    by_schema: dict[str, tuple[pa.Schema | None, list[str]]] = {}
    problems: list[FileProblem] = []
    for path in paths:
        local = local_path(path)
        if local is None:  # footers of remote files are read by Spark, with the first file's schema
            by_schema.setdefault("", (None, []))[1].append(path)
            continue
        try:
            schema = pq.read_schema(local)
        except Exception as exc:  # a truncated or foreign file is recorded, not fatal
            problems.append(FileProblem(path, f"not a readable Parquet file: {root_cause(exc)}"))
            continue
        by_schema.setdefault(schema.to_string(show_schema_metadata=False), (schema, []))[1].append(path)
    return [_Group(files, _parquet_loader(spark, schema, files[0])) for schema, files in by_schema.values()], problems


#: Spark's reading of each Parquet schema seen, per session: inferring it reads a footer through Spark,
#: which every micro-batch would otherwise pay again for files written alike.
_SPARK_SCHEMAS: dict[tuple[int, str], T.StructType] = {}


def _spark_schema(spark: SparkSession, schema: pa.Schema | None, first: str) -> T.StructType:
    if schema is None:  # a remote file: no footer read here to key the schema by
        return parquet_schema(spark, first)
    key = (id(spark), schema.to_string(show_schema_metadata=False))
    if key not in _SPARK_SCHEMAS:
        if len(_SPARK_SCHEMAS) > 256:
            _SPARK_SCHEMAS.clear()
        _SPARK_SCHEMAS[key] = parquet_schema(spark, first)
    return _SPARK_SCHEMAS[key]


def _nanos(schema: pa.Schema | None) -> list[str]:
    if schema is None:
        return []
    return [f.name for f in schema if pa.types.is_timestamp(f.type) and f.type.unit == "ns"]


def _parquet_loader(spark: SparkSession, schema: pa.Schema | None, first: str) -> Callable[[list[str]], DataFrame]:
    """Files of one Parquet schema, read with the schema Spark gives their first file.  Nanosecond
    timestamps, which Spark reads only as longs, become instants again (to the microsecond)."""
    nanos = _nanos(schema)
    if nanos:
        spark.conf.set(NANOS_AS_LONG, "true")
    spark_schema = _spark_schema(spark, schema, first)

    def finish(df: DataFrame) -> DataFrame:
        if not nanos:
            return with_arrival_part(df)
        fixed = [F.timestamp_micros(F.expr(f"`{c}` div 1000")).alias(c) if c in nanos else F.col(f"`{c}`")
                 for c in df.columns]
        return with_arrival_part(df, fixed)

    def load(files: list[str]) -> DataFrame:
        return load_exactly(lambda: spark.read.format("parquet").schema(spark_schema), files, finish)

    return load


def parquet_schema(spark: SparkSession, path: str) -> T.StructType:
    """The schema Spark gives the Parquet file ``path``."""
    return load_exactly(lambda: spark.read.format("parquet"), [path], lambda df: df).schema
