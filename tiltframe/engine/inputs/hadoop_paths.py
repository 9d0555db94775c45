"""Files and directories on any Hadoop file system (hdfs, s3a, abfss, gs, viewfs, ...), reached through
Spark's own Hadoop FileSystem API, with the part of :class:`pathlib.Path` that checkpoints use; so a
checkpoint directory is handled by the same code whether it is a local :class:`~pathlib.Path` or a
:class:`HadoopPath` (``Location``).

Only the driver uses these (the JVM is reached through py4j): the small files tiltframe keeps beside
Spark's checkpoint and Spark's own offset and source logs.  A scheme whose connector is not on Spark's
classpath is a usage error that names the package and how to add it.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from tiltframe.errors import UsageError

#: The package that brings a scheme's Hadoop FileSystem, and its Maven coordinate (``{v}``: Hadoop's
#: version, which the connector must match).
CONNECTORS = {
    "s3a": ("hadoop-aws", "org.apache.hadoop:hadoop-aws:{v}"),
    "s3": ("hadoop-aws (use the s3a:// scheme)", "org.apache.hadoop:hadoop-aws:{v}"),
    "s3n": ("hadoop-aws (use the s3a:// scheme)", "org.apache.hadoop:hadoop-aws:{v}"),
    "gs": ("the Google Cloud Storage connector (gcs-connector)",
           "com.google.cloud.bigdataoss:gcs-connector:hadoop3-2.2.22"),
    "abfs": ("hadoop-azure", "org.apache.hadoop:hadoop-azure:{v}"),
    "abfss": ("hadoop-azure", "org.apache.hadoop:hadoop-azure:{v}"),
    "wasb": ("hadoop-azure", "org.apache.hadoop:hadoop-azure:{v}"),
    "wasbs": ("hadoop-azure", "org.apache.hadoop:hadoop-azure:{v}"),
    "adl": ("hadoop-azure-datalake", "org.apache.hadoop:hadoop-azure-datalake:{v}"),
    "oss": ("hadoop-aliyun", "org.apache.hadoop:hadoop-aliyun:{v}"),
    "cosn": ("hadoop-cos", "org.apache.hadoop:hadoop-cos:{v}"),
    "obs": ("hadoop-huaweicloud", "org.apache.hadoop:hadoop-huaweicloud:{v}"),
}


def scheme_of(path: str) -> str | None:
    """The URI scheme of ``path`` (lower case), None for a plain path (``C:\\x`` included)."""
    parsed = urlparse(path)
    return parsed.scheme.lower() if len(parsed.scheme) > 1 else None


def missing_connector(scheme: str, hadoop_version: str) -> str:
    """Why a path of ``scheme`` cannot be reached here and how to add what is missing."""
    if scheme not in CONNECTORS:
        return (f"no Hadoop file system for scheme '{scheme}' on Spark's classpath: add the jar of its connector "
                f"with spark-submit --packages GROUP:ARTIFACT:VERSION (or spark.jars.packages / --jars)")
    package, coordinate = CONNECTORS[scheme]
    coordinate = coordinate.format(v=hadoop_version)
    return (f"no Hadoop file system for scheme '{scheme}' on Spark's classpath: it comes with {package}; add it "
            f"with spark-submit --packages {coordinate} (or --conf spark.jars.packages={coordinate}, or "
            f"PYSPARK_SUBMIT_ARGS='--packages {coordinate} pyspark-shell' for the tiltframe command)")


def hadoop_problem(exc: Exception, path: str, jvm: Any) -> str:
    """What went wrong with ``path`` in Hadoop's words, or the connector that is missing."""
    java = getattr(exc, "java_exception", None)
    message = str(java.getMessage()) if java is not None else str(exc)
    kind = str(java.getClass().getName()) if java is not None else type(exc).__name__
    if "UnsupportedFileSystemException" in kind or "No FileSystem for scheme" in message or (
        "ClassNotFoundException" in message and "FileSystem" in message
    ):
        return missing_connector(scheme_of(path) or "?", str(jvm.org.apache.hadoop.util.VersionInfo.getVersion()))
    if "Incomplete HDFS URI" in message:
        return (f"'{path}' names no namenode: write hdfs://NAMENODE:PORT/..., or set the cluster's fs.defaultFS "
                f"(spark.hadoop.fs.defaultFS, or core-site.xml in HADOOP_CONF_DIR)")
    return f"'{path}' cannot be read: {message}"


def hadoop_head(fs: Any, jvm: Any, path: str, size: int) -> bytes:
    """The first ``size`` bytes of ``path`` (fewer when it is shorter) through the Hadoop file system ``fs``."""
    stream = fs.open(jvm.org.apache.hadoop.fs.Path(path))
    try:  # a Java byte[] comes back as Python bytes
        return bytes(stream.readNBytes(size))
    finally:
        stream.close()


class _Handle:
    """The JVM, the Hadoop configuration and the FileSystem of one URI, found when first needed: a
    HadoopPath can be named (and checked for its form) before Spark starts."""

    def __init__(self, uri: str) -> None:
        self.uri = uri
        self._parts: tuple[Any, Any, Any] | None = None

    def get(self) -> tuple[Any, Any, Any]:
        if self._parts is None:
            from pyspark import SparkContext

            sc = SparkContext._active_spark_context
            if sc is None:
                msg = f"'{self.uri}' is on a Hadoop file system, which is reached through Spark, and no Spark runs"
                raise UsageError(msg)
            jvm, conf = sc._jvm, sc._jsc.hadoopConfiguration()
            try:
                fs = jvm.org.apache.hadoop.fs.Path(self.uri).getFileSystem(conf)
            except Exception as exc:  # py4j's Py4JJavaError, or an illegal path
                raise UsageError(hadoop_problem(exc, self.uri, jvm)) from None
            self._parts = (jvm, conf, fs)
        return self._parts


class HadoopPath:
    """A file or directory on a Hadoop file system, named by its URI.  A failure of the file system is an
    :class:`OSError` (:class:`FileNotFoundError` for what does not exist), as for a local path."""

    def __init__(self, uri: str, _handle: _Handle | None = None) -> None:
        trimmed = uri.rstrip("/")
        self.uri = uri if trimmed.endswith(":") else trimmed
        self._handle = _handle or _Handle(self.uri)

    def __truediv__(self, name: str) -> HadoopPath:
        return HadoopPath(f"{self.uri.rstrip('/')}/{name}", self._handle)

    def __str__(self) -> str:
        return self.uri

    def __repr__(self) -> str:
        return f"HadoopPath({self.uri!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, HadoopPath) and other.uri == self.uri

    def __hash__(self) -> int:
        return hash(self.uri)

    @property
    def name(self) -> str:
        return self.uri.rpartition("/")[2]

    @property
    def parent(self) -> HadoopPath:
        return HadoopPath(self.uri.rpartition("/")[0], self._handle)

    def _call(self, what: str, fn: Any) -> Any:
        jvm, _, fs = self._handle.get()
        try:
            return fn(jvm, fs, jvm.org.apache.hadoop.fs.Path(self.uri))
        except Exception as exc:
            java = getattr(exc, "java_exception", None)
            kind = str(java.getClass().getName()) if java is not None else ""
            error = FileNotFoundError if kind.endswith("FileNotFoundException") else OSError
            raise error(f"cannot {what} {self.uri}: {hadoop_problem(exc, self.uri, jvm)}") from None

    def check(self) -> None:
        """Reach the file system now: a missing connector is a usage error before anything starts."""
        self._handle.get()

    def exists(self) -> bool:
        return bool(self._call("look at", lambda _j, fs, p: fs.exists(p)))

    def is_dir(self) -> bool:
        return bool(self._call("look at", lambda _j, fs, p: fs.exists(p) and fs.getFileStatus(p).isDirectory()))

    def iterdir(self) -> Iterator[HadoopPath]:
        statuses = self._call("list", lambda _j, fs, p: fs.listStatus(p))
        return iter([self / str(s.getPath().getName()) for s in statuses])

    def mkdir(self, parents: bool = True, exist_ok: bool = True) -> None:
        """Make the directory and its parents (Hadoop's ``mkdirs``; an existing one is fine)."""
        self._call("make", lambda _j, fs, p: fs.mkdirs(p))

    def read_text(self, encoding: str = "utf-8") -> str:
        def read(_jvm: Any, fs: Any, p: Any) -> bytes:
            stream = fs.open(p)
            try:
                return bytes(stream.readAllBytes())
            finally:
                stream.close()

        return self._call("read", read).decode(encoding)

    def write_atomic(self, text: str) -> None:
        """Write ``text`` aside, then rename it over this file in one step (FileContext's rename with
        OVERWRITE: atomic on HDFS, a copy on object stores, whose writes are whole anyway)."""
        tmp = self.parent / f".{self.name}.{uuid.uuid4().hex}.tmp"

        def write(_jvm: Any, fs: Any, p: Any) -> None:
            out = fs.create(p, False)
            try:
                out.write(bytearray(text.encode("utf-8")))
                if out.hasCapability("hsync"):  # object stores cannot sync; their files appear whole at close
                    out.hsync()
            finally:
                out.close()

        def rename(jvm: Any, _fs: Any, p: Any) -> None:
            conf = self._handle.get()[1]
            rename_options = jvm.org.apache.hadoop.fs.Options.Rename
            overwrite = _gateway().new_array(rename_options, 1)
            overwrite[0] = rename_options.OVERWRITE
            jvm.org.apache.hadoop.fs.FileContext.getFileContext(p.toUri(), conf).rename(
                jvm.org.apache.hadoop.fs.Path(tmp.uri), p, overwrite
            )

        tmp._call("write", write)
        self._call("rename onto", rename)

    def remove_tree(self) -> None:
        self._call("delete", lambda _j, fs, p: fs.delete(p, True))

    def rename_to(self, target: HadoopPath) -> None:
        """Move this directory to ``target`` (absent), on the same file system."""
        def rename(jvm: Any, fs: Any, p: Any) -> None:
            if not fs.rename(p, jvm.org.apache.hadoop.fs.Path(target.uri)):
                raise OSError(f"cannot rename {self.uri} to {target.uri}")

        self._call("rename", rename)


def _gateway() -> Any:
    from pyspark import SparkContext

    sc = SparkContext._active_spark_context
    assert sc is not None and sc._gateway is not None
    return sc._gateway


#: Where a checkpoint lives: a local directory, or a directory on a Hadoop file system.
Location = Path | HadoopPath


def as_location(path: str | Path | HadoopPath) -> Location:
    """``path`` as a Location: a HadoopPath as it is, anything else a local path."""
    return path if isinstance(path, HadoopPath) else Path(path)


def write_atomic(path: Location, text: str) -> None:
    """Write ``text`` to ``path`` aside, flushed, then renamed over it: a crash mid-write must not leave a
    file that no restart can read."""
    if isinstance(path, HadoopPath):
        path.write_atomic(text)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{uuid.uuid4().hex}.tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def move_tree(source: Location, target: Location) -> None:
    """Move the directory ``source`` to ``target``, which must not exist (the same kind of location)."""
    if isinstance(source, HadoopPath) and isinstance(target, HadoopPath):
        source.rename_to(target)
    else:
        os.replace(source, target)  # type: ignore[arg-type]


def remove_tree(path: Location) -> None:
    """Delete the directory ``path`` and all it holds; nothing when it is not there."""
    if isinstance(path, HadoopPath):
        path.remove_tree()
    elif path.exists():
        shutil.rmtree(path)
