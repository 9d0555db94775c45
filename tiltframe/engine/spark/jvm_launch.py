"""The Java options of the driver JVM a new session starts: the class archive, and C1's compiler alone for a
short run (and, on a local master, the Spark home it starts from: ``spark_home``).

A JVM compiles hot code twice: quickly with C1, then again, optimised, with C2.  C2 pays back in a process
that runs for minutes; in one that reads a few megabytes and exits, its compiler threads mostly take
the cores from the work, compiling Spark's start-up code.  Measured on two cores (docs/performance.md,
"Fixed costs"), each a new ``tiltframe run`` from start to exit: one small file 13.4 to 10.3 s with C1
alone; 29 MB of W1's events 16.6 to 15.3 s; W2's 108 MB 22.1 to 18.8 s; but W1's 141 MB 36.7-42.2 to
44.7-47.6 s, where the aggregation's own code is hot long enough.  So a run that reads everything available
and exits, over local files of at most ``$TILTFRAME_SHORT_RUN_BYTES`` (32 MiB by default; 0: never) in all,
starts its JVM with C1 alone; a following run, a larger one, a remote input and a JVM that already runs
keep both compilers.  Results never depend on the compiler.

Every JVM started here also compiles huge methods (``-XX:-DontCompileHugeMethods``, ``HUGE_METHODS``).
HotSpot leaves a method of more than 8,000 bytes of bytecode to the interpreter, and the code Spark
generates for a stage that types a stream of twenty CSV attributes is such a method: typing a real export's
336,776 rows took 4.7 s interpreted and 1.8 s compiled (docs/performance.md, "A real export's shape").
Executors started elsewhere get the same option through ``spark.executor.extraJavaOptions`` where nobody
set it (``tiltframe.engine.spark.session``).

The options go to the JVM through ``SPARK_SUBMIT_OPTS`` for the launch only, beside the caller's own;
options the caller gives the driver (``spark.driver.extraJavaOptions``, ``--driver-java-options``) come after
them on the JVM's command line, so theirs win.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from tiltframe.engine.inputs.filesystems import local_path
from tiltframe.engine.spark import class_archive, spark_home
from tiltframe.env_values import env_int

SUBMIT_OPTS = class_archive.SUBMIT_OPTS
SHORT_RUN_ENV = "TILTFRAME_SHORT_RUN_BYTES"
DEFAULT_SHORT_RUN_BYTES = 32 * 1024 * 1024
#: Tiered compilation stops at its first level: C1, without the profiling that feeds C2.
C1_ONLY = "-XX:TieredStopAtLevel=1"
#: The JIT compiles methods past 8,000 bytes of bytecode too (Spark's generated code for a wide stage).
HUGE_METHODS = "-XX:-DontCompileHugeMethods"


def short_run_bytes() -> int:
    """``$TILTFRAME_SHORT_RUN_BYTES``, else 32 MiB; 0 makes no run short."""
    return env_int(SHORT_RUN_ENV, DEFAULT_SHORT_RUN_BYTES, expected="a number of bytes (0: no short runs)")


def is_short_run(paths: Iterable[str]) -> bool:
    """Whether a run that reads everything at ``paths`` once and exits is short: every path on this machine
    (a plain path or a ``file:`` URI) and their files at most ``short_run_bytes()`` in all (a folder is
    walked only until its files pass the bound)."""
    bound = short_run_bytes()
    if bound <= 0:
        return False
    total = 0
    for path in paths:
        local = local_path(path)
        if local is None:
            return False
        for file in _files(local):
            try:
                total += file.stat().st_size
            except OSError:
                continue  # gone meanwhile: Spark's listing decides
            if total > bound:
                return False
    return True


def _files(path: Path) -> Iterator[Path]:
    if not path.is_dir():
        yield path
        return
    for folder, _dirs, names in os.walk(path):
        for name in names:
            yield Path(folder, name)


def java_options(short_lived: bool) -> str:
    """The options tiltframe adds to a JVM it starts, beside ``$SPARK_SUBMIT_OPTS``: the proven class archive
    (unless those options name one), huge methods compiled (unless they say otherwise) and, for a short run,
    C1 alone (unless they choose a compiler)."""
    before = os.environ.get(SUBMIT_OPTS) or ""
    options = []
    if "SharedArchiveFile" not in before and "Xshare" not in before:
        options.append(class_archive.java_options())
    if "DontCompileHugeMethods" not in before:
        options.append(HUGE_METHODS)
    if short_lived and "Tiered" not in before:
        options.append(C1_ONLY)
    return " ".join(o for o in options if o)


@contextlib.contextmanager
def launching(short_lived: bool = False, master: str = "") -> Iterator[str]:
    """Within it, a JVM that Spark's launcher starts gets :func:`java_options` (what it yields) and, on a local
    ``master``, the Spark home of links (``tiltframe.engine.spark.spark_home``); the environment is as it was
    afterwards."""
    options = java_options(short_lived)
    changed = {}
    if options:
        changed[SUBMIT_OPTS] = f"{os.environ.get(SUBMIT_OPTS) or ''} {options}".strip()
    home = spark_home.linked_home() if spark_home.usable(master) else None
    if home is not None:
        changed["SPARK_HOME"] = str(home)
    before = {key: os.environ.get(key) for key in changed}
    os.environ.update(changed)
    try:
        yield options
    finally:
        for key, value in before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
