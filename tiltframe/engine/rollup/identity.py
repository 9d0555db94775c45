"""Store identity: a store that lost batches its checkpoint wrote to it is found at start, never silently.

An aggregation's checkpoint directory holds Spark's progress (which input was read) and the pipeline
marker (``tiltframe-pipeline.json``), whose id the store's commit records carry.  When the store is
replaced, emptied or restored from an older backup while the checkpoint stays, Spark resumes after
batches the store no longer holds: their events would be missing from every total, and the next batches
would add onto nothing.  Spark's own commit log cannot tell, since a micro-batch without events writes
nothing to the store.  So the checkpoint also keeps ``tiltframe-store.json``: the greatest batch id this
pipeline committed to the store, noted after each commit.  At start, the store's greatest commit record
of the pipeline must be at least that batch.  A crash between the store's commit and the note leaves the
note behind the store, which is fine: the store then holds more than noted, never less.

The ways on, which the error names (docs/deployment.md, "A replaced or emptied store"):
``tiltframe run ... --rebuild`` (``rebuild=True``) drops what the store holds of the aggregation and its
checkpoint, then reads every input again; or the checkpoint moves away, and a new pipeline starts over
the store as it is.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from tiltframe.aggregates.layout import AggregationLayout
from tiltframe.engine.inputs.hadoop_paths import HadoopPath, Location, as_location, move_tree, remove_tree
from tiltframe.engine.rollup.markers import write_marker
from tiltframe.engine.rollup.pipeline import PIPELINE_FILE, pipeline_id_for
from tiltframe.errors import StoreError
from tiltframe.store.base import BatchWrite, Store

logger = logging.getLogger(__name__)

STORE_FILE = "tiltframe-store.json"
#: Where the runner keeps Spark's checkpoint inside the aggregation's checkpoint directory.
SPARK_DIR = "spark"


class StoreNote:
    """The checkpoint's note of the last batch its pipeline committed to the store."""

    def __init__(self, checkpoint: Location, pipeline_id: str, store_url: str, last_batch: int | None) -> None:
        self.path = checkpoint / STORE_FILE
        self.pipeline_id = pipeline_id
        self.store_url = store_url
        self.last_batch = last_batch

    @classmethod
    def read(cls, checkpoint: Location, pipeline_id: str, store_url: str) -> StoreNote | None:
        """The note of ``pipeline_id``; None when there is none (a new pipeline, or a checkpoint made before
        these notes), or it belongs to another pipeline id."""
        path = checkpoint / STORE_FILE
        if not path.exists():
            return None
        try:
            content = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            msg = f"cannot read {path} ({e}); it notes what the checkpoint {checkpoint} wrote to the store"
            raise StoreError(msg) from e
        if content.get("pipeline_id") != pipeline_id:
            return None
        last = content.get("last_batch")
        return cls(checkpoint, pipeline_id, str(content.get("store") or store_url), None if last is None else int(last))

    def note(self, batch_id: int | None) -> None:
        """Record that the store holds ``batch_id`` (never moving back; None: nothing new)."""
        known = [b for b in (self.last_batch, batch_id) if b is not None]
        latest = max(known) if known else None
        if latest == self.last_batch and self.path.exists():
            return
        self.last_batch = latest
        write_marker(self.path, {"pipeline_id": self.pipeline_id, "store": self.store_url, "last_batch": latest})


class NotingStore:
    """The pipeline's store, which notes in the checkpoint each batch it commits; everything else passes
    through to the store itself."""

    def __init__(self, store: Store, note: StoreNote) -> None:
        self._store = store
        self._note = note

    def write_batch(self, layout: AggregationLayout, batch: BatchWrite) -> bool:
        written = self._store.write_batch(layout, batch)
        if written:
            self._note.note(batch.batch_id)
        return written

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def __repr__(self) -> str:
        return f"NotingStore({self._store!r})"


def open_pipeline(
    store: Store, layout: AggregationLayout, checkpoint_dir: str | Path | HadoopPath, *, rebuild: bool = False,
    shard_id: str | None = None,
) -> tuple[Store, str]:
    """Prepare the store and the checkpoint of one aggregation's pipeline before Spark starts its query;
    returns the store to write through (it notes each commit in the checkpoint) and the pipeline id.

    ``rebuild`` first drops what the store holds of the aggregation and the checkpoint, so that every
    input is read again.

    Raises:
        StoreError: the store holds fewer batches of this pipeline than the checkpoint committed to it, or
            the checkpoint lost Spark's part of it.
    """
    checkpoint = as_location(checkpoint_dir)
    if rebuild:
        _rebuild(store, layout, checkpoint, shard_id)
    store.ensure_schema(layout)
    carry_checkpoint(store, layout, checkpoint)
    pipeline_id = pipeline_id_for(checkpoint, layout)
    held = store.last_committed_batch(layout, pipeline_id)
    note = StoreNote.read(checkpoint, pipeline_id, store.url)
    if note is None:  # a new pipeline, or a checkpoint from before these notes: the store says what it holds
        note = StoreNote(checkpoint, pipeline_id, store.url, None)
    elif note.last_batch is not None and (held is None or held < note.last_batch):
        raise StoreError(_behind(store.url, layout, checkpoint, pipeline_id, held, note.last_batch))
    note.note(held)
    _check_spark_part(checkpoint, layout, note.last_batch)
    return NotingStore(store, note), pipeline_id  # type: ignore[return-value]


def carry_checkpoint(store: Store, layout: AggregationLayout, checkpoint: Location) -> None:
    """Make the checkpoint of the definition ``tiltframe migrate`` changed from this definition's.

    Checkpoints are named by definition (``markers.checkpoint_dir``), and the stored rows of a migrated
    aggregation hold what the earlier definition's pipeline read: its checkpoint (the files read, the
    pipeline id its commit records name) must go on, or every input would be read again and counted twice.
    The latest earlier definition whose checkpoint is still there is the one; a checkpoint under this
    definition's own name that is older than it (left when the definition changed away from it, then back)
    is replaced.  A move is one rename, and a crash before it leaves the earlier one in place for the
    next start.
    """
    source = going_on_from(store, layout, checkpoint)
    if source == checkpoint:
        return
    marker = source / PIPELINE_FILE
    meta = json.loads(marker.read_text(encoding="utf-8"))
    write_marker(marker, {**meta, "spec_hash": layout.spec_hash, "migrated_from": source.name})
    remove_tree(checkpoint)
    move_tree(source, checkpoint)
    logger.info("aggregation %s: the checkpoint of its earlier definition %s goes on as %s", layout.name, source,
                checkpoint)


def going_on_from(store: Store, layout: AggregationLayout, checkpoint: Location) -> Location:
    """The checkpoint the pipeline of ``layout`` goes on from at its next start: ``checkpoint`` (its own), or
    the latest earlier definition's, which :func:`carry_checkpoint` then makes its own.  Before a migration,
    the stored definition counts as an earlier one."""
    definition = store.recorded_definition(layout)
    if definition is None:
        return checkpoint
    hashes = definition.earlier
    if definition.spec_hash != layout.spec_hash:
        hashes = (*hashes, definition.spec_hash)
    return _latest_checkpoint(checkpoint, layout.name, hashes, until=layout.spec_hash) or checkpoint


def _latest_checkpoint(checkpoint: Location, name: str, hashes: tuple[str, ...], *,
                       until: str) -> Location | None:
    """The checkpoint beside ``checkpoint`` of the latest of the definitions ``hashes`` (oldest first) that
    has one, looking back no further than ``until``.  Only a folder with a pipeline marker counts: Spark
    remakes a moved checkpoint's folder when a pipeline that still runs writes to it, and such a remnant
    must not be taken for the pipeline's progress."""
    for earlier in reversed(hashes):
        if earlier == until:
            return None  # this definition's own checkpoint is the latest one
        source = checkpoint.parent / f"{name}-{earlier}"
        if (source / PIPELINE_FILE).exists():
            return source
        if source.exists():
            logger.warning("%s holds no pipeline marker (%s): not a checkpoint, left as it is", source, PIPELINE_FILE)
    return None


def _rebuild(store: Store, layout: AggregationLayout, checkpoint: Location, shard_id: str | None) -> None:
    """The store first: a crash before the checkpoint is gone leaves a store without the checkpoint's
    batches, which the next start names (the other order would leave a checkpoint-less pipeline over a
    full store, whose replays would be taken for recovery)."""
    store.reset(layout, shard_id)
    remove_tree(checkpoint)
    # The checkpoints of earlier definitions too: one left behind would be carried in at the next start
    # (``carry_checkpoint``) and skip every file it had read.
    definition = store.recorded_definition(layout)
    for earlier in definition.earlier if definition is not None else ():
        if earlier != layout.spec_hash:
            remove_tree(checkpoint.parent / f"{layout.name}-{earlier}")
    logger.info("rebuilding aggregation %s: its stored rows and its checkpoint %s are dropped; every input is "
                "read again", layout.name, checkpoint)


def _behind(url: str, layout: AggregationLayout, checkpoint: Location, pipeline_id: str, held: int | None,
            noted: int) -> str:
    if held is None:
        found = f"holds no batch of pipeline {pipeline_id}"
        cause = "the store was replaced or emptied"
    else:
        found = f"holds the batches of pipeline {pipeline_id} up to {held} only"
        cause = "the store was restored from an older backup or lost its latest batches"
    return (f"the store at {url} {found}, whose checkpoint {checkpoint} has committed batches up to {noted} to "
            f"it: {cause}. Spark would resume after batches that the store lacks, and their events would be "
            f"missing from every total of aggregation {layout.name}. Run again with --rebuild (Python: "
            f"rebuild=True) to drop what the store holds of {layout.name} and its checkpoint and read every "
            f"input again; or move the checkpoint directory away to start a new pipeline over the store as it "
            f"is (docs/deployment.md, 'A replaced or emptied store')")


def _check_spark_part(checkpoint: Location, layout: AggregationLayout, noted: int | None) -> None:
    """The pipeline wrote batch ``noted`` to the store, so Spark's commit log must reach at least the batch
    before it (Spark commits a batch after the store does); without it Spark would number batches from 0
    again, and the store would skip them as replays."""
    if noted is None or noted < 1:
        return
    commits = checkpoint / SPARK_DIR / "commits"
    done = [int(p.name) for p in commits.iterdir() if p.name.isdigit()] if commits.is_dir() else []
    if done and max(done) >= noted - 1:
        return
    msg = (f"the checkpoint {checkpoint} of aggregation {layout.name} lost Spark's progress ({commits} "
           f"{'ends at batch ' + str(max(done)) if done else 'is missing'}), while the store holds its batches "
           f"up to {noted}: Spark would read the inputs again under batch ids the store takes for replays. Run "
           f"again with --rebuild (Python: rebuild=True) to drop what the store holds of {layout.name} and the "
           f"checkpoint and read every input again; or move the checkpoint directory away to start a new "
           f"pipeline over the store as it is")
    raise StoreError(msg)
