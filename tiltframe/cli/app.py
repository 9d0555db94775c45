"""The ``tiltframe`` command line: run, query, inspect and validate apps, and the demo.

Every command is one call into :mod:`tiltframe.api`, so the CLI and the library behave the same.  Data
(query answers, summaries) goes to stdout; progress and errors go to stderr.  Exit codes: 0 success,
1 runtime or data error, 2 usage error or invalid definition.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
import sys
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from tiltframe import api
from tiltframe.cli.progress import RunProgress
from tiltframe.errors import DefinitionError, TiltframeError, UsageError, unknown
from tiltframe.spec.lateness import Lateness
from tiltframe.spec.retention import Retention
from tiltframe.timeutil.parse import format_ts

if TYPE_CHECKING:
    import pandas as pd

    from tiltframe.engine.runner import Run, RunResult
    from tiltframe.spec.model import AggregationSpec, AppSpec

EXIT_OK, EXIT_RUNTIME, EXIT_USAGE = 0, 1, 2
FORMATS = ("csv", "json", "parquet")

app = typer.Typer(
    name="tiltframe",
    help="Incremental, multi-granularity rollups of event streams on Apache Spark (SiddhiQL aggregations).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
)

_state = {"debug": False}


def stdout_console() -> Console:
    """A console on the current stdout; wide when piped so that tables are not squeezed to 80 columns."""
    return Console(width=None if sys.stdout.isatty() else 240, highlight=False, soft_wrap=False)


def stderr_console() -> Console:
    return Console(stderr=True, highlight=False, soft_wrap=True)


# --- errors -------------------------------------------------------------------------------------------


_TILTFRAME_ERROR_LINE = re.compile(r"tiltframe\.errors\.(\w+): (.+)")


def _spark_message(exc: BaseException) -> str:
    """The useful part of a Spark/py4j failure: the tiltframe error inside it, else its first lines."""
    text = str(exc)
    found = _TILTFRAME_ERROR_LINE.findall(text)
    if found:
        kind, message = found[-1]
        return f"{kind}: {message}"
    lines = [line for line in text.splitlines() if line.strip()]
    head = "\n".join(lines[:8]) + ("\n..." if len(lines) > 8 else "")
    return f"{type(exc).__name__}: {head}"


@contextmanager
def handle_errors(context: str | None = None) -> Iterator[None]:
    """Turn exceptions into a message on stderr and the documented exit code (tracebacks with --debug)."""
    err = stderr_console()
    prefix = f"{context}: " if context else ""
    try:
        yield
    except typer.Exit:
        raise
    except KeyboardInterrupt:
        err.print("interrupted")
        raise typer.Exit(130) from None
    except (DefinitionError, UsageError) as exc:
        if _state["debug"]:
            traceback.print_exc()
        kind = "invalid definition" if isinstance(exc, DefinitionError) else "usage error"
        err.print(f"[bold red]error[/] ({kind}): {prefix}", end="")
        err.print(str(exc), markup=False)
        raise typer.Exit(EXIT_USAGE) from None
    except TiltframeError as exc:
        if _state["debug"]:
            traceback.print_exc()
        err.print("[bold red]error[/]: ", end="")
        err.print(f"{prefix}{exc}", markup=False)
        raise typer.Exit(EXIT_RUNTIME) from None
    except Exception as exc:
        if _state["debug"]:
            traceback.print_exc()
        err.print("[bold red]error[/]: ", end="")
        err.print(f"{prefix}{_spark_message(exc)}", markup=False)
        err.print("(run with --debug for the traceback)", style="dim")
        raise typer.Exit(EXIT_RUNTIME) from None


# --- global options -----------------------------------------------------------------------------------


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        typer.echo(f"tiltframe {version('tiltframe')}")
        raise typer.Exit


@app.callback()
def _main(
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks on errors.")] = False,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Log what the engine does (stderr).")
    ] = False,
    _show_version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version and exit.")
    ] = False,
) -> None:
    """Define rollups in SiddhiQL, stream events through Spark into per-granularity tables, query them."""
    _state["debug"] = debug
    level = logging.DEBUG if debug else logging.INFO if verbose else logging.WARNING
    logging.basicConfig(
        level=level, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s", force=True
    )
    for noisy in ("py4j", "py4j.clientserver", "py4j.java_gateway"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


# --- shared option types ------------------------------------------------------------------------------

AppArg = Annotated[
    Path,
    typer.Argument(
        metavar="APP", help="The app file (SiddhiQL: define stream / define aggregation / queries)."
    ),
]
DataDirOpt = Annotated[
    Path | None,
    typer.Option(
        "--data-dir",
        "-d",
        help="Where the store and checkpoints live \\[default: $TILTFRAME_DATA_DIR or ./tiltframe-data].",
        show_default=False,
    ),
]


ShardOpt = Annotated[
    str | None,
    typer.Option(
        "--shard-id",
        help="This deployment's shard, for aggregations partitioned by shard (@PartitionById) "
        "\\[default: $TILTFRAME_SHARD_ID, or shard_id in the config file].",
        show_default=False,
    ),
]
ConfigOpt = Annotated[
    Path | None,
    typer.Option(
        "--config",
        help="A TOML file with shard_id and partition_by_id (partition every aggregation that does not say) "
        "\\[default: $TILTFRAME_CONFIG].",
        show_default=False,
    ),
]


def _data_dir(value: Path | None) -> Path:
    return value if value is not None else api.default_data_dir()


def _pairs(values: list[str] | None, option: str) -> dict[str, str]:
    """``STREAM=VALUE`` options as a dict; a usage error for anything else or a repeated stream."""
    result: dict[str, str] = {}
    for raw in values or []:
        name, sep, value = raw.partition("=")
        name, value = name.strip(), value.strip()
        if not sep or not name or not value:
            msg = f"{option} '{raw}': expected STREAM=VALUE, for example {option} TradeStream=data/trades"
            raise UsageError(msg)
        if name in result:
            msg = f"{option} names stream {name} twice"
            raise UsageError(msg)
        result[name] = value
    return result


def _is_local(path: str) -> bool:
    return "://" not in path and not path.startswith(("hdfs:", "s3a:", "s3:", "gs:", "abfs:", "file:"))


def _output_streams(spec: AppSpec) -> list[str]:
    """What ``--output`` may name: the output streams of retrieval joins and the continuous queries."""
    from tiltframe.engine.runner import continuous_name

    joins = [q.insert_into or q.name or f"query{i}" for i, q in enumerate(spec.queries) if q.request_stream is not None]
    return [*joins, *(continuous_name(spec, i) for i in range(len(spec.continuous)))]


def store_location(spec: AppSpec, agg: AggregationSpec, data_dir: Path) -> Path | str:
    """Where an aggregation's rollups are kept: its SQLite file, or its server URL without the password."""
    from tiltframe import store

    return store.store_location(agg.store, data_dir)


def checkpoint_location(spec: AppSpec, agg: AggregationSpec, data_dir: Path) -> Path:
    """The checkpoint directory of an aggregation's streaming query (as the runner names it)."""
    from tiltframe.store.layout import AggregationLayout

    layout = AggregationLayout.of(spec, agg.name)
    return data_dir / "checkpoints" / f"{layout.name}-{layout.spec_hash}"


# --- run ----------------------------------------------------------------------------------------------


def _check_run_options(
    spec: AppSpec,
    inputs: dict[str, str],
    formats: dict[str, str],
    outputs: dict[str, str],
) -> None:
    """Fail fast (before Spark starts) on names and paths that cannot work."""
    streams = [s.name for s in spec.streams] + [t.name for t in spec.tables]
    for name in inputs:
        if name not in streams:
            msg = f"--input: {unknown('stream', name, streams)}"
            raise UsageError(msg)
    for name, fmt in formats.items():
        if name not in inputs:
            msg = f"--input-format {name}={fmt}: stream {name} has no --input"
            raise UsageError(msg)
        if fmt.lower() not in FORMATS:
            msg = f"--input-format {name}: {unknown('format', fmt, FORMATS)}"
            raise UsageError(msg)
    out_names = _output_streams(spec)
    for name in outputs:
        if name not in out_names:
            if not out_names:
                msg = f"--output {name}: the app has no retrieval join or continuous query, so nothing to output"
                raise UsageError(msg)
            msg = f"--output: {unknown('output stream', name, out_names)}"
            raise UsageError(msg)
    for name, path in inputs.items():
        if _is_local(path) and not Path(path).is_dir():
            what = "does not exist" if not Path(path).exists() else "is not a directory"
            msg = f"--input {name}={path}: '{path}' {what} (give a directory of csv, json or parquet files)"
            raise UsageError(msg)


def _print_run_summary(
    console: Console,
    spec: AppSpec,
    result: RunResult,
    data_dir: Path,
    wall_seconds: float,
) -> None:
    for agg in spec.aggregations:
        t = result.aggregations.get(agg.name)
        table = Table(title=f"aggregation {agg.name}", title_justify="left", show_header=False, box=None)
        table.add_column(style="bold")
        table.add_column(justify="right")
        if t is None:
            console.print(f"aggregation {agg.name}: only read (stream {agg.source} has no --input)")
            continue
        table.add_row(
            "micro-batches", f"{t.batches:,}" + (f" (+{t.skipped} already committed)" if t.skipped else "")
        )
        table.add_row("events read", f"{t.events_read:,}")
        table.add_row("events aggregated", f"{t.events_aggregated:,}")
        if t.events_moved:
            table.add_row("events moved to another bucket", f"{t.events_moved:,}")
        table.add_row("events rejected", f"{t.events_rejected:,}")
        table.add_row("rows written", f"{t.rows_written:,}")
        if t.rows_purged:
            table.add_row("rows purged (retention)", f"{t.rows_purged:,}")
        table.add_row("latest event time (GMT)", format_ts(t.max_event_ts))
        table.add_row("time", f"{t.spark_seconds:.1f}s Spark + {t.store_seconds:.1f}s store")
        table.add_row("store", str(store_location(spec, agg, data_dir)))
        table.add_row("checkpoint", str(checkpoint_location(spec, agg, data_dir)))
        console.print(table)
    for out, n in sorted(result.outputs.items()):
        console.print(f"output stream {out}: {n:,} rows")
    for name, c in result.continuous.items():
        line = f"continuous query {name}: {c.rows_emitted:,} rows emitted, {c.events_late:,} late events"
        console.print(f"{line}, {c.events_rejected:,} events rejected ({c.batches:,} micro-batches)")
    if result.requests_rejected:
        console.print(f"requests rejected: {result.requests_rejected:,}")
    console.print(f"done in {wall_seconds:.1f}s")


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


@app.command()
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
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep watching the inputs for new files until Ctrl-C.")
    ] = False,
    max_files_per_trigger: Annotated[
        int | None,
        typer.Option("--max-files-per-trigger", min=1, help="At most N new files per micro-batch."),
    ] = None,
    master: Annotated[
        str | None,
        typer.Option("--master", help="Spark master \\[default: $TILTFRAME_SPARK_MASTER or local\\[*]]."),
    ] = None,
    shard_id: ShardOpt = None,
    config: ConfigOpt = None,
    rebuild: Annotated[
        bool,
        typer.Option("--rebuild", help="Drop what the store holds of the aggregations fed here and their "
                     "checkpoints, then read every input again (after the store was replaced or emptied)."),
    ] = False,
) -> None:
    """Aggregate the input streams into the store and run the continuous queries (everything available, or
    --follow until Ctrl-C)."""
    import time

    err = stderr_console()
    out = stdout_console()
    with handle_errors():
        spec = api.load_app(app_file)
        from tiltframe.spec.validate import check_runnable

        check_runnable(spec)
        inputs = _pairs(input_, "--input")
        formats = _pairs(input_format, "--input-format")
        outputs = _pairs(output, "--output")
        _check_run_options(spec, inputs, formats, outputs)
        from tiltframe.engine.shards import load_deployment

        deployment = load_deployment(shard_id, config)
        directory = _data_dir(data_dir)
        if not inputs:
            err.print("note: no --input given; the aggregations receive no events")
        fed = {spec.input_stream(name) for name in inputs}
        for agg in spec.aggregations:
            if agg.source not in fed and inputs:
                err.print(
                    f"note: stream {agg.source} has no --input; aggregation {agg.name} receives no events"
                )

        from tiltframe.engine.session import get_session
        from tiltframe.engine.sinks import sink_for
        from tiltframe.engine.sources import FileInput

        file_inputs = {
            name: FileInput(
                str(Path(path).resolve()) if _is_local(path) else path,
                formats[name].lower() if name in formats else None,
                max_files_per_trigger,
            )
            for name, path in inputs.items()
        }
        sinks = {name: sink_for(path) for name, path in outputs.items()}
        err.print(f"starting Spark ({master or 'default master'}) ...", style="dim")
        spark = get_session(master)
        started = time.monotonic()
        progress = RunProgress(err, [a.name for a in spec.aggregations], follow=follow)
        with progress:
            handle = api.start(
                spec,
                file_inputs,
                data_dir=directory,
                spark=spark,
                follow=follow,
                outputs=sinks,
                on_batch=progress.on_batch,
                max_files_per_trigger=max_files_per_trigger,
                shard_id=deployment.shard_id,
                partition_by_id=deployment.partition_by_id,
                rebuild=rebuild,
            )
            try:
                result, interrupted = wait_interruptibly(handle, progress)
            finally:
                handle.close()
        if interrupted:
            err.print("stopped by Ctrl-C")
        _print_run_summary(out, spec, result, directory, time.monotonic() - started)


# --- query --------------------------------------------------------------------------------------------


def _cell(value: Any) -> str:
    import math

    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, float):
        text = f"{value:.10g}"
        return text if any(ch in text for ch in ".einf") else f"{text}.0"
    return str(value)


def records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """Rows as JSON-ready dicts: plain numbers, NaN as null."""
    return json.loads(frame.to_json(orient="records", double_precision=15))


def result_table(frame: pd.DataFrame, *, zone: str = "UTC", title: str | None = None) -> Table:
    """A rich table of a query answer; AGG_TIMESTAMP also shown as a date in the aggregation's zone."""
    label = "time (GMT)" if zone.upper() in ("UTC", "GMT") else f"time ({zone})"
    table = Table(title=title, title_justify="left")
    columns: list[str] = []
    for c in frame.columns:
        numeric = frame[c].dtype.kind in "iuf"
        table.add_column(str(c), justify="right" if numeric else "left")
        columns.append(str(c))
        if c == "AGG_TIMESTAMP":
            table.add_column(label)
    for rec in frame.itertuples(index=False):
        cells: list[str] = []
        for c, v in zip(columns, rec, strict=True):
            cells.append(_cell(v))
            if c == "AGG_TIMESTAMP":
                cells.append(format_ts(int(v), zone) if v is not None else "")
        table.add_row(*cells)
    return table


@app.command()
def query(
    app_file: AppArg,
    text: Annotated[
        str,
        typer.Argument(
            metavar="QUERY",
            help='A retrieval: from Agg within "2024-01-** **:**:**" per "days" select AGG_TIMESTAMP, total; '
            "or SELECT ... FROM <table> over a pre-aggregated table",
        ),
    ],
    fmt: Annotated[str, typer.Option("--format", help="table, csv or json (one JSON array).")] = "table",
    data_dir: DataDirOpt = None,
) -> None:
    """Answer an on-demand retrieval from the store (no Spark needed)."""
    with handle_errors():
        if fmt not in ("table", "csv", "json"):
            msg = f"--format: {unknown('format', fmt, ['table', 'csv', 'json'])}"
            raise UsageError(msg)
        spec = api.load_app(app_file)
    with handle_errors("query"):
        from tiltframe.lang import parse_query
        from tiltframe.spec.validate import validate_query

        zone = spec.timezone or "UTC"
        if text.lstrip()[:6].lower() == "select":  # SQL over a pre-aggregated table
            frame = api.select(spec, text, data_dir=_data_dir(data_dir))
        else:
            q = parse_query(text, aggregations=[a.name for a in spec.aggregations])
            validate_query(spec, q)
            frame = api.query(spec, q, data_dir=_data_dir(data_dir))
            zone = spec.zone_of(spec.aggregation(q.aggregation))
        if fmt == "json":
            typer.echo(json.dumps(records(frame), indent=2))
        elif fmt == "csv":
            typer.echo(frame.to_csv(index=False), nl=False)
        else:
            stdout_console().print(result_table(frame, zone=zone))
            stderr_console().print(f"{len(frame):,} rows", style="dim")


# --- inspect ------------------------------------------------------------------------------------------


@app.command()
def inspect(
    app_file: AppArg,
    data_dir: DataDirOpt = None,
    fmt: Annotated[str, typer.Option("--format", help="table or json.")] = "table",
    rejected_rows: Annotated[
        int, typer.Option("--rejected", min=0, help="How many of the latest rejected events to show.")
    ] = 5,
) -> None:
    """Show each aggregation's tables, row counts, time range, event counts and latest rejected events."""
    with handle_errors():
        if fmt not in ("table", "json"):
            msg = f"--format: {unknown('format', fmt, ['table', 'json'])}"
            raise UsageError(msg)
        spec = api.load_app(app_file)
        directory = _data_dir(data_dir)
        infos = api.inspect(spec, data_dir=directory)
        rejected = {
            agg.name: api.rejected(spec, agg.name, data_dir=directory, limit=rejected_rows)
            for agg in spec.aggregations
        }
        if fmt == "json":
            docs = []
            for agg, info in zip(spec.aggregations, infos, strict=True):
                doc = dataclasses.asdict(info)
                doc["rejected_by_reason"] = [{"reason": r, "events": n} for r, n in info.rejected_by_reason]
                for t in doc["tables"]:
                    t["first_bucket_gmt"] = _ts_or_none(t["first_bucket"])
                    t["last_bucket_gmt"] = _ts_or_none(t["last_bucket"])
                doc["min_event_time_gmt"] = _ts_or_none(info.min_event_ts)
                doc["max_event_time_gmt"] = _ts_or_none(info.max_event_ts)
                doc["store"] = str(store_location(spec, agg, directory))
                doc["latest_rejected"] = records(rejected[agg.name])
                docs.append(doc)
            typer.echo(json.dumps(docs, indent=2))
            return
        out = stdout_console()
        for agg, info in zip(spec.aggregations, infos, strict=True):
            _print_info(out, spec, agg, info, rejected[agg.name], directory)


def _ts_or_none(ms: int | None) -> str | None:
    return format_ts(ms) if ms is not None else None


def _print_info(
    out: Console, spec: AppSpec, agg: AggregationSpec, info: Any, rejected: pd.DataFrame, data_dir: Path
) -> None:
    out.rule(f"[bold]{info.name}[/] (from {agg.source}, zone {info.zone}, spec {info.spec_hash})")
    out.print(f"store: {store_location(spec, agg, data_dir)}")
    if info.shards:
        out.print(f"shards: {', '.join(info.shards)} (rows merged on read)")
    tables = Table(title="tables", title_justify="left")
    for name, justify in (
        ("table", "left"),
        ("per", "left"),
        ("rows", "right"),
        ("first bucket (GMT)", "left"),
        ("last bucket (GMT)", "left"),
    ):
        tables.add_column(name, justify=justify)  # type: ignore[arg-type]
    for t in info.tables:
        tables.add_row(
            t.table, t.granularity, f"{t.rows:,}", format_ts(t.first_bucket), format_ts(t.last_bucket)
        )
    out.print(tables)
    counts = Table(show_header=False, box=None)
    counts.add_column(style="bold")
    counts.add_column(justify="right")
    counts.add_row("late events", Lateness.of(agg).describe())
    counts.add_row("retention", Retention.of(agg).describe(agg))
    counts.add_row("micro-batches committed", f"{info.batches:,}")
    counts.add_row("events read", f"{info.events_read:,}")
    counts.add_row("events aggregated (own bucket)", f"{info.events_aggregated:,}")
    counts.add_row("events moved (another bucket)", f"{info.events_moved:,}")
    counts.add_row("events rejected", f"{info.events_rejected:,}")
    counts.add_row("first event (GMT)", format_ts(info.min_event_ts))
    counts.add_row("last event (GMT)", format_ts(info.max_event_ts))
    out.print(counts)
    if info.purges:
        purged = Table(title="purged", title_justify="left")
        for column in ("table", "keeps buckets from (GMT)", "rows purged", "last purge (GMT)"):
            purged.add_column(column, justify="right" if column == "rows purged" else "left")
        for p in info.purges:
            purged.add_row(p.table, format_ts(p.purged_before), f"{p.rows_purged:,}",
                           format_ts(p.purged_at))
        out.print(purged)
    if info.recorded_by_kind:
        kinds = Table(title="recorded events by kind", title_justify="left")
        kinds.add_column("kind")
        kinds.add_column("events", justify="right")
        for kind, n in info.recorded_by_kind:
            kinds.add_row(kind, f"{n:,}")
        out.print(kinds)
    if info.rejected_by_reason:
        reasons = Table(title="rejected by reason", title_justify="left")
        reasons.add_column("reason", overflow="fold")
        reasons.add_column("events", justify="right")
        for reason, n in info.rejected_by_reason:
            reasons.add_row(reason, f"{n:,}")
        out.print(reasons)
    if not rejected.empty:
        latest = Table(title=f"latest {len(rejected)} rejected or moved events", title_justify="left")
        import pandas as pd  # only here: the CLI starts without it

        rejected = rejected.assign(event_time=[_ts_or_none(None if pd.isna(v) else int(v))
                                               for v in rejected["event_timestamp"]])
        cols = [c for c in ("batch_id", "kind", "reason", "event_time", "raw") if c in rejected.columns]
        for c in cols:
            latest.add_column(c, overflow="fold", max_width=90 if c == "raw" else None)
        for rec in rejected[cols].itertuples(index=False):
            latest.add_row(*(_cell(v) for v in rec))
        out.print(latest)


# --- purge --------------------------------------------------------------------------------------------


@app.command()
def purge(
    app_file: AppArg,
    aggregation: Annotated[
        str | None, typer.Option("--aggregation", "-a", help="Purge only this aggregation.")
    ] = None,
    data_dir: DataDirOpt = None,
) -> None:
    """Purge now what the retention periods no longer keep (measured from the latest event time)."""
    with handle_errors():
        spec = api.load_app(app_file)
        results = api.purge(spec, aggregation, data_dir=_data_dir(data_dir))
    from tiltframe.store.layout import AggregationLayout

    out = stdout_console()
    for name, result in results.items():
        agg = spec.aggregation(name)
        if result is None:
            out.print(f"{name}: purging is off (@purge(enable='false')); nothing purged")
            continue
        if result.latest_event_ts is None:
            out.print(f"{name}: no events yet; nothing purged")
            continue
        table = Table(title=f"{name}: purged (latest event {format_ts(result.latest_event_ts)} GMT)",
                      title_justify="left")
        for column, justify in (("table", "left"), ("keeps buckets from (GMT)", "left"), ("rows deleted", "right")):
            table.add_column(column, justify=justify)  # type: ignore[arg-type]
        layout = AggregationLayout.of(spec, name)
        for g in agg.granularities:
            if g in result.before:
                table.add_row(layout.table_name(g), format_ts(result.before[g]), f"{result.deleted[g]:,}")
            else:
                table.add_row(layout.table_name(g), "all (kept forever)", "0")
        out.print(table)


# --- insert -------------------------------------------------------------------------------------------


@app.command()
def insert(
    app_file: AppArg,
    table: Annotated[str, typer.Argument(help="The table to insert into (define table ...).")],
    path: Annotated[Path, typer.Argument(help="A .csv, .json/.jsonl or .parquet file, or a folder of them.")],
    data_dir: DataDirOpt = None,
    no_preaggregation: Annotated[
        bool, typer.Option("--no-preaggregation", help="Store each row as it is (EventQL's INSERT_NOPREAGGR).")
    ] = False,
    master: Annotated[str | None, typer.Option("--master", help="Spark master URL.")] = None,
) -> None:
    """Insert rows into a pre-aggregated table: spread over its workers and pre-aggregated per interval."""
    with handle_errors():
        spec = api.load_app(app_file)
        spec.table(table)
        if not path.exists():
            msg = f"'{path}' does not exist"
            raise UsageError(msg)
        from tiltframe.engine.session import get_session

        totals = api.insert(spec, table, path, data_dir=_data_dir(data_dir), spark=get_session(master),
                            preaggregate=not no_preaggregation)
    stdout_console().print(f"{table}: {totals.events_read:,} rows read, {totals.events_aggregated:,} inserted, "
                           f"{totals.events_rejected:,} rejected (kept with their reasons; tiltframe inspect)")


@app.command()
def compact(
    app_file: AppArg,
    table: Annotated[str | None, typer.Option("--table", "-t", help="Compact only this table.")] = None,
    data_dir: DataDirOpt = None,
) -> None:
    """Merge the partial rows (one per worker or bypassed row) of the closed intervals of pre-aggregated
    tables into one row per interval and dimension values; queries answer the same."""
    with handle_errors():
        spec = api.load_app(app_file)
        removed = api.compact(spec, table, data_dir=_data_dir(data_dir))
    out = stdout_console()
    if not removed:
        out.print("the app has no pre-aggregated table; nothing to compact")
    for name, rows in removed.items():
        out.print(f"{name}: {rows:,} partial rows merged away")


# --- migrate ------------------------------------------------------------------------------------------


@app.command()
def migrate(app_file: AppArg, data_dir: DataDirOpt = None, shard_id: ShardOpt = None, config: ConfigOpt = None) -> None:
    """Upgrade stored tables to what the app needs: tables of an aggregation now partitioned by shard gain
    a SHARD_ID key column, their rows becoming this deployment's shard's; a pre-aggregated table follows its
    changed definition.  Safe to run again."""
    from tiltframe.engine.shards import load_deployment

    with handle_errors():
        spec = api.load_app(app_file)
        deployment = load_deployment(shard_id, config)
        changed = api.migrate(spec, data_dir=_data_dir(data_dir), shard_id=deployment.shard_id,
                              partition_by_id=deployment.partition_by_id)
    out = stdout_console()
    if not changed:
        out.print("no aggregation is partitioned by shard and there is no pre-aggregated table; nothing to migrate")
    defined_tables = {t.name for t in spec.tables}
    for name, changes in changed.items():
        if not changes:
            out.print(f"{name}: up to date")
        elif name in defined_tables:  # the table's changes, in words
            out.print(f"{name}: {'; '.join(changes)}")
        else:
            out.print(f"{name}: added SHARD_ID to {', '.join(changes)} (existing rows: shard {deployment.shard_id})")


# --- validate -----------------------------------------------------------------------------------------


@app.command()
def validate(app_file: AppArg) -> None:
    """Parse and check an app (and that this release can run it); list its streams, aggregations, queries."""
    with handle_errors(str(app_file)):
        spec = api.load_app(app_file)
        from tiltframe.spec.validate import check_runnable
        from tiltframe.store.layout import AggregationLayout

        check_runnable(spec)
    out = stdout_console()
    out.print(f"[green]ok[/]: {app_file}")
    streams = Table(title="streams", title_justify="left")
    streams.add_column("stream")
    streams.add_column("attributes")
    for s in spec.streams:
        streams.add_row(s.name, ", ".join(f"{a.name} {a.type.value}" for a in s.attributes))
    out.print(streams)
    aggs = Table(title="aggregations", title_justify="left")
    for c in ("aggregation", "from", "group by", "by", "every", "tables"):
        aggs.add_column(c)
    for agg in spec.aggregations:
        layout = AggregationLayout.of(spec, agg.name)
        aggs.add_row(
            agg.name,
            agg.source,
            ", ".join(agg.group_by) or "-",
            agg.time_attribute or "arrival time",
            ", ".join(str(g) for g in agg.granularities),
            "\n".join(layout.table_name(g) for g in agg.granularities),
        )
    out.print(aggs)
    if spec.queries:
        queries = Table(title="queries", title_justify="left")
        for c in ("#", "from", "aggregation", "within", "per", "insert into"):
            queries.add_column(c)
        for i, q in enumerate(spec.queries):
            queries.add_row(
                str(i),
                q.request_stream or "(on demand)",
                q.aggregation,
                ", ".join(str(w) for w in q.within),
                str(q.per),
                q.insert_into or "-",
            )
        out.print(queries)


# --- demo ---------------------------------------------------------------------------------------------


@app.command()
def demo(
    events: Annotated[
        int, typer.Option("--events", "-n", min=100, help="How many trades to generate.")
    ] = 1_500_000,
    data_dir: DataDirOpt = None,
    days: Annotated[
        int, typer.Option("--days", min=1, max=3650, help="Days of trading, from 2023-11-15.")
    ] = 92,
    files: Annotated[int, typer.Option("--files", min=1, help="Number of input files.")] = 20,
    files_per_trigger: Annotated[
        int, typer.Option("--max-files-per-trigger", min=1, help="Input files per micro-batch.")
    ] = 4,
    master: Annotated[str | None, typer.Option("--master", help="Spark master URL.")] = None,
) -> None:
    """Generate ~3 months of trades, aggregate them every sec ... year, and query the rollups."""
    from tiltframe.demo import run_demo

    with handle_errors("demo"):
        run_demo(
            events=events,
            data_dir=_data_dir(data_dir),
            days=days,
            files=files,
            files_per_trigger=files_per_trigger,
            master=master,
            out=stdout_console(),
            err=stderr_console(),
        )


def main() -> None:
    """Console-script entry point (``tiltframe``, ``python -m tiltframe``, ``spark-submit``)."""
    app()
