"""The class archive of Spark's JVM: where it is, that a JVM tiltframe starts maps it, and that nothing
else changes (the environment after the launch, a caller's own archive, a run's results)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.jvm_options import SHORT_LIVED_SUBMIT_ARGS
from tiltframe.engine.spark import class_archive


def test_the_archive_is_in_the_cache_folder_unless_turned_off_or_named(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.delenv(class_archive.ENV, raising=False)
    monkeypatch.setenv("TILTFRAME_CACHE_DIR", str(tmp_path))
    path = class_archive.archive_path()
    assert path is not None and path.parent == tmp_path and path.name.startswith("spark-classes-")
    monkeypatch.setenv(class_archive.ENV, "off")
    assert class_archive.archive_path() is None
    monkeypatch.setenv(class_archive.ENV, str(tmp_path / "mine.jsa"))
    assert class_archive.archive_path() == tmp_path / "mine.jsa"


def test_each_install_of_spark_has_its_own_archive(tmp_path: Path) -> None:
    """A JVM maps an archive only with the classpath it was written with, checking each jar's size and time:
    another folder of the same jars (another virtualenv or clone) or a jar rewritten (a reinstall) is
    another archive, not one that looks proven and is silently never mapped."""
    jars = tmp_path / "jars"
    jars.mkdir()
    for name in ("spark-core.jar", "scala-library.jar"):
        (jars / name).write_bytes(b"PK" + name.encode())
    java = "/usr/lib/jvm/java/bin/java"
    first = class_archive._digest(java, str(jars))
    assert class_archive._digest(java, str(jars)) == first
    other = tmp_path / "clone" / "jars"
    other.parent.mkdir()
    jars.rename(other)
    assert class_archive._digest(java, str(other)) != first
    os.utime(other / "spark-core.jar", ns=(1, 1))
    assert len({first, class_archive._digest(java, str(other)), class_archive._digest("/opt/jdk/bin/java",
                                                                                       str(other))}) == 3


def test_a_new_archive_removes_the_ones_no_install_can_map(tmp_path: Path) -> None:
    """Archives of Spark installs that were removed or rewritten go when a new one is made; another live
    install's archive and files not named as the cache's archives stay."""
    jars = tmp_path / "jars"
    jars.mkdir()
    (jars / "spark-core.jar").write_bytes(b"PK")
    java = "/usr/lib/jvm/java/bin/java"
    sources = f"7 1\n{java}\n{jars}\n"

    def archive(name: str, stamp_text: str) -> Path:
        path = tmp_path / name
        path.write_bytes(b"classes")
        path.with_name(name + ".ok").write_text(stamp_text, encoding="utf-8")
        return path

    kept = archive("spark-classes-4.3.0-aaaaaaaaaaaa.jsa", sources)
    alive = archive(f"spark-classes-4.2.0-{class_archive._digest(java, str(jars))}.jsa", sources)
    mine = archive("mine.jsa", "7 1\n")
    rewritten = archive("spark-classes-4.2.0-dddddddddddd.jsa", sources)  # its jars changed since
    gone = archive("spark-classes-4.1.0-bbbbbbbbbbbb.jsa", f"7 1\n{java}\n{tmp_path / 'removed'}\n")
    older = archive("spark-classes-4.0.0-cccccccccccc.jsa", "7 1\n")  # a stamp that records no sources
    class_archive._prune(kept)
    left = sorted(p.name for p in tmp_path.iterdir() if p.is_file())
    assert left == sorted(n for p in (kept, alive, mine) for n in (p.name, p.name + ".ok"))
    assert not any(p.exists() for p in (rewritten, gone, older))


def stamp(archive: Path) -> None:
    """The stamp ``build`` writes once a JVM ran with the archive: its size and modification time."""
    st = archive.stat()
    archive.with_name(archive.name + ".ok").write_text(f"{st.st_size} {st.st_mtime_ns}\n", encoding="utf-8")


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="finds the writer in /proc")
def test_the_build_waits_for_the_jvm_that_writes_the_archive_to_exit(tmp_path: Path) -> None:
    """The JVM dumps the archive as it exits, possibly after its Python process: the build waits for every
    process whose command line names the file (a stand-in process here) before it proves and moves it."""
    partial = tmp_path / "c.jsa.1.part"
    stand_in = [sys.executable, "-c", "import time; time.sleep(1.5)", f"-XX:ArchiveClassesAtExit={partial}"]
    writer = subprocess.Popen(stand_in)
    cmdline = Path(f"/proc/{writer.pid}/cmdline")
    while str(partial).encode() not in cmdline.read_bytes():  # until it has exec'd its command
        time.sleep(0.01)
    try:
        with pytest.raises(RuntimeError, match="did not exit within 0 s"):
            class_archive._wait_for_writer(partial, timeout=0.2)
        class_archive._wait_for_writer(partial, timeout=30)
        assert writer.poll() is not None
    finally:
        writer.kill()


MAPS = """
import os, sys
from tiltframe.engine.spark.session import get_session
spark = get_session("local[1]", short_lived=sys.argv[1] == "short")
jvm = spark.sparkContext._jvm
with open(f"/proc/{jvm.java.lang.ProcessHandle.current().pid()}/maps") as maps:
    print("mapped" if os.environ["TILTFRAME_CLASS_ARCHIVE"] in maps.read() else "unmapped")
print(list(jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments()).count("-XX:TieredStopAtLevel=1"))
print(spark.range(5).selectExpr("sum(id)").first()[0])
"""


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads the JVM's memory map in /proc")
def test_a_jvm_tiltframe_starts_maps_the_archive_and_answers_the_same(tmp_path: Path) -> None:
    """The archive ``scripts/setup.sh`` made (or one made here, proven by a JVM that ran with it) is mapped by
    the JVM of a new session, and a short run's JVM compiles with C1 alone (tiltframe.engine.spark.jvm_launch); a
    JVM whose archive does not fit (here not a class archive at all, elsewhere another JDK or classpath)
    starts as without one, saying nothing."""
    made = class_archive.archive_path()
    archive = made if made is not None and class_archive.proven(made) else class_archive.build(tmp_path / "c.jsa")
    assert class_archive.proven(archive)
    # Without the compiler option the suite gives the JVMs it starts (conftest.py), to see tiltframe's own.
    submit_args = os.environ.get("PYSPARK_SUBMIT_ARGS", "").replace(SHORT_LIVED_SUBMIT_ARGS, "")
    env = {**os.environ, class_archive.ENV: str(archive), "PYSPARK_SUBMIT_ARGS": submit_args}
    done = subprocess.run([sys.executable, "-c", MAPS, "short"], env=env, capture_output=True, text=True,
                          timeout=300, check=True)
    assert done.stdout.split() == ["mapped", "1", "10"], done.stderr
    junk = tmp_path / "junk.jsa"
    junk.write_bytes(b"not a class archive" * 100)
    stamp(junk)
    done = subprocess.run([sys.executable, "-c", MAPS, "long"], env={**env, class_archive.ENV: str(junk)},
                          capture_output=True, text=True, timeout=300, check=True)
    assert done.stdout.split() == ["unmapped", "0", "10"]
    assert "cds" not in done.stdout + done.stderr and "archive" not in done.stderr.lower()
