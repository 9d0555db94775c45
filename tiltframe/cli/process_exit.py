"""How the command line's process ends once a command is done.

A process that started Spark's JVM holds PySpark, Py4J, pandas, pyarrow and the rest of the engine; after
the command, Python spent about half a second tearing those modules down and collecting their objects
(``tiltframe run`` of one small file: 0.45 s of a 10 s run, on 2026-12-01), work whose only result is a
process that ends anyway.  So such a process ends as the command's work is done: its output flushed, every
``atexit`` handler run (logging's flush, ``weakref.finalize`` and temporary folders among them), then
``os._exit``.  Nothing else is skipped: the JVM stops as it always does once its parent's pipe closes
(Spark's own shutdown hooks run there), and committed batches are already durable in the store.

Processes where another thread still works (a server beside the run), or whose JVM someone else started
(``spark-submit`` runs this program inside its own driver), end the ordinary way.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import threading


def started_jvm() -> bool:
    """Whether this process launched a Spark JVM of its own (PySpark's gateway with its child process)."""
    context = sys.modules.get("pyspark.core.context")
    gateway = getattr(getattr(context, "SparkContext", None), "_gateway", None)
    return getattr(gateway, "proc", None) is not None


def others_working() -> bool:
    """Whether a thread that the interpreter would wait for (not a daemon) is still running."""
    main = threading.main_thread()
    return any(t is not main and not t.daemon and t.is_alive() for t in threading.enumerate())


def exit_code(code: object) -> int:
    """``SystemExit.code`` as a process status: None is 0, a message is printed to stderr and is 1."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def finish(code: object) -> None:
    """End the process with ``code`` (as ``sys.exit`` takes it): at once where it started a JVM and nothing
    else works, else by ``sys.exit``."""
    if not started_jvm() or others_working():
        sys.exit(code)
    status = exit_code(code)
    atexit._run_exitfuncs()  # what an ordinary exit runs: logging.shutdown, finalizers, temporary folders
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe or stream: nothing more can reach it
            stream.flush()
    os._exit(status)
