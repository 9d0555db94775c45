"""An aggregation's input folder given under another name than its checkpoint read (the data moved from
``landing/`` to ``landing2/``, a mount point renamed, a path spelled through a symlink or from another
directory): followed without reading a file twice, or refused in one line when that cannot be told.

Spark's file source knows a file by its full path (its source log in the checkpoint), and at every start
it plans its latest batch again with the folder given now as the files' base path: files of another
folder fail every start (``Wrong basePath``).  tiltframe knows the files a pipeline read by their place in
the folder and what was read of them (``FileManifest``: size and modification time).  So when the folder
given differs from the one the checkpoint read (``input.json`` beside it, or the folder of the logged files
in a checkpoint older than that):

- the same folder under another name (both names lead to one directory): followed;
- another local folder where no file of a name read before differs in size from what was read: followed,
  those files known as read (not read again), the others read as new;
- another folder where a file of a name read before has another size (another data set whose names
  match, or a file changed since): refused, naming both folders, the file and the ways on; nothing read;
- folders not on this machine (hdfs, s3a, ...): refused the same way when they differ, since their files'
  sizes are not recorded.

Following rewrites the folder in the paths of Spark's source log (its plain and compacted files) and of the
record of the files read, each file written aside and renamed over (a crash leaves it to be done again at
the next start, the marker last), so Spark sees the known files as seen and plans its latest batch in the
new folder.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from urllib.parse import unquote

from tiltframe.engine.inputs.file_batches import logged_path
from tiltframe.engine.inputs.file_manifest import FOLDER as FILES_FOLDER
from tiltframe.engine.inputs.filesystems import Folder, local_path
from tiltframe.engine.inputs.hadoop_paths import Location, write_atomic
from tiltframe.errors import UsageError

logger = logging.getLogger(__name__)

#: The marker of the folder a pipeline reads, in its checkpoint directory (beside Spark's ``spark/``).
MARKER = "input.json"


@dataclass(frozen=True, slots=True)
class _Read:
    """A file Spark's source log names: its logged URI, its path as the reader takes it, the record's
    (size, modification time) of it when local."""

    uri: str
    path: str
    size: int | None


def follow_folder(folder: Folder, checkpoint: Location, stream: str) -> None:
    """Make the file source checkpointed at ``checkpoint`` (Spark's ``spark/`` folder) read ``folder``: a
    no-op where it read that folder, the paths of its logs moved to ``folder`` where the folder moved, a
    usage error where that cannot be done without reading a file twice or losing one (module docstring)."""
    uri = _folder_uri(folder)
    home = checkpoint.parent
    if _marked(home) == uri:  # the folder it reads: Spark's log is not read at every start
        return
    log = checkpoint / "sources" / "0"
    logs = _source_logs(log) if log.is_dir() else {}
    if logs is None:  # a log in a form not known here: Spark's own checks stand
        return
    uris = [e["path"] for entries in logs.values() for e in entries]
    if _all_under(uris, uri):
        _mark(home, folder, uri)
        return
    old_uri, old_path = _read_folder(home, uris, folder)
    if old_uri is None or not _all_under(uris, old_uri, uri):
        msg = (f"input of stream {stream}: the checkpoint {checkpoint} read files outside '{folder.path}' that "
               f"tiltframe cannot place in one folder ({_example(uris, uri)}). {_ways(stream, old_path, folder)}")
        raise UsageError(msg)
    sizes = _recorded_sizes(home)
    moved = [_Read(u, logged_path(u), None) for u in uris if _under(u, old_uri)]
    moved = [_Read(r.uri, r.path, sizes.get(r.path)) for r in moved]
    old = local_path(old_path) if old_path else None
    if folder.local is None or old is None:
        msg = (f"input of stream {stream}: '{folder.path}' is not the folder its checkpoint read ('{old_path}'), "
               f"and files off this machine are not followed to another folder (their sizes are not recorded). "
               f"{_ways(stream, old_path, folder)}")
        raise UsageError(msg)
    same = _same_folder(old, folder)
    known = 0
    for r in moved:
        rel = PurePosixPath(r.uri[len(old_uri) + 1:])
        now = folder.local.joinpath(*(unquote(p) for p in rel.parts))
        size = now.stat().st_size if now.is_file() else None
        if size is None:
            continue
        if not same and r.size is not None and size != r.size:
            msg = (f"input of stream {stream}: '{folder.path}' is not the folder its checkpoint read ('{old_path}'): "
                   f"{now.name} there holds {size} bytes where {r.size} were read. {_ways(stream, old_path, folder)}")
            raise UsageError(msg)
        known += 1
    _rewrite_record(home, logged_path(old_uri), logged_path(uri))  # first: a crash then leaves the log to redo
    _rewrite(log, logs, old_uri, uri)
    _mark(home, folder, uri)
    logger.warning("input of stream %s: its checkpoint read '%s'; following '%s' now (%s): %d file(s) read there "
                   "are known by name and size and not read again, other files are read as new", stream,
                   old_path, folder.path, "the same folder" if same else "another folder", known)


def check_spark_folder(folder: Folder, checkpoint: Location, stream: str, what: str) -> None:
    """Make a source Spark reads itself (the rows of a continuous query, a retrieval join's requests, a stream
    query's rows), checkpointed at ``checkpoint``, read ``folder``: a no-op where it read that folder; its
    log's paths moved to ``folder`` where that is the same folder under another name; a usage error naming
    both folders where it is another one.  Spark knows the files of such a source by their paths alone (no
    record of what was read of them), so it would read another folder's files again from the first: a run
    over a moved folder counted every file of it twice."""
    uri = _folder_uri(folder)
    sources = checkpoint / "sources"
    for log in (sources.iterdir() if sources.is_dir() else []):
        logs = _source_logs(log) if log.is_dir() else None
        uris = [e["path"] for entries in (logs or {}).values() for e in entries]
        if logs is None or _all_under(uris, uri):
            continue
        old_uri, old_path = _read_folder(checkpoint, uris, folder)
        old = local_path(old_path) if old_path else None
        if old_uri is not None and _same_folder(old, folder) and _all_under(uris, old_uri, uri):
            _rewrite(log, logs, old_uri, uri)
            logger.warning("input of stream %s: %s read '%s'; following '%s' now (the same folder)", stream, what,
                           old_path, folder.path)
            continue
        where = f"'{old_path}'" if old_path else f"files outside it ({_example(uris, uri)})"
        msg = (f"input of stream {stream}: {what} read {where} before, not '{folder.path}': Spark knows its files "
               f"by their paths alone, so it would read the files of another folder again. Give "
               f"{_back(stream, old_path)}a new --checkpoint-dir (or --data-dir) to start {what} over from "
               f"'{folder.path}' (docs/bad-input.md, \"A moved folder\")")
        raise UsageError(msg)


def _ways(stream: str, old: str | None, folder: Folder) -> str:
    return (f"Give {_back(stream, old)}--rebuild to start over from '{folder.path}' alone (what the aggregations "
            f"hold of the other folder is dropped), or a new --data-dir (or --checkpoint-dir) for a rollup of its own "
            f"(docs/bad-input.md, \"A moved folder\")")


def _back(stream: str, old: str | None) -> str:
    """The way back to the folder read before, where it is known."""
    return f"--input {stream}={old} to go on with that folder, or " if old else ""


def _example(uris: list[str], uri: str) -> str:
    return next((u for u in uris if not _under(u, uri)), "?")


def _under(uri: str, root: str) -> bool:
    return uri.startswith(root + "/")


def _all_under(uris: list[str], *roots: str) -> bool:
    """Whether every logged file is in one of the folders ``roots``."""
    return all(any(_under(u, r) for r in roots) for u in uris)


def _same_folder(old: Path | None, folder: Folder) -> bool:
    """Whether the local folder read before is ``folder`` under another name."""
    return old is not None and folder.local is not None and old.exists() and os.path.samefile(old, folder.local)


def _folder_uri(folder: Folder) -> str:
    """The folder as Spark's source log writes its files' paths: its qualified URI (``file:///x/y``)."""
    return _qualified(folder, folder.path)


def _qualified(folder: Folder, path: str) -> str:
    """``path`` qualified on ``folder``'s file system, as Spark's source log writes paths."""
    jpath = folder._jvm.org.apache.hadoop.fs.Path(path)
    return str(folder._fs.makeQualified(jpath).toUri().toString()).rstrip("/")


def _source_logs(log: Location) -> dict[str, list[dict]] | None:
    """Each file of Spark's source log (``<n>``, ``<k>.compact``) and its entries; None when one is in a
    form not known here."""
    out: dict[str, list[dict]] = {}
    for p in log.iterdir():
        name = p.name
        if name.startswith(".") or not (name.isdigit() or (name.endswith(".compact") and name[:-8].isdigit())):
            continue
        lines = p.read_text(encoding="utf-8").splitlines()
        if not lines or lines[0] != "v1":
            return None
        try:
            entries = [json.loads(line) for line in lines[1:] if line.strip()]
        except ValueError:
            return None
        if not all(isinstance(e, dict) and isinstance(e.get("path"), str) for e in entries):
            return None
        out[name] = entries
    return out


def _read_folder(home: Location, uris: list[str], folder: Folder) -> tuple[str | None, str | None]:
    """The URI and the path of the folder the checkpoint read: its marker's, else the folder of the logged
    files outside ``folder`` (partition folders ``k=v`` taken off)."""
    marker = home / MARKER
    if marker.exists():
        content = json.loads(marker.read_text(encoding="utf-8"))
        return str(content["uri"]), str(content["folder"])
    given = _folder_uri(folder)
    paths = [logged_path(u) for u in uris if not _under(u, given)]
    locals_ = [local_path(p) for p in paths]
    if not paths or any(p is None for p in locals_):
        return None, None
    common = Path(os.path.commonpath([str(p.parent) for p in locals_ if p is not None]))
    while "=" in common.name:
        common = common.parent
    return _qualified(folder, str(common)), str(common)


def _recorded_sizes(home: Location) -> dict[str, int]:
    """The size of each file as the record of the files read noted it (its latest batch's)."""
    sizes: dict[str, int] = {}
    files = home / FILES_FOLDER
    if files.is_dir():
        for entry in sorted((p for p in files.iterdir() if p.name.endswith(".json")),
                            key=lambda p: int(p.name.removesuffix(".json"))):
            sizes.update({path: int(v[0]) for path, v in json.loads(entry.read_text(encoding="utf-8")).items()})
    return sizes


def _rewrite(log: Location, logs: dict[str, list[dict]], old: str, new: str) -> None:
    """Spark's source log with every file under ``old`` moved under ``new`` (each log file replaced whole)."""
    for name, entries in logs.items():
        if not any(e["path"].startswith(old + "/") for e in entries):
            continue
        moved = [{**e, "path": new + e["path"][len(old):]} if e["path"].startswith(old + "/") else e for e in entries]
        write_atomic(log / name, "v1\n" + "\n".join(json.dumps(e, separators=(",", ":")) for e in moved))


def _rewrite_record(home: Location, old: str, new: str) -> None:
    """The record of the files read (``FileManifest``) with every path under ``old`` moved under ``new``."""
    files = home / FILES_FOLDER
    if not files.is_dir():
        return
    for entry in files.iterdir():
        if not entry.name.endswith(".json"):
            continue
        content = json.loads(entry.read_text(encoding="utf-8"))
        if any(p.startswith(old + "/") for p in content):
            moved = {(new + p[len(old):] if p.startswith(old + "/") else p): v for p, v in content.items()}
            write_atomic(entry, json.dumps(moved))


def _marked(home: Location) -> str | None:
    """The URI of the folder the marker names, None without a marker."""
    marker = home / MARKER
    return str(json.loads(marker.read_text(encoding="utf-8"))["uri"]) if marker.exists() else None


def _mark(home: Location, folder: Folder, uri: str) -> None:
    marker = home / MARKER
    content = {"folder": folder.path, "uri": uri}
    if not marker.exists() or json.loads(marker.read_text(encoding="utf-8")) != content:
        write_atomic(marker, json.dumps(content))
