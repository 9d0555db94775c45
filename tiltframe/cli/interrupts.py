"""Waiting for a run so that Ctrl-C stops it gracefully (``tiltframe run``, of an app or a trickle query)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from tiltframe.cli.progress import RunProgress

R = TypeVar("R")


class Waitable(Protocol[R]):
    """A started run: ``wait()`` gives its result once it ends, ``stop()`` ends it, ``result`` so far."""

    @property
    def result(self) -> R: ...

    def wait(self) -> R: ...

    def stop(self) -> None: ...


def wait_interruptibly(handle: Waitable[R], progress: RunProgress | None = None) -> tuple[R, bool]:
    """``handle.wait()`` that a Ctrl-C stops gracefully; returns the result and whether it was interrupted.

    PySpark's own SIGINT handler makes a py4j call from inside a py4j call (and logs scary tracebacks), so
    while waiting SIGINT only sets a flag; the main thread then stops the queries.  Committed batches are
    kept and the checkpoint makes the next run resume after them.  A second Ctrl-C exits at once.
    """
    import os
    import signal
    import threading

    stop = threading.Event()
    done = threading.Event()
    outcome: dict[str, Any] = {}

    def on_sigint(signum: int, frame: object) -> None:
        if stop.is_set():
            os._exit(130)
        stop.set()

    def waiter() -> None:
        try:
            outcome["result"] = handle.wait()
        except BaseException as exc:  # re-raised in the main thread
            outcome["error"] = exc
        finally:
            done.set()

    previous = (
        signal.signal(signal.SIGINT, on_sigint)
        if threading.current_thread() is threading.main_thread()
        else None
    )
    try:
        worker = threading.Thread(target=waiter, name="tiltframe-wait", daemon=True)
        worker.start()
        while not done.wait(0.2):
            if stop.is_set():
                if progress is not None:
                    progress.status = "stopping (committed batches are kept; the next run resumes after them)"
                handle.stop()
                done.wait(60)
                return handle.result, True
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
    if "error" in outcome:
        if stop.is_set():
            return handle.result, True
        raise outcome["error"]
    return outcome["result"], stop.is_set()
