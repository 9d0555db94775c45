"""The record of the files each batch read: a recomputation takes only those of the batches the store holds
(a batch still running adds its own files when it commits)."""

from __future__ import annotations

from pathlib import Path

from tiltframe.engine.inputs.file_manifest import FileManifest


def test_the_files_of_the_batches_up_to_one(tmp_path: Path) -> None:
    files = []
    for name in ("a.csv", "b.csv", "c.csv"):
        (tmp_path / name).write_text("x\n")
        files.append(str(tmp_path / name))
    manifest = FileManifest(tmp_path / "checkpoint")
    manifest.record(0, files[:2])
    manifest.record(1, files[2:])
    again = FileManifest(tmp_path / "checkpoint")  # as read back from the checkpoint
    assert again.paths() == files
    assert again.paths(0) == files[:2]
    assert again.paths(1) == files
    assert again.paths(-1) == []
