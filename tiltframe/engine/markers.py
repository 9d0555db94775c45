"""Small JSON files that name what a directory belongs to (a pipeline's id, a deployment's shard), and
where a pipeline's directory is."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tiltframe.store.layout import AggregationLayout


def write_marker(path: Path, content: dict[str, Any]) -> None:
    """Write ``content`` to ``path`` aside, flushed to disk, then renamed: a crash mid-write must not leave
    a marker that no restart can read."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{uuid.uuid4().hex}.tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        fh.write(json.dumps(content))
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def checkpoint_dir(data_dir: Path, layout: AggregationLayout, root: Path | None = None) -> Path:
    """Where the pipeline of ``layout`` keeps its checkpoint: Spark's, the files it read, its id; under
    ``root`` (``--checkpoint-dir``) or else ``<data_dir>/checkpoints``."""
    return (root if root is not None else data_dir / "checkpoints") / f"{layout.name}-{layout.spec_hash}"
