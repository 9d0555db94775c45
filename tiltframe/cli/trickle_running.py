"""``tiltframe run QUERY.trickle``: a trickle query on Spark over a folder of JSON-lines files."""

from __future__ import annotations

import json
import time
from pathlib import Path

import typer

from tiltframe import api
from tiltframe.cli import logs
from tiltframe.cli.interrupts import wait_interruptibly
from tiltframe.cli.options import pairs, resolve_data_dir
from tiltframe.cli.output import stderr_console
from tiltframe.engine.spark.jvm_launch import is_short_run
from tiltframe.errors import UsageError
from tiltframe.model.trickle import INPUT_PORT


def run_trickle(
    query_file: Path,
    *,
    inputs: list[str] | None,
    outputs: list[str] | None,
    data_dir: Path | None,
    checkpoint_dir: str | None,
    follow: bool,
    max_files_per_trigger: int | None,
    max_bytes_per_trigger: int | None,
    trigger_interval: float | None,
    master: str | None,
    refused: dict[str, bool],
) -> None:
    """Run the query until its input is read (or, with ``follow``, until Ctrl-C): each output stream's events
    as JSON lines under its ``--output`` folder, or on stdout as ``{"stream": NAME, "event": VALUE}``; the
    totals on stderr.  ``refused``: the options of ``run`` a trickle query has no use for, and whether given."""
    given = [name for name, used in refused.items() if used]
    if given:
        msg = f"{', '.join(given)}: not for a trickle query (they concern SiddhiQL apps and their stores)"
        raise UsageError(msg)
    query = api.load_trickle(query_file)
    sources = pairs(inputs, "--input")
    if set(sources) != {INPUT_PORT}:
        msg = (f"a trickle query reads the stream '{INPUT_PORT}': give --input {INPUT_PORT}=FOLDER (a folder of "
               f"JSON-lines files), not {' '.join(f'{k}=...' for k in sources) or 'nothing'}")
        raise UsageError(msg)
    directory = resolve_data_dir(data_dir)
    err = stderr_console()

    def printed(stream: str, lines: list[str]) -> None:
        for line in lines:
            typer.echo(f'{{"event":{line},"stream":{json.dumps(stream, ensure_ascii=False)}}}')

    short = not follow and is_short_run([sources[INPUT_PORT]])  # C1 alone for its JVM (jvm_launch.py)
    spark = logs.start_spark(master, directory, short_lived=short)
    started = time.monotonic()
    handle = api.start_trickle(query, sources[INPUT_PORT], data_dir=directory, spark=spark,
                               outputs=pairs(outputs, "--output"), follow=follow,
                               max_files_per_trigger=max_files_per_trigger,
                               max_bytes_per_trigger=max_bytes_per_trigger, checkpoint_dir=checkpoint_dir,
                               trigger_seconds=trigger_interval or 1.0, on_output=printed)
    try:
        totals, interrupted = wait_interruptibly(handle)
    finally:
        handle.stop()
    if interrupted:
        err.print("stopped by Ctrl-C")
    made = ", ".join(f"{n:,} on {s}" for s, n in sorted(totals.outputs.items())) or "none"
    errors = f"{totals.errors:,} errors (see {handle.dir / 'rejected'})" if totals.errors else "no errors"
    err.print(f"{totals.events_read:,} events read in {totals.batches:,} micro-batches; outputs: {made}; {errors}; "
              f"done in {time.monotonic() - started:.1f}s", markup=False)
