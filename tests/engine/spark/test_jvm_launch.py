"""The Java options of a JVM tiltframe starts: the proven class archive, C1 alone for a short run, the caller's
own options kept and winning, the environment as it was after the launch."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.engine.spark.test_class_archive import stamp
from tiltframe.engine.spark import class_archive, jvm_launch
from tiltframe.errors import UsageError

#: The caller's own options; they say how to treat huge methods, so only the archive is added to them.
MINE = f"-Dmine=1 {jvm_launch.HUGE_METHODS}"


def test_launching_names_a_proven_archive_for_the_launch_only(monkeypatch, tmp_path: Path) -> None:
    archive = tmp_path / "a.jsa"
    monkeypatch.setenv(class_archive.ENV, str(archive))
    monkeypatch.setenv(jvm_launch.SUBMIT_OPTS, MINE)
    with jvm_launch.launching():  # no file yet: nothing added
        assert os.environ[jvm_launch.SUBMIT_OPTS] == MINE
    archive.write_bytes(b"x" * 10)
    with jvm_launch.launching():  # no JVM ran with it (no stamp): nothing added
        assert os.environ[jvm_launch.SUBMIT_OPTS] == MINE
    stamp(archive)
    with open(archive, "r+b") as f:  # cut short after it was proven (what would kill a JVM): not used
        f.truncate(5)
    assert not class_archive.proven(archive)
    archive.write_bytes(b"x" * 10)
    stamp(archive)
    assert class_archive.proven(archive)
    added = f"-XX:SharedArchiveFile={archive} {class_archive.QUIET}"
    with jvm_launch.launching() as options:
        assert options == added
        assert os.environ[jvm_launch.SUBMIT_OPTS] == f"{MINE} {added}"
    assert os.environ[jvm_launch.SUBMIT_OPTS] == MINE
    with jvm_launch.launching(short_lived=True):
        assert os.environ[jvm_launch.SUBMIT_OPTS] == f"{MINE} {added} {jvm_launch.C1_ONLY}"
    monkeypatch.setenv(jvm_launch.SUBMIT_OPTS, "-XX:SharedArchiveFile=/elsewhere.jsa")  # the caller's own
    with jvm_launch.launching():
        assert os.environ[jvm_launch.SUBMIT_OPTS] == f"-XX:SharedArchiveFile=/elsewhere.jsa {jvm_launch.HUGE_METHODS}"
    monkeypatch.delenv(jvm_launch.SUBMIT_OPTS)
    with jvm_launch.launching():
        assert jvm_launch.SUBMIT_OPTS in os.environ
    assert jvm_launch.SUBMIT_OPTS not in os.environ


def test_a_short_run_compiles_with_c1_alone_unless_the_caller_chose_a_compiler(monkeypatch) -> None:
    monkeypatch.setenv(class_archive.ENV, "off")
    monkeypatch.delenv(jvm_launch.SUBMIT_OPTS, raising=False)
    huge, c1 = jvm_launch.HUGE_METHODS, jvm_launch.C1_ONLY
    assert jvm_launch.java_options(short_lived=False) == huge
    assert jvm_launch.java_options(short_lived=True) == f"{huge} {c1}"
    with jvm_launch.launching(short_lived=True) as options:
        assert os.environ[jvm_launch.SUBMIT_OPTS] == options == f"{huge} {c1}"
    assert jvm_launch.SUBMIT_OPTS not in os.environ
    for theirs in ("-XX:TieredStopAtLevel=4", "-XX:-TieredCompilation"):
        monkeypatch.setenv(jvm_launch.SUBMIT_OPTS, theirs)
        assert jvm_launch.java_options(short_lived=True) == huge
        with jvm_launch.launching(short_lived=True):
            assert os.environ[jvm_launch.SUBMIT_OPTS] == f"{theirs} {huge}"


def test_huge_methods_are_compiled_unless_the_caller_said_otherwise(monkeypatch) -> None:
    monkeypatch.setenv(class_archive.ENV, "off")
    monkeypatch.setenv(jvm_launch.SUBMIT_OPTS, "-XX:+DontCompileHugeMethods")
    assert jvm_launch.java_options(short_lived=False) == ""


def _files(folder: Path, sizes: dict[str, int]) -> Path:
    for name, size in sizes.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(b"x" * size)
    return folder


def test_a_short_run_reads_local_files_up_to_the_bound_in_all(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv(jvm_launch.SHORT_RUN_ENV, "1000")
    a = _files(tmp_path / "a", {"e1.csv": 300, "sub/e2.csv": 300, ".hidden": 100})
    b = _files(tmp_path / "b", {"e.parquet": 300})
    assert jvm_launch.is_short_run([str(a), str(b)])  # 1,000 bytes in all, hidden ones too: at the bound
    assert jvm_launch.is_short_run([f"file://{a}", f"file:{b}"])
    assert jvm_launch.is_short_run([str(a / "e1.csv")])  # a file
    assert jvm_launch.is_short_run([str(tmp_path / "missing")])  # nothing there yet: nothing to read
    assert jvm_launch.is_short_run([])
    _files(b, {"more.parquet": 1})
    assert not jvm_launch.is_short_run([str(a), str(b)])  # one byte past it
    assert not jvm_launch.is_short_run([str(a), "s3a://bucket/events"])  # a remote input: its size unknown
    assert not jvm_launch.is_short_run(["hdfs://namenode/events"])
    monkeypatch.setenv(jvm_launch.SHORT_RUN_ENV, "0")
    assert not jvm_launch.is_short_run([str(a / "e1.csv")])
    monkeypatch.delenv(jvm_launch.SHORT_RUN_ENV)
    assert jvm_launch.short_run_bytes() == 32 * 1024 * 1024
    monkeypatch.setenv(jvm_launch.SHORT_RUN_ENV, "32MB")
    with pytest.raises(UsageError, match=r"TILTFRAME_SHORT_RUN_BYTES='32MB': expected a number of bytes"):
        jvm_launch.is_short_run([str(a)])
