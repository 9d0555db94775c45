"""Input folders on any file system Spark reaches (hdfs, s3a, abfss, gs, file, plain local paths), checked
and listed through Spark's own Hadoop FileSystem API, so that what tiltframe accepts is what Spark reads.

A scheme whose connector is not on Spark's classpath is a usage error that names the package and how to
add it.  Local folders (plain paths and ``file:`` URIs) are listed by Python itself, the same view, without
a JVM call per file.  The checkpoint root may be on any of them too (``checkpoint_root``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from tiltframe.engine.inputs.hadoop_paths import HadoopPath, Location, hadoop_head, hadoop_problem, scheme_of
from tiltframe.errors import UsageError

#: The environment variable for ``--checkpoint-dir``.
CHECKPOINT_DIR_ENV = "TILTFRAME_CHECKPOINT_DIR"


@dataclass(frozen=True, slots=True)
class FolderFile:
    """A file of an input folder: its name, its path as Spark reads it, its size in bytes."""

    name: str
    path: str
    length: int


@dataclass(frozen=True, slots=True)
class Folder:
    """An input folder that exists: ``path`` as Spark is given it; ``local`` when it is on this machine."""

    path: str
    local: Path | None
    _fs: Any = None
    _jvm: Any = None

    def files(self) -> list[FolderFile]:
        """The files that are read: not hidden, not Spark's (``.x``, ``_x``), by name."""
        if self.local is not None:
            found = [FolderFile(p.name, str(p), p.stat().st_size) for p in self.local.iterdir() if p.is_file()]
        else:
            found = []
            for status in self._fs.listStatus(self._jvm.org.apache.hadoop.fs.Path(self.path)):
                if status.isFile():
                    p = status.getPath()
                    found.append(FolderFile(p.getName(), p.toString(), status.getLen()))
        return sorted((f for f in found if not f.name.startswith((".", "_"))), key=lambda f: f.name)

    def subfolders(self) -> list[Folder]:
        """The folders inside this one, but hidden ones and Spark's (``.x``, ``_x``), by name."""
        if self.local is not None:
            found = [(p.name, str(p), p) for p in self.local.iterdir() if p.is_dir()]
        else:
            found = [(st.getPath().getName(), st.getPath().toString(), None)
                     for st in self._fs.listStatus(self._jvm.org.apache.hadoop.fs.Path(self.path)) if st.isDirectory()]
        return [Folder(path, local, self._fs, self._jvm) for name, path, local in sorted(found)
                if not name.startswith((".", "_"))]

    @property
    def name(self) -> str:
        return self.local.name if self.local is not None else self.path.rstrip("/").rsplit("/", 1)[-1]

    def head(self, file: FolderFile, size: int) -> bytes:
        """The first ``size`` bytes of ``file`` (fewer when it is shorter)."""
        if self.local is not None:
            with Path(file.path).open("rb") as fh:
                return fh.read(size)
        return hadoop_head(self._fs, self._jvm, file.path, size)


def local_path(path: str) -> Path | None:
    """``path`` on this machine's file system: a plain path or a ``file:`` URI (``file:/x``, ``file:///x``,
    ``file://localhost/x``), read as Hadoop's Path reads it: written out, never percent-decoded, a ``?`` or
    ``#`` part of the name; None for any other scheme or host."""
    scheme = scheme_of(path)
    if scheme is None:
        return Path(path)
    if scheme != "file":
        return None
    rest = path[len("file:") :]
    if rest.startswith("//"):
        host, _, tail = rest[2:].partition("/")
        return Path("/" + tail) if host in ("", "localhost") else None
    return Path(rest)


def open_folder(spark: SparkSession, path: str, what: str) -> Folder:
    """The folder ``path`` on whatever file system its URI names, checked through Hadoop's FileSystem API;
    a usage error, prefixed with ``what``, when the scheme has no connector, it does not exist or it is
    not a directory."""
    jvm = spark._jvm
    assert jvm is not None
    # A relative local path is Python's working directory's, which Hadoop would not see (it resolves against
    # the JVM's, and the two part when the process changes directory).
    where = path if scheme_of(path) or os.path.isabs(path) else os.path.abspath(path)
    try:
        jpath = jvm.org.apache.hadoop.fs.Path(where)
        fs = jpath.getFileSystem(spark._jsc.hadoopConfiguration())
        qualified = fs.makeQualified(jpath)
        status = fs.getFileStatus(qualified) if fs.exists(qualified) else None
    except Exception as exc:  # py4j's Py4JJavaError, or an illegal path
        raise UsageError(f"{what}: {hadoop_problem(exc, path, jvm)}") from None
    if status is None:
        msg = f"{what}: '{path}' does not exist (give a directory of csv, json or parquet files)"
        raise UsageError(msg)
    if not status.isDirectory():
        msg = f"{what}: '{path}' is not a directory (give a folder of files to watch)"
        raise UsageError(msg)
    uri = qualified.toUri()
    local = Path(uri.getPath()) if (uri.getScheme() or "file") == "file" else None
    return Folder(path if local is None or scheme_of(path) else str(local), local, fs, jvm)


def checkpoint_root(value: str | Path | None, data_dir: Path) -> Location:
    """Where checkpoints live: ``value`` (``--checkpoint-dir``), else ``$TILTFRAME_CHECKPOINT_DIR``, else
    ``<data_dir>/checkpoints``.  A plain path or a ``file:`` URI is a local :class:`~pathlib.Path`; any other
    URI a :class:`HadoopPath`, reached through Spark once it runs (``check_checkpoint_root``)."""
    raw = value if value is not None else os.environ.get(CHECKPOINT_DIR_ENV) or None
    if raw is None:
        return data_dir.absolute() / "checkpoints"
    local = raw if isinstance(raw, Path) else local_path(raw)
    if local is None:
        return HadoopPath(str(raw))
    if local.exists() and not local.is_dir():
        msg = f"checkpoint directory '{raw}' is a file, not a directory"
        raise UsageError(msg)
    return local.absolute()  # never resolved by Spark against the JVM's working directory


def check_checkpoint_root(root: Location) -> None:
    """Reach a checkpoint directory on a Hadoop file system through the running Spark: a scheme without its
    connector, or a file in its place, is a usage error before any query starts."""
    if not isinstance(root, HadoopPath):
        return
    try:
        root.check()
        is_file = root.exists() and not root.is_dir()
    except (UsageError, OSError) as exc:
        raise UsageError(f"checkpoint directory: {exc}") from None
    if is_file:
        msg = f"checkpoint directory '{root}' is a file, not a directory"
        raise UsageError(msg)
