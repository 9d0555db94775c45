"""A file source's micro-batches: the files Spark's file source listed for each batch, read as a batch
read of their own (``tiltframe.engine.inputs.file_reads``), with files that cannot be read set aside.

Spark's file source is the lister: it remembers which files it has seen, decides what each micro-batch
takes, and replays a failed batch with the same files.  Its query reads the folder as ``binaryFile``,
whose rows are never computed: the events are read by ``FileBatches``, file by file where files differ,
so a file's name is never taken for a pattern, a CSV header is decided per file, and one file that cannot
be read does not stop every file behind it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Protocol
from urllib.parse import unquote, urlsplit

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from tiltframe.engine.inputs.batch_sessions import BatchSessions
from tiltframe.engine.inputs.file_manifest import FileManifest
from tiltframe.engine.inputs.file_reads import FileProblem, read_files, root_cause
from tiltframe.engine.inputs.hadoop_paths import Location
from tiltframe.errors import DataError, TiltframeError
from tiltframe.model.streams import StreamDef

logger = logging.getLogger(__name__)

#: What a batch does with a file that cannot be read: record it and go on, or stop the run.
BAD_FILE_POLICIES = ("skip", "fail")

class BatchProcess(Protocol):
    """What a file source's batch is given to (``AggregationPipeline.process``)."""

    def __call__(self, raw: Sequence[DataFrame], batch_id: int, files: Sequence[FileProblem], *,
                 small: bool) -> object:
        """``raw``: one micro-batch's DataFrames; ``files``: the files set aside; ``small``: a small batch
        (``engine.inputs.batch_sessions``)."""


class FileBatches:
    """The ``foreachBatch`` function of a file source's query.

    The files of a batch are the ones Spark's logs name for its batch id (``batch_files``), so a replayed
    batch reads the same files; where the logs are not in the form read here, the paths come from the
    rows Spark hands over (a small job).  Reading them as a plain batch read also keeps the columnar
    Parquet scan and its fusion with the aggregation, which ``foreachBatch``'s rows lose.

    A batch whose job fails is not lost: each of its files is read alone, those that fail alone are set
    aside with the reason (``on_bad_file='skip'``, the default) and the batch runs again without them.
    With ``on_bad_file='fail'`` any file that cannot be read stops the run.

    A small batch is read in a session of the source's own that skips adaptive execution's re-planning
    (``tiltframe.engine.inputs.batch_sessions``).
    """

    def __init__(
        self, spark: SparkSession, fmt: str, stream: StreamDef, checkpoint: Location, process: BatchProcess, *,
        on_bad_file: str = "skip",
    ) -> None:
        """``checkpoint``: the query's checkpoint location (Spark's logs); the record of the files read
        is kept beside it (``FileManifest``)."""
        self.spark = spark
        self.fmt = fmt
        self.stream = stream
        self.checkpoint = checkpoint
        self.process = process
        self.on_bad_file = on_bad_file
        self.manifest = FileManifest(checkpoint.parent)
        self.sessions = BatchSessions(spark)
        self._warned = False

    def __call__(self, raw: DataFrame, batch_id: int) -> None:
        files = batch_files(self.checkpoint, batch_id)
        if files is None:
            if not self._warned:
                logger.info("input of stream %s: Spark's logs are not in the form known here; the files of each "
                            "batch come from its rows", self.stream.name)
                self._warned = True
            files = sorted({r[0] for r in raw.select("path").collect()})
            files = [logged_path(f) for f in files]
        self.manifest.warn_changed()
        sizes = self.manifest.record(batch_id, files)
        small = self.sessions.is_small(files, sizes)
        spark = self.sessions.for_batch(small, tiny=small and self.sessions.is_tiny(files, sizes))
        frames, problems = read_files(spark, files, self.fmt, self.stream)
        self._strict(problems)
        try:
            self.process(frames, batch_id, problems, small=small)
        except TiltframeError:
            raise
        except Exception:
            failing = [p for p in (self._probe(f) for f in files if f not in {q.path for q in problems}) if p]
            if not failing:
                raise
            self._strict(failing)
            said = "; ".join(f"{p.path}: {p.reason}" for p in failing)
            logger.warning("input of stream %s, batch %s: %d file(s) cannot be read and are set aside: %s",
                           self.stream.name, batch_id, len(failing), said)
            bad = {p.path for p in (*problems, *failing)}
            frames, more = read_files(spark, [f for f in files if f not in bad], self.fmt, self.stream)
            self.process(frames, batch_id, [*problems, *failing, *more], small=small)

    def _strict(self, problems: Sequence[FileProblem]) -> None:
        if problems and self.on_bad_file == "fail":
            first = problems[0]
            msg = f"input of stream {self.stream.name}: {first.path}: {first.reason} (--on-bad-file fail)"
            raise DataError(msg)

    def _probe(self, path: str) -> FileProblem | None:
        """The problem of one file, found by reading all of it alone; None when it reads."""
        try:
            frames, problems = read_files(self.spark, [path], self.fmt, self.stream)
            if problems:
                return problems[0]
            for df in frames:
                df.select(F.count(F.lit(1)), F.sum(F.hash(*[F.col(c) for c in df.columns]))).collect()
        except Exception as exc:  # the file's own failure, told in one line
            return FileProblem(path, f"file cannot be read: {root_cause(exc)}")
        return None


def batch_files(checkpoint: Location, batch_id: int) -> list[str] | None:
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
                    compacts = sorted(int(p.name.removesuffix(".compact")) for p in log.iterdir()
                                      if p.name.endswith(".compact"))
                k = next((k for k in compacts if k >= entry), None)
                found = None if k is None else _log_entries(log / f"{k}.compact")
            if found is None:
                return None
            files.extend(e["path"] for e in found if e.get("batchId") == entry)
        return [logged_path(f) for f in files]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _log_offset(checkpoint: Location, batch_id: int) -> int | None:
    """The file source's ``logOffset`` recorded for ``batch_id`` in the offset log."""
    path = checkpoint / "offsets" / str(batch_id)
    if not path.exists():
        return None
    lines = path.read_text(encoding="utf-8").splitlines()
    if len(lines) != 3 or lines[0] != "v1":  # the version, the batch's metadata, the one source's offset
        return None
    return int(json.loads(lines[2])["logOffset"])


def _log_entries(path: Location) -> list[dict] | None:
    lines = path.read_text(encoding="utf-8").splitlines()
    if not lines or lines[0] != "v1":
        return None
    return [json.loads(line) for line in lines[1:] if line.strip()]


def logged_path(uri: str) -> str:
    """A logged file URI as a path Spark's reader takes (what Hadoop's ``new Path(new URI(uri))`` gives:
    the path part decoded)."""
    parts = urlsplit(uri)
    authority = f"//{parts.netloc}" if parts.netloc else ""
    return f"{parts.scheme}:{authority}{unquote(parts.path)}" if parts.scheme else unquote(parts.path)
