"""A Spark home of links for local sessions: their Python processes import PySpark compiled, not from a zip.

Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` (and Py4J's zip) first on the path of every Python
process it starts: the daemon and workers of ``mapInArrow`` / ``mapInPandas`` / ``transformWithStateInPandas``,
a Python data source's runners, a stateful processor's planning worker.  A pip-installed PySpark ships that
zip beside the same package compiled in site-packages, and Python compiles a zip's modules from source at
every import: 0.5 s more for each such process to load what a worker needs (measured: 1.0 s against 0.5 s).
Continuous queries start several of them per query, staged writes two per run.

So a session tiltframe starts on a local master, when nobody set ``SPARK_HOME``, runs its JVM with a home of
links in tiltframe's cache folder (``spark-home-<version>-<digest>``): every entry of PySpark's own home
(``bin``, ``jars``, ...) linked, but no ``python`` folder, so the zips Spark names do not exist and its
Python processes import the installed, compiled package.  The JVM reads the same jars through the links
(the class archive still maps: the JVM compares files, not path names).  Only where those processes find
PySpark and Py4J without the zips: installed where this interpreter's site looks, or on ``$PYTHONPATH``, and
``$PYSPARK_PYTHON`` this interpreter.  A cluster's executors use their own Spark home; setting
``SPARK_HOME`` (to PySpark's folder, say) keeps Spark's own arrangement.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import site
import sys
from pathlib import Path

from tiltframe.cache import cache_dir

logger = logging.getLogger(__name__)

#: What a pip-installed PySpark's home holds that the home of links leaves out: Spark's zips of sources.
LEFT_OUT = ("python", "__pycache__")


def _installed_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def _on_default_path(module_file: str) -> bool:
    """Whether a new interpreter (this one's executable, this environment) finds the package of
    ``module_file`` without Spark's zips."""
    parent = Path(module_file).resolve().parent.parent
    places = [*site.getsitepackages(), site.getusersitepackages(), *os.environ.get("PYTHONPATH", "").split(os.pathsep)]
    return any(p and Path(p).resolve() == parent for p in places)


def usable(master: str) -> bool:
    """Whether a JVM started now for ``master`` may run with the home of links (see the module's doc)."""
    if os.name != "posix" or os.environ.get("SPARK_HOME") or not master.startswith("local"):
        return False
    if os.environ.get("PYSPARK_PYTHON", sys.executable) != sys.executable:
        return False
    import py4j
    import pyspark

    home = _installed_home()
    return ((home / "python" / "lib" / "pyspark.zip").is_file() and _on_default_path(pyspark.__file__)
            and _on_default_path(py4j.__file__))


def linked_home() -> Path | None:
    """The home of links for the installed PySpark, made if missing or stale; None without a cache folder
    or where links cannot be made."""
    where = cache_dir()
    if where is None:
        return None
    import pyspark

    home = _installed_home()
    entries = sorted(n for n in os.listdir(home) if n not in LEFT_OUT)
    key = hashlib.sha256("\n".join([str(home), *entries]).encode()).hexdigest()[:12]
    target = Path(where) / f"spark-home-{pyspark.__version__}-{key}"
    if _complete(target, home, entries):
        return target
    partial = target.with_name(f"{target.name}.{os.getpid()}.part")
    try:
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir()
        for name in entries:
            (partial / name).symlink_to(home / name)
        if not _complete(target, home, entries):
            shutil.rmtree(target, ignore_errors=True)  # stale: PySpark reinstalled in place
            partial.rename(target)
    except OSError as exc:
        if _complete(target, home, entries):  # another process made it meanwhile
            return target
        logger.debug("no Spark home of links at %s: %s", target, exc)
        return None
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return target


def _complete(target: Path, home: Path, entries: list[str]) -> bool:
    try:
        return sorted(os.listdir(target)) == entries and all(
            (target / n).resolve() == (home / n).resolve() for n in entries)
    except OSError:
        return False
