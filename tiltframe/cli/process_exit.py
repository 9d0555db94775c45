"""How the command line's process ends once a command is done.

After a command, Python tore down every module it had loaded and collected their objects: pandas, pyarrow,
SQLAlchemy, and for a command that started Spark, PySpark and Py4J too.  That took 0.26-0.33 s after a
``tiltframe query`` and about 0.45 s after a ``tiltframe run`` (2026-12-01), work whose only result is a
process that ends anyway.  So the process ends as the command's work is done: every ``atexit`` handler run
(logging's flush, ``weakref.finalize`` and temporary folders among them), its output flushed, then
``os._exit``.  Nothing else is skipped: the commands close their stores themselves (a server sees each
connection closed as usual), committed batches are durable, and a JVM the process started stops as it always
does once its parent is gone (Spark's shutdown hooks run there).

A process where another thread still works (a server beside the run), that runs inside a JVM someone else
started (``spark-submit``'s driver, which waits for it), or that a profiler or debugger watches (``python -m
cProfile -o ...`` writes its file as the interpreter ends) ends the ordinary way.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import threading


def inside_spark_submit() -> bool:
    """Whether this process is the Python side of a JVM that started it (spark-submit, PySpark's gateway)."""
    return bool(os.environ.get("PYSPARK_GATEWAY_PORT"))


def others_working() -> bool:
    """Whether a thread that the interpreter would wait for (not a daemon) is still running."""
    main = threading.main_thread()
    return any(t is not main and not t.daemon and t.is_alive() for t in threading.enumerate())


def watched() -> bool:
    """Whether a profiler or a debugger (a trace function) watches this process."""
    return sys.getprofile() is not None or sys.gettrace() is not None


def exit_code(code: object) -> int:
    """``SystemExit.code`` as a process status: None is 0, a message is printed to stderr and is 1."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def finish(code: object) -> None:
    """End the process with ``code`` (as ``sys.exit`` takes it): at once where nothing else works, else by
    ``sys.exit``."""
    if inside_spark_submit() or others_working() or watched():
        sys.exit(code)
    status = exit_code(code)
    atexit._run_exitfuncs()  # what an ordinary exit runs: logging.shutdown, finalizers, temporary folders
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe or stream: nothing more can reach it
            stream.flush()
    os._exit(status)
