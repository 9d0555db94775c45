"""Store identity: the checkpoint's note of what its pipeline committed, checked against the store at start,
with the checkpoint on the local disk and on a Hadoop file system (the runs over real files are in
tests/bad_input/test_stores.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.engine.conftest import MountedDir
from tests.store.conftest import SEC, T0, batch, make_layout, row
from tiltframe.aggregates.layout import AggregationLayout
from tiltframe.engine.inputs.hadoop_paths import HadoopPath, Location
from tiltframe.engine.rollup.identity import SPARK_DIR, STORE_FILE, open_pipeline
from tiltframe.engine.rollup.pipeline import PIPELINE_FILE
from tiltframe.errors import StoreError
from tiltframe.store.sql import SqlStore


def _commit(store: object, layout: object, pipeline_id: str, batch_id: int) -> bool:
    return store.write_batch(layout, batch(layout, batch_id, [row(T0, "A", T0, batch_id, 0, 1.0, 1)],  # type: ignore[attr-defined]
                                           pipeline=pipeline_id))


def _spark_commits(checkpoint: Path, upto: int) -> None:
    commits = checkpoint / SPARK_DIR / "commits"
    commits.mkdir(parents=True, exist_ok=True)
    for b in range(upto + 1):
        (commits / str(b)).write_text("v1\n")


def _note(checkpoint: Path) -> dict:
    return json.loads((checkpoint / STORE_FILE).read_text())


@pytest.fixture(params=["local", "hadoop"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Location, Path]:
    """The checkpoint as the pipeline is given it, and the local directory that holds its files."""
    if request.param == "local":
        return tmp_path / "cp", tmp_path / "cp"
    mounted: MountedDir = request.getfixturevalue("mounted")
    return HadoopPath(mounted.uri) / "cp", mounted.local / "cp"


def test_each_commit_is_noted_and_a_store_that_lost_them_is_named(tmp_path: Path, where: tuple[Location, Path]) -> None:
    layout, db, (location, checkpoint) = make_layout(), tmp_path / "tiltframe.db", where
    with SqlStore.sqlite(db) as plain:
        store, pid = open_pipeline(plain, layout, location)
        assert _note(checkpoint) == {"pipeline_id": pid, "store": plain.url, "last_batch": None}
        assert _commit(store, layout, pid, 0) and _commit(store, layout, pid, 1)
        assert not _commit(store, layout, pid, 1)  # a replay notes nothing new
        assert _note(checkpoint)["last_batch"] == 1
    _spark_commits(checkpoint, 1)
    with SqlStore.sqlite(db) as plain:  # the same store: fine, same pipeline
        assert open_pipeline(plain, layout, location)[1] == pid
    db.unlink()
    with SqlStore.sqlite(db) as plain, pytest.raises(StoreError) as err:
        open_pipeline(plain, layout, location)
    text = str(err.value)
    assert f"holds no batch of pipeline {pid}" in text and "committed batches up to 1" in text, text
    assert "replaced or emptied" in text and "--rebuild" in text and str(location) in text


def test_a_store_behind_the_note_is_named_and_one_ahead_is_fine(tmp_path: Path, where: tuple[Location, Path]) -> None:
    layout, (location, checkpoint) = make_layout(), where
    with SqlStore.sqlite(tmp_path / "db") as plain:
        store, pid = open_pipeline(plain, layout, location)
        for b in range(3):
            _commit(store, layout, pid, b)
        _commit(plain, layout, pid, 3)  # committed, then a crash before the note: the store is ahead
        _spark_commits(checkpoint, 2)
        assert open_pipeline(plain, layout, location)[1] == pid
        assert _note(checkpoint)["last_batch"] == 3  # caught up at start
        with plain._engine.begin() as conn:  # an older backup: batches 2 and 3 gone
            conn.exec_driver_sql("DELETE FROM TILTFRAME_BATCHES WHERE batch_id >= 2")
        with pytest.raises(StoreError, match=r"holds the batches of pipeline \w+ up to 1 only.*up to 3.*older backup"):
            open_pipeline(plain, layout, location)


def test_a_checkpoint_from_before_the_notes_trusts_the_store_once(tmp_path: Path, where: tuple[Location, Path]) -> None:
    layout, (location, checkpoint) = make_layout(), where
    with SqlStore.sqlite(tmp_path / "db") as plain:
        store, pid = open_pipeline(plain, layout, location)
        _commit(store, layout, pid, 0)
        (checkpoint / STORE_FILE).unlink()
        assert open_pipeline(plain, layout, location)[1] == pid
        assert _note(checkpoint)["last_batch"] == 0


def test_a_checkpoint_that_lost_sparks_progress_is_named(tmp_path: Path, where: tuple[Location, Path]) -> None:
    layout, (location, checkpoint) = make_layout(), where
    with SqlStore.sqlite(tmp_path / "db") as plain:
        store, pid = open_pipeline(plain, layout, location)
        for b in range(4):
            _commit(store, layout, pid, b)
        _spark_commits(checkpoint, 2)  # Spark commits batch 3 after the store: one behind is fine
        open_pipeline(plain, layout, location)
        (checkpoint / SPARK_DIR / "commits" / "2").unlink()
        with pytest.raises(StoreError, match=r"lost Spark's progress .*ends at batch 1.*up to 3"):
            open_pipeline(plain, layout, location)


def test_rebuild_drops_the_store_and_the_checkpoint(tmp_path: Path, where: tuple[Location, Path]) -> None:
    layout, (location, checkpoint) = make_layout(), where
    with SqlStore.sqlite(tmp_path / "db") as plain:
        store, pid = open_pipeline(plain, layout, location)
        _commit(store, layout, pid, 0)
        _spark_commits(checkpoint, 0)
        store, new = open_pipeline(plain, layout, location, rebuild=True)
        assert new != pid and not (checkpoint / SPARK_DIR).exists()
        assert json.loads((checkpoint / PIPELINE_FILE).read_text())["pipeline_id"] == new
        assert plain.read(layout, SEC).empty and plain.info(layout).batches == 0
        assert _commit(store, layout, new, 0)
        assert plain.read(layout, SEC)["total_SUM"].tolist() == [1]


#: The digest of a definition recorded as the one before the current (``_record_earlier``).
EARLIER = "0123456789abcdef"


def _record_earlier(plain: SqlStore, layout: AggregationLayout) -> None:
    """Record ``layout``'s definition as migrated from the definition ``EARLIER``."""
    import dataclasses

    from tiltframe.store.lifecycle.definitions import Definition

    with plain.write_transaction("record an earlier definition") as conn:
        plain._write_definition(conn, dataclasses.replace(Definition.of(layout), earlier=(EARLIER,)))


def test_rebuild_drops_the_checkpoints_of_earlier_definitions_too(tmp_path: Path) -> None:
    """A checkpoint an earlier definition left behind is never carried in after a rebuild."""
    layout = make_layout()
    root = tmp_path / "checkpoints"
    current, earlier = root / f"{layout.name}-{layout.spec_hash}", root / f"{layout.name}-{EARLIER}"
    with SqlStore.sqlite(tmp_path / "db") as plain:
        store, pid = open_pipeline(plain, layout, current)
        _commit(store, layout, pid, 0)
        _record_earlier(plain, layout)
        earlier.mkdir(parents=True)
        (earlier / PIPELINE_FILE).write_text(json.dumps({"pipeline_id": "old", "spec_hash": EARLIER}))
        store, new = open_pipeline(plain, layout, current, rebuild=True)
        assert not earlier.exists() and new not in (pid, "old")
        assert json.loads((current / PIPELINE_FILE).read_text())["pipeline_id"] == new


def test_a_folder_without_a_pipeline_marker_is_not_carried_in(tmp_path: Path) -> None:
    """Spark remakes a moved checkpoint's folder when a pipeline still running writes to it; such a remnant
    is no checkpoint, and the pipeline goes on from its own."""
    layout = make_layout()
    root = tmp_path / "checkpoints"
    current, earlier = root / f"{layout.name}-{layout.spec_hash}", root / f"{layout.name}-{EARLIER}"
    with SqlStore.sqlite(tmp_path / "db") as plain:
        store, pid = open_pipeline(plain, layout, current)
        _commit(store, layout, pid, 0)
        _spark_commits(current, 0)
        _record_earlier(plain, layout)
        (earlier / SPARK_DIR / "offsets").mkdir(parents=True)
        (earlier / SPARK_DIR / "offsets" / "1").write_text("v1\n")
        store, again = open_pipeline(plain, layout, current)
        assert again == pid and earlier.exists()
