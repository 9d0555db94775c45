"""``tiltframe run``: the command, waiting for the run so that Ctrl-C stops it gracefully, and its summary."""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.table import Table

from tiltframe import api
from tiltframe.cli import logs
from tiltframe.cli.failing import handle_errors
from tiltframe.cli.interrupts import wait_interruptibly
from tiltframe.cli.options import (
    AppArg,
    CheckpointDirOpt,
    ConfigOpt,
    DataDirOpt,
    LangOpt,
    ShardOpt,
    check_config_file,
    check_run_options,
    checkpoint_location,
    is_local,
    is_trickle,
    pairs,
    resolve_data_dir,
    store_location,
)
from tiltframe.cli.output import stderr_console, stdout_console
from tiltframe.cli.progress import RunProgress
from tiltframe.cli.serving import TokenOpt, serve_beside
from tiltframe.errors import UsageError
from tiltframe.timeutil.parse import format_ts

if TYPE_CHECKING:
    from tiltframe.engine.runner import RunResult
    from tiltframe.model.app import AppSpec


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
        between = f", {c.events_unwindowed:,} events between windows" if c.events_unwindowed else ""
        console.print(f"{line}, {c.events_rejected:,} events rejected{between} ({c.batches:,} micro-batches)")
    for name, st in result.streams.items():
        where = data_dir / "streams" / name / "rejected"
        rejected = f", {st.rejected:,} events rejected (see {where})" if st.rejected else ""
        console.print(f"stream {name}: {st.rows:,} events written{rejected}")
    for name, rq in result.requests.items():
        rejected = f", {rq.rejected:,} rejected (see tiltframe inspect -a {rq.aggregation})" if rq.rejected else ""
        console.print(f"query {name}: {rq.answered:,} requests answered{rejected}", markup=False)
    console.print(f"done in {wall_seconds:.1f}s")


def run(
    app_file: AppArg,
    input_: Annotated[
        list[str] | None,
        typer.Option(
            "--input",
            "-i",
            metavar="STREAM=PATH",
            help="A directory of csv/json/parquet files feeding STREAM.",
        ),
    ] = None,
    input_format: Annotated[
        list[str] | None,
        typer.Option(
            "--input-format",
            metavar="STREAM=FORMAT",
            help="csv, json or parquet \\[default: from the file names].",
        ),
    ] = None,
    output: Annotated[
        list[str] | None,
        typer.Option(
            "--output",
            "-o",
            metavar="STREAM=PATH",
            help="Write the rows of a continuous query or output stream as JSON Lines under PATH "
            "(or csv:PATH, parquet:PATH, store:URL#TABLE); others go to the console.",
        ),
    ] = None,
    data_dir: DataDirOpt = None,
    checkpoint_dir: CheckpointDirOpt = None,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep watching the inputs for new files until Ctrl-C.")
    ] = False,
    max_files_per_trigger: Annotated[
        int | None,
        typer.Option("--max-files-per-trigger", min=1, help="At most N new files per micro-batch."),
    ] = None,
    max_bytes_per_trigger: Annotated[
        int | None,
        typer.Option("--max-bytes-per-trigger", min=0, metavar="BYTES",
                     help="About BYTES of new files per micro-batch (0: no bound) \\[default: "
                     "$TILTFRAME_MAX_BYTES_PER_TRIGGER or 67108864, 64 MiB]; --max-files-per-trigger wins."),
    ] = None,
    trigger_interval: Annotated[
        float | None,
        typer.Option("--trigger-interval", min=0.001, metavar="SECONDS",
                     help="With --follow: start a micro-batch at most every SECONDS \\[default: 1]; longer batches "
                     "write each coarse row fewer times (docs/scaling.md)."),
    ] = None,
    master: Annotated[
        str | None,
        typer.Option("--master", help="Spark master \\[default: $TILTFRAME_SPARK_MASTER or local\\[*]]."),
    ] = None,
    shard_id: ShardOpt = None,
    config: ConfigOpt = None,
    on_bad_file: Annotated[
        str,
        typer.Option("--on-bad-file", metavar="skip|fail",
                     help="An input file that cannot be read: record it and go on (skip), or stop (fail)."),
    ] = "skip",
    rebuild: Annotated[
        bool,
        typer.Option("--rebuild", help="Drop what the store holds of the aggregations fed here and their "
                     "checkpoints, then read every input again (after the store was replaced or emptied)."),
    ] = False,
    serve_port: Annotated[
        int | None,
        typer.Option("--serve", metavar="PORT", min=0, max=65535,
                     help="Serve the API, the page and /metrics on PORT while the pipeline runs "
                     "(as tiltframe serve; with its status and figures)."),
    ] = None,
    serve_host: Annotated[str, typer.Option("--serve-host", help="The address --serve listens on.")] = "127.0.0.1",
    token: TokenOpt = None,
    lang: LangOpt = None,
) -> None:
    """Aggregate the input streams into the store and run the continuous queries (everything available, or
    --follow until Ctrl-C).

    A trickle query (.trickle, or --lang trickle) runs on Spark over --input in=FOLDER (docs/trickle.md)."""
    import time

    err = stderr_console()
    out = stdout_console()
    with handle_errors():
        if trigger_interval is not None and not follow:
            raise UsageError("--trigger-interval needs --follow: without it, everything available is read at once")
        if is_trickle(Path(app_file), lang):
            from tiltframe.cli.trickle_running import run_trickle

            refused = {"--input-format": bool(input_format), "--shard-id": shard_id is not None,
                       "--config": config is not None, "--on-bad-file": on_bad_file != "skip", "--rebuild": rebuild,
                       "--serve": serve_port is not None}
            run_trickle(Path(app_file), inputs=input_, outputs=output, data_dir=data_dir,
                        checkpoint_dir=checkpoint_dir, follow=follow, max_files_per_trigger=max_files_per_trigger,
                        max_bytes_per_trigger=max_bytes_per_trigger, trigger_interval=trigger_interval,
                        master=master, refused=refused)
            return
        spec = api.load_app(app_file)
        from tiltframe.lang.checks.cross_references import check_runnable

        check_runnable(spec)
        inputs = pairs(input_, "--input")
        formats = pairs(input_format, "--input-format")
        outputs = pairs(output, "--output")
        check_run_options(spec, inputs, formats, outputs)
        from tiltframe.engine.rollup.shards import load_deployment

        check_config_file(config)
        deployment = load_deployment(shard_id, config)
        directory = resolve_data_dir(data_dir)
        from tiltframe.engine.inputs.filesystems import checkpoint_root

        checkpoint_root(checkpoint_dir, directory)  # a location that cannot work fails before Spark starts
        if not inputs:
            err.print("note: no --input given; the aggregations receive no events")
        fed = {spec.input_stream(name) for name in inputs}
        for agg in spec.aggregations:
            root = spec.root_stream(agg.source)  # a stream that stream queries make: their input stream
            if root not in fed and inputs:
                err.print(f"note: stream {root} has no --input; aggregation {agg.name} receives no events")

        from tiltframe.engine.inputs.sources import FileInput
        from tiltframe.engine.sinks import sink_for
        from tiltframe.engine.spark.jvm_launch import is_short_run

        file_inputs = {
            name: FileInput(
                str(Path(path).resolve()) if is_local(path) else path,
                formats[name].lower() if name in formats else None,
                max_files_per_trigger,
                max_bytes_per_trigger=max_bytes_per_trigger,
            )
            for name, path in inputs.items()
        }
        sinks = {name: sink_for(path) for name, path in outputs.items()}
        from tiltframe.engine.run_options import RunOptions
        from tiltframe.http.status import PipelineStatus

        status = PipelineStatus([a.name for a in spec.aggregations])
        # What tf.start takes as keywords, from the flags: checked here, before Spark starts.
        options = RunOptions(data_dir=directory, follow=follow, outputs=sinks, on_batch=status.on_batch,
                             max_files_per_trigger=max_files_per_trigger, max_bytes_per_trigger=max_bytes_per_trigger,
                             deployment=deployment, on_bad_file=on_bad_file, rebuild=rebuild,
                             checkpoint_dir=checkpoint_dir, trigger_seconds=trigger_interval or 1.0)
        with ExitStack() as cleanup:
            if serve_port is not None:  # listening before Spark starts: a port in use fails at once
                cleanup.callback(serve_beside(spec, directory, serve_port, serve_host, token, status, err).stop)
            if (err.is_terminal or logs.settings.verbose) and not logs.settings.json:
                err.print(f"starting Spark ({master or 'default master'}) ...", style="dim")
            # A run that reads a few megabytes and exits is over before C2's compiling would pay back.
            short = not follow and is_short_run([f.path for f in file_inputs.values()])
            spark = logs.start_spark(master, directory, short_lived=short)
            started = time.monotonic()
            logged = logs.settings.verbose or logs.settings.debug or logs.settings.json
            progress = RunProgress(err, [a.name for a in spec.aggregations], follow=follow, logged=logged)
            status.listeners.append(progress.on_batch)
            with progress:
                handle = api.start_run(spec, file_inputs, options, spark=spark)
                try:
                    result, interrupted = wait_interruptibly(handle, progress)
                finally:
                    handle.close()
                    status.stopped()
            if interrupted and not logs.settings.json:
                err.print("stopped by Ctrl-C")
            print_run_summary(out, spec, result, directory, time.monotonic() - started, checkpoint_dir)
