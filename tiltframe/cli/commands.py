"""The ``tiltframe`` command line: run, query, inspect and validate apps, and the demo.

Every command is one call into :mod:`tiltframe.api`, so the CLI and the library behave the same.  Data
(query answers, summaries) goes to stdout; progress and errors go to stderr, a failure in one line first
(:mod:`tiltframe.cli.failing`), Spark's own log to ``<data-dir>/logs/spark.log`` (:mod:`tiltframe.cli.logs`).
Exit codes: 0 success, 1 runtime or data error, 2 usage error or invalid definition.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from tiltframe import api, lifecycle
from tiltframe.cli import logs
from tiltframe.cli.failing import handle_errors
from tiltframe.cli.group import TiltframeGroup, configure_logging
from tiltframe.cli.inspection import info_document, print_info
from tiltframe.cli.options import (
    AppArg,
    CheckpointDirOpt,
    ConfigOpt,
    DataDirOpt,
    ShardOpt,
    check_config_file,
    check_format,
    check_name,
    pairs,
    resolve_data_dir,
)
from tiltframe.cli.output import stderr_console, stdout_console
from tiltframe.cli.querying import query
from tiltframe.cli.replaying import replay
from tiltframe.cli.running import run
from tiltframe.cli.serving import serve
from tiltframe.cli.validating import print_changes, validate
from tiltframe.cli.verifying import rebuild, verify
from tiltframe.errors import UsageError
from tiltframe.retrieval.formats import to_json
from tiltframe.timeutil.parse import format_ts

app = typer.Typer(
    name="tiltframe",
    help="Incremental, multi-granularity rollups of event streams on Apache Spark (SiddhiQL aggregations).\n\n"
    "The global options --debug, -v/--verbose and --log-format may also follow the command.",
    cls=TiltframeGroup,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
)


# --- global options -----------------------------------------------------------------------------------


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        typer.echo(f"tiltframe {version('tiltframe')}")
        raise typer.Exit


@app.callback()
def _main(
    debug: Annotated[
        bool, typer.Option("--debug", help="Log tiltframe's DEBUG lines and show tracebacks on errors.")
    ] = False,
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose", "-v",
            help="Log what tiltframe does (INFO) and Spark's log (WARN) on stderr instead of "
            "<data-dir>/logs/spark.log.",
        ),
    ] = False,
    log_format: Annotated[
        str,
        typer.Option("--log-format", metavar="text|json",
                     help="text, or json: one JSON object per line, with one line per micro-batch."),
    ] = "text",
    _show_version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version and exit.")
    ] = False,
) -> None:
    """The global options (each command takes them too: :mod:`tiltframe.cli.group`)."""
    configure_logging(debug, verbose, log_format)


# --- run, serve ----------------------------------------------------------------------------------------


app.command()(run)
app.command()(serve)


# --- query --------------------------------------------------------------------------------------------


app.command()(query)


# --- inspect ------------------------------------------------------------------------------------------


@app.command()
def inspect(
    app_file: AppArg,
    aggregation: Annotated[
        str | None, typer.Option("--aggregation", "-a", metavar="NAME", help="Inspect only this aggregation.")
    ] = None,
    data_dir: DataDirOpt = None,
    checkpoint_dir: CheckpointDirOpt = None,
    fmt: Annotated[str, typer.Option("--format", metavar="table|json", help="table, or json (one array).")] = "table",
    rejected_rows: Annotated[
        int, typer.Option("--rejected", min=0, help="How many of the latest rejected events to show.")
    ] = 5,
) -> None:
    """Show each aggregation's tables, row counts, time range, event counts and latest rejected events
    (or only one aggregation's, with --aggregation).

    Piped or redirected, the tables are laid out for $COLUMNS columns, else 100."""
    with handle_errors():
        check_format(fmt, ("table", "json"))
        spec = api.load_app(app_file)
        check_name("--aggregation", "aggregation", aggregation, [a.name for a in spec.aggregations])
        aggs = spec.aggregations_named(aggregation)
        directory = resolve_data_dir(data_dir)
        infos = api.inspect(spec, aggregation, data_dir=directory)
        rejected = {agg.name: api.rejected(spec, agg.name, data_dir=directory, limit=rejected_rows) for agg in aggs}
        from tiltframe.engine.inputs.filesystems import checkpoint_root
        from tiltframe.engine.inputs.hadoop_paths import HadoopPath

        if isinstance(checkpoint_root(checkpoint_dir, directory), HadoopPath):  # read through Spark
            logs.start_spark(None, directory)
        changed = api.changed_files(spec, aggregation, data_dir=directory, checkpoint_dir=checkpoint_dir)
        if fmt == "json":
            docs = [info_document(spec, agg, info, rejected[agg.name], directory, changed[agg.name])
                    for agg, info in zip(aggs, infos, strict=True)]
            typer.echo(to_json(docs))
            return
        out = stdout_console()
        pending = lifecycle.pending_changes(spec, data_dir=directory)
        for agg, info in zip(aggs, infos, strict=True):
            print_info(out, spec, agg, info, rejected[agg.name], directory, changed[agg.name])
            steps = pending.get(agg.name)
            if steps:
                out.print(f"the app's definition of {agg.name} is not migrated yet (shown: what the store holds); "
                          f"tiltframe migrate APP -d DIR would do:", *(f"  - {s}" for s in steps), sep="\n")


# --- purge --------------------------------------------------------------------------------------------


@app.command()
def purge(
    app_file: AppArg,
    aggregation: Annotated[
        str | None, typer.Option("--aggregation", "-a", metavar="NAME", help="Purge only this aggregation.")
    ] = None,
    data_dir: DataDirOpt = None,
) -> None:
    """Purge now what the retention periods no longer keep (measured from the latest event time)."""
    with handle_errors():
        spec = api.load_app(app_file)
        check_name("--aggregation", "aggregation", aggregation, [a.name for a in spec.aggregations])
        results = api.purge(spec, aggregation, data_dir=resolve_data_dir(data_dir))
    from tiltframe.aggregates.layout import AggregationLayout

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
    table: Annotated[str, typer.Argument(metavar="TABLE", help="The table to insert into (define table ...).")],
    path: Annotated[
        Path, typer.Argument(metavar="PATH", help="A .csv, .json/.jsonl or .parquet file, or a folder of them.")
    ],
    data_dir: DataDirOpt = None,
    no_preaggregation: Annotated[
        bool, typer.Option("--no-preaggregation", help="Store each row as it is (EventQL's INSERT_NOPREAGGR).")
    ] = False,
    master: Annotated[str | None, typer.Option("--master", help="Spark master URL.")] = None,
) -> None:
    """Insert rows into a pre-aggregated table: spread over its workers and pre-aggregated per interval."""
    with handle_errors():
        spec = api.load_app(app_file)
        check_name("TABLE", "table", table, [t.name for t in spec.tables])
        if not path.exists():
            msg = f"'{path}' does not exist (give a .csv, .json/.jsonl or .parquet file, or a folder of them)"
            raise UsageError(msg)
        directory = resolve_data_dir(data_dir)
        spark = logs.start_spark(master, directory)
        totals = api.insert(spec, table, path, data_dir=directory, spark=spark, preaggregate=not no_preaggregation)
    stdout_console().print(f"{table}: {totals.events_read:,} rows read, {totals.events_aggregated:,} inserted, "
                           f"{totals.events_rejected:,} rejected (kept with their reasons; tiltframe inspect)")


@app.command()
def compact(
    app_file: AppArg,
    table: Annotated[
        str | None, typer.Option("--table", "-t", metavar="NAME", help="Compact only this table.")
    ] = None,
    data_dir: DataDirOpt = None,
) -> None:
    """Merge the partial rows (one per worker or bypassed row) of the closed intervals of pre-aggregated
    tables into one row per interval and dimension values; queries answer the same."""
    with handle_errors():
        spec = api.load_app(app_file)
        check_name("--table", "table", table, [t.name for t in spec.tables])
        removed = api.compact(spec, table, data_dir=resolve_data_dir(data_dir))
    out = stdout_console()
    if not removed:
        out.print("the app has no pre-aggregated table; nothing to compact")
    for name, rows in removed.items():
        out.print(f"{name}: {rows:,} partial rows merged away")


# --- migrate ------------------------------------------------------------------------------------------


@app.command()
def migrate(
    app_file: AppArg, data_dir: DataDirOpt = None, shard_id: ShardOpt = None, config: ConfigOpt = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only print the plan; change nothing.")] = False,
    input_: Annotated[
        list[str] | None,
        typer.Option("--input", "-i", metavar="STREAM=PATH",
                     help="The inputs as given to run: measures added get their history from them (once they "
                          "are found to hold what the store holds); else they read NULL before they are complete."),
    ] = None,
    checkpoint_dir: CheckpointDirOpt = None,
) -> None:
    """Upgrade stored tables to what the app needs (a pipeline of the earlier definition still running
    stops at its next batch): an aggregation whose definition changed follows it (measures and levels
    added or removed; with --input, a changed zone or key rebuilt from the inputs beside the stored rollup
    and swapped in; its checkpoint goes on at the next run); tables of an aggregation now partitioned by
    shard gain a SHARD_ID key column, their rows becoming this deployment's shard's; a pre-aggregated table
    follows its changed definition; sketch states stored in an older format are rewritten in the current
    one.  Safe to run again."""
    from tiltframe.engine.rollup.shards import load_deployment

    with handle_errors():
        spec = api.load_app(app_file)
        check_config_file(config)
        deployment = load_deployment(shard_id, config)
        directory = resolve_data_dir(data_dir)
        inputs = pairs(input_, "--input")
        spark = logs.start_spark(None, directory) if inputs and not dry_run else None
        changed = lifecycle.migrate(spec, data_dir=directory, shard_id=deployment.shard_id,
                              partition_by_id=deployment.partition_by_id, dry_run=dry_run, inputs=inputs,
                              checkpoint_dir=checkpoint_dir, spark=spark)
    out = stdout_console()
    if not changed:
        out.print("the app defines no aggregation and no table; nothing to migrate")
    print_changes(out, changed, "would change" if dry_run else "changed")


# --- validate -----------------------------------------------------------------------------------------


app.command()(validate)
app.command()(replay)
app.command()(verify)
app.command()(rebuild)


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
    from tiltframe.cli.demo import run_demo

    with handle_errors("demo"):
        directory = resolve_data_dir(data_dir)
        logs.start_spark(master, directory)  # before the demo asks for it: Spark's log goes to its file
        run_demo(
            events=events,
            data_dir=directory,
            days=days,
            files=files,
            files_per_trigger=files_per_trigger,
            master=master,
            out=stdout_console(),
            err=stderr_console(),
        )


def main() -> None:
    """Console-script entry point (``tiltframe``, ``python -m tiltframe``, ``spark-submit``)."""
    from tiltframe.cli.process_exit import finish

    try:
        app()
    except SystemExit as done:
        code = done.code
    else:
        code = 0
    finish(code)
