"""A run on the terminal: waiting for it so that Ctrl-C stops it gracefully, and its summary."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from tiltframe.cli.options import checkpoint_location, store_location
from tiltframe.cli.progress import RunProgress
from tiltframe.timeutil.parse import format_ts

if TYPE_CHECKING:
    from tiltframe.engine.runner import Run, RunResult
    from tiltframe.spec.model import AppSpec


def wait_interruptibly(handle: Run, progress: RunProgress | None = None) -> tuple[RunResult, bool]:
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


def print_run_summary(
    console: Console,
    spec: AppSpec,
    result: RunResult,
    data_dir: Path,
    wall_seconds: float,
    checkpoints: str | None = None,
) -> None:
    """The run's totals per aggregation, output stream and continuous query (stdout)."""
    for agg in spec.aggregations:
        t = result.aggregations.get(agg.name)
        table = Table(title=f"aggregation {agg.name}", title_justify="left", show_header=False, box=None)
        table.add_column(style="bold")
        table.add_column(justify="right")
        if t is None:
            console.print(f"aggregation {agg.name}: only read (stream {spec.root_stream(agg.source)} has no --input)")
            continue
        table.add_row(
            "micro-batches", f"{t.batches:,}" + (f" (+{t.skipped} already committed)" if t.skipped else "")
        )
        table.add_row("events read", f"{t.events_read:,}")
        table.add_row("events aggregated", f"{t.events_aggregated:,}")
        if t.events_moved:
            table.add_row("events moved to another bucket", f"{t.events_moved:,}")
        table.add_row("events rejected", f"{t.events_rejected:,}")
        if t.files_rejected:
            table.add_row("files that cannot be read", f"{t.files_rejected:,} (see tiltframe inspect)")
        changed = result.files_changed.get(agg.name)
        if changed:
            table.add_row("files changed after they were read", f"{len(changed):,} (see tiltframe inspect)")
        table.add_row("rows written", f"{t.rows_written:,}")
        if t.rows_purged:
            table.add_row("rows purged (retention)", f"{t.rows_purged:,}")
        table.add_row("latest event time (GMT)", format_ts(t.max_event_ts))
        table.add_row("time", f"{t.spark_seconds:.1f}s Spark + {t.store_seconds:.1f}s store")
        table.add_row("store", str(store_location(spec, agg, data_dir)))
        table.add_row("checkpoint", str(checkpoint_location(spec, agg, data_dir, checkpoints)))
        console.print(table)
    for out, n in sorted(result.outputs.items()):
        console.print(f"output stream {out}: {n:,} rows")
    for name, c in result.continuous.items():
        line = f"continuous query {name}: {c.rows_emitted:,} rows emitted, {c.events_late:,} late events"
        console.print(f"{line}, {c.events_rejected:,} events rejected ({c.batches:,} micro-batches)")
    for name, st in result.streams.items():
        where = data_dir / "streams" / name / "rejected"
        rejected = f", {st.rejected:,} events rejected (see {where})" if st.rejected else ""
        console.print(f"stream {name}: {st.rows:,} events written{rejected}")
    if result.requests_rejected:
        console.print(f"requests rejected: {result.requests_rejected:,}")
    console.print(f"done in {wall_seconds:.1f}s")
