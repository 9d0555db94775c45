"""Small JSON files that name what a directory belongs to (a pipeline's id, a deployment's shard), and
where a pipeline's directory is."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tiltframe.engine.inputs.hadoop_paths import Location, write_atomic

if TYPE_CHECKING:
    from tiltframe.aggregates.layout import AggregationLayout


def write_marker(path: Location, content: dict[str, Any]) -> None:
    """Write ``content`` to ``path`` aside, flushed, then renamed: a crash mid-write must not leave a marker
    that no restart can read."""
    write_atomic(path, json.dumps(content))


def checkpoint_dir(data_dir: Path, layout: AggregationLayout, root: Location | None = None) -> Location:
    """Where the pipeline of ``layout`` keeps its checkpoint: Spark's, the files it read, its id; under
    ``root`` (``--checkpoint-dir``) or else ``<data_dir>/checkpoints``."""
    return (root if root is not None else data_dir / "checkpoints") / f"{layout.name}-{layout.spec_hash}"
