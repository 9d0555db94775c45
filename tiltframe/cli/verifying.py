"""``tiltframe verify`` (the stored levels recomputed from the raw inputs and compared; exit 1 on any
difference) and ``tiltframe rebuild`` (a range recomputed and put in place)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from tiltframe import api, lifecycle
from tiltframe.cli import logs
from tiltframe.cli.failing import handle_errors
from tiltframe.cli.options import AppArg, CheckpointDirOpt, DataDirOpt, pairs, resolve_data_dir
from tiltframe.cli.output import stdout_console
from tiltframe.errors import UsageError
from tiltframe.timeutil.parse import format_ts

if TYPE_CHECKING:
    from tiltframe.engine.lifecycle.range_rebuilds import RangeRebuild
    from tiltframe.engine.lifecycle.verification import Verification

#: Differences printed per aggregation (all are counted).
SHOWN = 50

InputsOpt = Annotated[
    list[str] | None,
    typer.Option("--input", "-i", metavar="STREAM=PATH",
                 help="The directory of csv/json/parquet files feeding STREAM (as given to run)."),
]
AggregationOpt = Annotated[str | None, typer.Option("--aggregation", "-a", help="Only this aggregation.")]


def within_bounds(text: str) -> tuple[Any, Any]:
    """``--within``'s text as a start and an end: ``"A, B"``, or one period (``"2024-01-**"``,
    ``"yesterday"``, ``"last 6 hours"``); whole numbers are epoch milliseconds."""
    parts = [p.strip() for p in text.split(",")]
    if len(parts) > 2 or not all(parts):
        msg = f"--within takes 'START, END' or one period such as '2024-01-**' or 'last 6 hours', not {text!r}"
        raise UsageError(msg)
    values: list[Any] = [int(p) if p.lstrip("-").isdigit() else p for p in parts]
    return (values[0], values[1]) if len(values) == 2 else (values[0], None)


def print_verification(out: Console, v: Verification, seconds: float) -> None:
    levels = ", ".join(f"{level} {rows:,}" for level, rows in v.rows.items())
    out.print(f"{v.aggregation}: {v.events:,} events from {v.files:,} files recomputed; rows compared per level: "
              f"{levels} ({seconds:.1f} s)", markup=False)
    for note in v.notes:
        out.print(f"  note: {note}", markup=False)
    if v.ok:
        out.print(f"{v.aggregation}: every stored level equals the recomputation", markup=False)
        return
    table = Table(title=f"{v.aggregation}: {len(v.differences):,} differences", title_justify="left")
    for column in ("level", "bucket (GMT)", "key", "column", "stored", "recomputed"):
        table.add_column(column, overflow="fold")
    for d in v.differences[:SHOWN]:
        table.add_row(d.level, f"{format_ts(d.bucket)} ({d.bucket})", ", ".join(map(str, d.key)) or "-",
                      d.column or "(row)", "-" if d.stored is None else str(d.stored),
                      "-" if d.recomputed is None else str(d.recomputed))
    out.print(table)
    if len(v.differences) > SHOWN:
        out.print(f"... and {len(v.differences) - SHOWN:,} more", markup=False)


def verify(
    app_file: AppArg,
    input_: InputsOpt = None,
    data_dir: DataDirOpt = None,
    within: Annotated[
        str | None,
        typer.Option("--within", metavar="'START, END'",
                     help="Only the buckets that start in this range (any within form: '2024-01-**', "
                          "'yesterday', 'last 6 hours', ISO times, epoch ms) \\[default: every bucket]."),
    ] = None,
    aggregation: AggregationOpt = None,
    checkpoint_dir: CheckpointDirOpt = None,
) -> None:
    """Recompute every stored level from the raw inputs with a plain Spark batch job (each level straight
    from the events, not through the finer ones) and compare bucket by bucket and key by key; prints each
    difference (level, bucket, key, stored, recomputed) and exits 1 on any.  Reads the files the pipeline
    read; events it recorded as late or moved count as it counted them; sketches agree within their error."""
    results, seconds = _recomputed("verify", lifecycle.verify, app_file, input_, within, data_dir, aggregation,
                                   checkpoint_dir)
    out = stdout_console()
    for v in results.values():
        print_verification(out, v, seconds / len(results))
    if not all(v.ok for v in results.values()):
        raise typer.Exit(1)


def print_rebuild(out: Console, r: RangeRebuild, seconds: float) -> None:
    out.print(f"{r.aggregation}: {r.events:,} events from {r.files:,} files recomputed ({seconds:.1f} s)", markup=False)
    for note in r.notes:
        out.print(f"  note: {note}", markup=False)
    for level, (start, end) in r.spans.items():
        out.print(f"  {level}: buckets from {format_ts(start)} to {format_ts(end)} (GMT) replaced by "
                  f"{r.rows.get(level, 0):,} rows", markup=False)


def rebuild(
    app_file: AppArg,
    within: Annotated[
        str,
        typer.Option("--within", metavar="'START, END'",
                     help="The range to recompute (any within form: '2024-01-15', 'yesterday', ISO times, epoch "
                          "ms); every level's buckets that overlap it are replaced."),
    ],
    input_: InputsOpt = None,
    data_dir: DataDirOpt = None,
    aggregation: AggregationOpt = None,
    checkpoint_dir: CheckpointDirOpt = None,
) -> None:
    """Recompute a range from the inputs as they are now (after a source was corrected) and replace the
    stored buckets of every level that overlap it, in one transaction, exactly once with respect to a
    running pipeline.  Refused when the inputs differ from the store around the range (coarse buckets
    would change outside it).  To recompute everything, use run --rebuild."""
    results, seconds = _recomputed("rebuild", lifecycle.rebuild, app_file, input_, within, data_dir, aggregation,
                                   checkpoint_dir)
    out = stdout_console()
    for r in results.values():
        print_rebuild(out, r, seconds / len(results))


def _recomputed(command: str, call: Callable[..., dict[str, Any]], app_file: Path, input_: list[str] | None,
                within: str | None, data_dir: Path | None, aggregation: str | None,
                checkpoint_dir: str | None) -> tuple[dict[str, Any], float]:
    """What ``call`` (``lifecycle.verify`` or ``rebuild``) gives for the command's options, and its seconds."""
    with handle_errors():
        spec = api.load_app(app_file)
        inputs = pairs(input_, "--input")
        if not inputs:
            raise UsageError(f"{command} needs the inputs to recompute from: --input STREAM=PATH")
        directory = resolve_data_dir(data_dir)
        spark = logs.start_spark(None, directory)
        started = time.monotonic()
        results = call(spec, inputs, data_dir=directory, within=within_bounds(within) if within else None,
                       aggregation=aggregation, checkpoint_dir=checkpoint_dir, spark=spark)
        if not results:
            raise UsageError("no aggregation reads the streams given with --input")
    return results, time.monotonic() - started
