"""Python's full garbage collection now and then after a micro-batch, so the JVM lets go of finished batches'
plans.

Py4J's proxy of a JVM object (``JavaObject``) keeps each method it was asked for (a ``JavaMember``), which
points back at it: every proxy a batch's plan was built through is in a reference cycle, which only Python's
cyclic collector frees, and only then does Py4J tell the JVM to drop the object.  A long-lived driver that
allocates little runs the full collection rarely, so the DataFrames, columns and plans of finished micro-batches
stayed on the JVM's heap for dozens of batches, and the heap after a JVM collection went up and down with
Python's collections (77, 91, 84, 109, 112, 98 MB over 50 batches; docs/performance.md, "Driver memory over a
long stream").  A full collection takes about 75 ms in a driver of 180,000 Python objects; run at most every
``INTERVAL_SECONDS``, it costs under 1% of a run.
"""

from __future__ import annotations

import gc
import threading
import time

INTERVAL_SECONDS = 10.0

_lock = threading.Lock()
_last = time.monotonic()


def after_batch() -> bool:
    """A full collection unless one ran here within ``INTERVAL_SECONDS`` (any query's batch, any thread);
    whether it ran."""
    global _last
    now = time.monotonic()
    with _lock:
        if now - _last < INTERVAL_SECONDS:
            return False
        _last = now
    gc.collect()
    return True
