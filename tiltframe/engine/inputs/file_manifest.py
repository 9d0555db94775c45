"""What each micro-batch of a folder read: every file's size and modification time when it was read, kept
beside the pipeline's checkpoint.

Spark's file source reads a file once, when it first sees it.  A file that grows afterwards (a log that is
appended to, a copy still running when the folder was listed) would lose its later lines without a trace.
Comparing the folder with this record finds such files: the run warns of them, and ``tiltframe inspect``
lists them with the bytes that were not read.  Files are best delivered whole: written elsewhere (or under
a name starting with ``.`` or ``_``, which is never read), then moved into the folder (docs/bad-input.md).
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass

from tiltframe.engine.inputs.filesystems import local_path
from tiltframe.engine.inputs.hadoop_paths import Location
from tiltframe.engine.rollup.markers import write_marker

logger = logging.getLogger(__name__)

#: The folder of the record, in an aggregation's checkpoint directory.
FOLDER = "files"


@dataclass(frozen=True, slots=True)
class ChangedFile:
    """A file that differs from what a batch read: ``size_now`` None when it is gone."""

    path: str
    batch_id: int
    size_read: int
    modified_read: int
    size_now: int | None
    modified_now: int | None

    @property
    def message(self) -> str:
        if self.size_now is None:
            return f"{self.path}: removed after batch {self.batch_id} read it (nothing lost)"
        if self.size_now > self.size_read:
            return (f"{self.path}: grew after batch {self.batch_id} read it: {self.size_now - self.size_read} bytes "
                    f"({self.size_read} read, {self.size_now} now) were not read")
        return (f"{self.path}: changed after batch {self.batch_id} read it ({self.size_read} bytes read, "
                f"{self.size_now} now): the changes were not read")


def _stat(path: str) -> tuple[int, int] | None:
    """Size and modification time (epoch ms) of a local file; None when it is gone or not local."""
    local = local_path(path)
    if local is None:
        return None
    try:
        st = os.stat(local)
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns // 1_000_000


class FileManifest:
    """The files each batch of one pipeline read (local files; remote ones are not followed yet)."""

    def __init__(self, checkpoint_dir: Location) -> None:
        self.folder = checkpoint_dir / FOLDER
        self._read: dict[str, tuple[int, int, int]] = {}  # path -> (batch, size, mtime)
        self._warned: set[tuple[str, int | None, int | None]] = set()
        if self.folder.is_dir():
            entries = [p for p in self.folder.iterdir() if p.name.endswith(".json")]
            for entry in sorted(entries, key=lambda p: int(p.name.removesuffix(".json"))):
                for path, (size, mtime) in json.loads(entry.read_text(encoding="utf-8")).items():
                    self._read[path] = (int(entry.name.removesuffix(".json")), size, mtime)

    def record(self, batch_id: int, paths: list[str]) -> dict[str, tuple[int, int]]:
        """Note the files of ``batch_id`` as they are now, just before they are read (a replayed batch
        notes them again); the local ones' (size, modification time)."""
        seen = {p: st for p in paths if (st := _stat(p)) is not None}
        if seen:
            write_marker(self.folder / f"{batch_id}.json", seen)
        self._read.update({p: (batch_id, size, mtime) for p, (size, mtime) in seen.items()})
        return seen

    def paths(self, upto: int | None = None) -> list[str]:
        """Every file some batch read (``upto``: some batch up to that id), in the order they were first read."""
        return [p for p, (batch, _, _) in self._read.items() if upto is None or batch <= upto]

    def changed(self) -> list[ChangedFile]:
        """Files that differ now from what was read, in the order they were read."""
        out = []
        for path, (batch, size, mtime) in self._read.items():
            now = _stat(path)
            if now != (size, mtime):
                out.append(ChangedFile(path, batch, size, mtime, *(now or (None, None))))
        return out

    def warn_changed(self) -> list[ChangedFile]:
        """Log each file that grew or changed since it was read (once per change), and return them all."""
        changed = self.changed()
        for c in changed:
            key = (c.path, c.size_now, c.modified_now)
            if c.size_now is not None and key not in self._warned:
                self._warned.add(key)
                logger.warning("input file %s; deliver files whole (see docs/bad-input.md)", c.message)
        return [c for c in changed if c.size_now is not None]
