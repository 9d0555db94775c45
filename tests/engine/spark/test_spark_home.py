"""The Spark home of links: a local session's Python processes import the installed, compiled PySpark instead
of Spark's zip of sources; the home is made once, mended when stale, and used only where it may be."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pyspark
import pytest

from tiltframe.engine.spark import jvm_launch, spark_home

INSTALLED = Path(pyspark.__file__).resolve().parent


@pytest.fixture
def cache(monkeypatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("TILTFRAME_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("SPARK_HOME", raising=False)
    return tmp_path


def _where_workers_import_pyspark(_: object) -> object:
    import pyspark as worker_pyspark

    yield worker_pyspark.__file__


def test_the_sessions_python_workers_import_the_installed_pyspark(spark) -> None:
    """The test session was started by ``get_session`` on a local master: its Python workers find PySpark in
    site-packages, not in Spark's zip."""
    if not spark_home.usable("local[2]"):
        pytest.skip("SPARK_HOME is set, or PySpark is not pip-installed here: Spark's own arrangement")
    [where] = spark.sparkContext.parallelize([0], 1).mapPartitions(_where_workers_import_pyspark).collect()
    assert Path(where).resolve() == INSTALLED / "__init__.py"


def test_the_home_links_everything_but_the_zips_and_is_mended_when_stale(cache: Path) -> None:
    home = spark_home.linked_home()
    assert home is not None and home.parent == cache
    names = sorted(os.listdir(home))
    assert "python" not in names and {"bin", "jars"} <= set(names)
    assert all((home / n).is_symlink() and (home / n).resolve() == (INSTALLED / n).resolve() for n in names)
    assert not (home / "python" / "lib" / "pyspark.zip").exists()
    assert spark_home.linked_home() == home  # made once
    (home / "bin").unlink()
    (home / "bin").symlink_to(cache)  # pointing elsewhere
    (home / "stray").mkdir()
    assert spark_home.linked_home() == home
    assert sorted(os.listdir(home)) == names and (home / "bin").resolve() == (INSTALLED / "bin").resolve()
    assert (INSTALLED / "bin").is_dir()  # mending removed the links, never what they point to
    assert [p.name for p in cache.iterdir()] == [home.name]  # no partial folder left


def test_used_only_for_a_local_master_without_spark_home_and_with_this_interpreter(cache: Path, monkeypatch) -> None:
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    assert spark_home.usable("local[2]") and spark_home.usable("local")
    assert not spark_home.usable("spark://host:7077") and not spark_home.usable("")
    monkeypatch.setenv("PYSPARK_PYTHON", "/usr/bin/python3-elsewhere")  # may not have PySpark installed
    assert not spark_home.usable("local[2]")
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    monkeypatch.setenv("SPARK_HOME", str(INSTALLED))  # the user's choice stands
    assert not spark_home.usable("local[2]")


def test_launching_gives_the_home_to_a_local_jvm_for_the_launch_only(cache: Path, monkeypatch) -> None:
    monkeypatch.setenv("TILTFRAME_CLASS_ARCHIVE", "off")
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    with jvm_launch.launching(master="local[2]"):
        assert os.environ["SPARK_HOME"] == str(spark_home.linked_home())
    assert "SPARK_HOME" not in os.environ
    with jvm_launch.launching(master="spark://host:7077"):
        assert "SPARK_HOME" not in os.environ
    with jvm_launch.launching():  # a JVM that already runs: nothing to launch
        assert "SPARK_HOME" not in os.environ
    monkeypatch.setenv("TILTFRAME_CACHE_DIR", "")  # no cache folder: Spark's own home
    with jvm_launch.launching(master="local[2]"):
        assert "SPARK_HOME" not in os.environ
