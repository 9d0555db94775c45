"""A class-data archive of Spark's driver JVM: the classes a run loads, parsed and verified once and mapped
from a file by every later JVM, instead of read from Spark's jars and verified at every start.

A `tiltframe run` of one small file spends most of its time starting Spark: loading and verifying the
tens of thousands of classes a streaming run touches, in a cold JVM.  The JDK's class-data sharing (a
dynamic archive, ``-XX:ArchiveClassesAtExit`` / ``-XX:SharedArchiveFile``, JDK 13 and later) keeps them
ready: measured on two cores, one small run went from 31 s to 24 s (docs/performance.md).

:func:`build` makes the archive by running a small aggregation in a child process whose JVM writes it at
exit (``scripts/setup.sh`` does it; ``python -m tiltframe.engine.spark.class_archive`` again at any time), about
170 MB in tiltframe's cache folder.  ``tiltframe.engine.spark.jvm_launch`` gives it to the JVM tiltframe starts, through
``SPARK_SUBMIT_OPTS`` (added to the driver's command beside any ``spark.driver.extraJavaOptions``).  The
archive's name holds the Spark version and a digest of the Java executable and of Spark's jars (where
they are, their names, sizes and times), so every install has its own; a JVM whose classpath or JDK differ
from the archive's anyway (extra jars) maps nothing and starts as without it, silently (its CDS log is
off).  ``TILTFRAME_CLASS_ARCHIVE=off`` turns it off, a path sets it.

A truncated archive is the one danger: the JVM maps it without checking its length and dies of SIGBUS at
start (a full disk while it is written would do it, and the JVM that writes it exits with its Python
process, whose exit status says nothing of the dump).  So an archive is only used once proven: after it is
written, a JVM started with it must map it and run a job; then a stamp beside it records its size and
modification time, and :func:`java_options` passes over an archive whose stamp is missing or differs.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tiltframe.cache import cache_dir

ENV = "TILTFRAME_CLASS_ARCHIVE"
SUBMIT_OPTS = "SPARK_SUBMIT_OPTS"
#: The JVM says nothing about the archive: not when it maps it, nor when it cannot (another classpath).
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"

_APP = """define stream S (symbol string, price double, quantity long, ts long);
define aggregation A from S select symbol, sum(quantity) as total, avg(price) as mean, count() as n
group by symbol aggregate by ts every sec ... year;
"""
_EVENTS = "symbol,price,quantity,ts\nA,1.5,2,1700000000000\nB,2.5,3,1700000061000\n"


def _sources() -> tuple[str, str]:
    """Where the archive's classes come from: the Java executable and the folder of Spark's jars."""
    import pyspark

    home = os.environ.get("JAVA_HOME")
    java = os.path.realpath(os.path.join(home, "bin", "java") if home else (shutil.which("java") or "java"))
    return java, os.path.realpath(Path(pyspark.__file__).parent / "jars")


def _digest(java: str, jars: str) -> str:
    """The sources as the JVM checks them: the Java executable, and where Spark's jars are with each one's
    name, size and modification time.  A JVM maps an archive only for the classpath it was written with
    (silently not at all otherwise), so each install of Spark (another virtualenv or clone, a reinstall)
    gets its own archive instead of one that looks proven and is never mapped."""
    entries = [java, jars]
    folder = Path(jars)
    for name in sorted(os.listdir(folder)) if folder.is_dir() else []:
        st = (folder / name).stat()
        entries.append(f"{name} {st.st_size} {st.st_mtime_ns}")
    return hashlib.sha256("\n".join(entries).encode()).hexdigest()[:12]


def _spark_key() -> str:
    import pyspark

    return f"{pyspark.__version__}-{_digest(*_sources())}"


def _stamp_of(path: Path) -> Path:
    return path.with_name(path.name + ".ok")


def _identity(path: Path) -> str:
    st = path.stat()
    return f"{st.st_size} {st.st_mtime_ns}\n"


def proven(path: Path) -> bool:
    """Whether ``path`` is an archive a JVM was seen to map and run with, unchanged since."""
    try:
        return _stamp_of(path).read_text(encoding="utf-8").splitlines(keepends=True)[:1] == [_identity(path)]
    except OSError:
        return False


def _prune(kept: Path) -> None:
    """Remove the other archives in ``kept``'s folder that no install can map any more: their Spark was
    removed or reinstalled (so a cache folder does not gather 170 MB per past install)."""
    for other in kept.parent.glob("spark-classes-*.jsa"):
        if other == kept:
            continue
        try:
            recorded = _stamp_of(other).read_text(encoding="utf-8").splitlines()[1:3]
        except OSError:
            recorded = []
        if len(recorded) == 2 and other.stem.endswith(f"-{_digest(*recorded)}"):
            continue  # another install's, still as it was
        other.unlink(missing_ok=True)
        _stamp_of(other).unlink(missing_ok=True)


def archive_path() -> Path | None:
    """Where the archive is (or would be): ``$TILTFRAME_CLASS_ARCHIVE``, else in tiltframe's cache folder;
    None when turned off or without a cache folder."""
    chosen = os.environ.get(ENV)
    if chosen is not None:
        return None if chosen.strip().lower() in ("", "off", "0", "false", "no") else Path(chosen)
    where = cache_dir()
    return None if where is None else Path(where) / f"spark-classes-{_spark_key()}.jsa"


def java_options() -> str:
    """The options that give a JVM the proven archive ("" when there is none): for JVMs tiltframe does not
    start itself, e.g. ``spark-submit --driver-java-options`` or a standalone cluster's daemons and executors,
    whose classpath is Spark's jars too (``python -m tiltframe.engine.spark.class_archive --options``)."""
    path = archive_path()
    return f"-XX:SharedArchiveFile={path} {QUIET}" if path is not None and proven(path) else ""


_PROOF = """
import os
from tiltframe.engine.spark.session import get_session
spark = get_session("local[1]")
pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
with open(f"/proc/{pid}/maps") as maps:
    print("mapped" if os.environ["_TILTFRAME_ARCHIVE_PROOF"] in maps.read() else "unmapped")
print(spark.range(5).selectExpr("sum(id)").first()[0])
"""


def _wait_for_writer(partial: Path, timeout: float) -> None:
    """Until the JVM that writes ``partial`` has exited: it dumps the archive as it exits, which may be after
    its Python process (that does not wait for it) has.  Read from ``/proc`` where there is one, else until
    the file has stopped growing for two seconds."""
    deadline = time.monotonic() + timeout
    proc = Path("/proc")
    last, still = -1, 0.0
    while time.monotonic() < deadline:
        if proc.is_dir():
            if not any(str(partial).encode() in _cmdline(p) for p in proc.iterdir() if p.name.isdigit()):
                return
        else:
            size = partial.stat().st_size if partial.exists() else -1
            still = still + 0.5 if size == last else 0.0
            if still >= 2.0:
                return
            last = size
        time.sleep(0.5)
    raise RuntimeError(f"the JVM writing the class archive {partial} did not exit within {timeout:.0f} s")


def _cmdline(pid_dir: Path) -> bytes:
    try:
        return (pid_dir / "cmdline").read_bytes()
    except OSError:  # gone meanwhile, or not ours to read
        return b""


def _prove(path: Path, env: dict[str, str], timeout: float) -> None:
    """A JVM started with the archive at ``path`` maps it (read in its memory map, where there is one) and
    runs a job; else RuntimeError, saying what it did."""
    env = {**env, SUBMIT_OPTS: f"-XX:SharedArchiveFile={path} {QUIET}", "_TILTFRAME_ARCHIVE_PROOF": str(path)}
    done = subprocess.run([sys.executable, "-c", _PROOF], env=env, capture_output=True, text=True, timeout=timeout,
                          check=False)
    said = done.stdout.split()
    if done.returncode != 0 or said[-1:] != ["10"] or (Path("/proc/self/maps").exists() and said[:1] != ["mapped"]):
        last = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        raise RuntimeError(f"a JVM started with the new class archive did not use it: {' '.join(said) or last}")


def build(path: Path | None = None, timeout: float = 600) -> Path:
    """Write the archive: a small ``tiltframe run`` in a child process whose JVM dumps the classes it
    loaded when it exits, written beside ``path``, proven by a JVM that maps it and runs a job, then moved
    onto it with its stamp (a reader never sees half a file, nor an archive no JVM ran with)."""
    target = path or archive_path()
    if target is None:
        raise RuntimeError(f"no class archive: {ENV} is off or there is no cache folder")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="tiltframe-classes-") as tmp:
        work = Path(tmp)
        (work / "app.siddhi").write_text(_APP, encoding="utf-8")
        (work / "in").mkdir()
        (work / "in" / "e.csv").write_text(_EVENTS, encoding="utf-8")
        partial = target.with_name(f"{target.name}.{os.getpid()}.part")
        env = {k: v for k, v in os.environ.items() if k not in (SUBMIT_OPTS, "PYSPARK_SUBMIT_ARGS")}
        env[SUBMIT_OPTS] = f"-XX:ArchiveClassesAtExit={partial} {QUIET}"
        env[ENV] = "off"
        command = [sys.executable, "-m", "tiltframe", "run", str(work / "app.siddhi"), "-i", f"S={work / 'in'}",
                   "-d", str(work / "data")]
        try:
            done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout, check=False)
            _wait_for_writer(partial, timeout)
            if done.returncode != 0 or not partial.is_file():
                said = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
                raise RuntimeError(f"the class archive was not written (exit {done.returncode}): {said[0]}")
            _prove(partial, env, timeout)
            _stamp_of(target).unlink(missing_ok=True)  # the old stamp never vouches for the new file
            partial.replace(target)
            stamp = _stamp_of(partial)
            stamp.write_text(_identity(target) + "\n".join(_sources()) + "\n", encoding="utf-8")
            stamp.replace(_stamp_of(target))
            if target.name.startswith("spark-classes-"):
                _prune(target)
        finally:
            partial.unlink(missing_ok=True)
            _stamp_of(partial).unlink(missing_ok=True)
    return target


def main() -> None:
    """``python -m tiltframe.engine.spark.class_archive [--if-missing | --options]``: (re)build the archive, or print
    the JVM options that give it (nothing when there is no proven archive)."""
    if "--options" in sys.argv[1:]:
        print(java_options())
        return
    path = archive_path()
    if path is None:
        print(f"class archive: off ({ENV} or no cache folder)", file=sys.stderr)
        return
    if "--if-missing" in sys.argv[1:] and proven(path):
        return
    print(f"class archive: writing {path} (a small Spark run, about a minute)", file=sys.stderr)
    build(path)
    print(f"class archive: {path} ({path.stat().st_size // 2**20} MiB)", file=sys.stderr)


if __name__ == "__main__":
    main()
