"""``tiltframe query``: an answer from the store as a table, CSV, JSON, JSON Lines or Parquet."""

from __future__ import annotations

import io
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from tiltframe import api
from tiltframe.cli.failing import handle_errors
from tiltframe.cli.options import AppArg, DataDirOpt, check_format, resolve_data_dir
from tiltframe.cli.output import result_table, stderr_console, stdout_console
from tiltframe.errors import UsageError
from tiltframe.retrieval.formats import csv_text, records, to_json

if TYPE_CHECKING:
    import pandas as pd

#: The values of ``query --format``; all but ``table`` can go to ``--output``.
FORMATS = ("table", "csv", "json", "jsonl", "parquet")


def jsonl_text(frame: pd.DataFrame) -> str:
    """One JSON object per row and line, its values as ``--format json`` gives them."""
    return "".join(to_json(row, indent=None) + "\n" for row in records(frame))


def parquet_bytes(frame: pd.DataFrame) -> bytes:
    """The answer as a Parquet file: longs int64 (null where NULL), doubles float64 (NULL, or NaN in the
    frame, as null), ``AGG_TIME`` a timestamp in milliseconds with its zone, strings utf8 (a column of
    NULLs only as well)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.Schema.from_pandas(frame, preserve_index=False)
    for i, field in enumerate(schema):
        if pa.types.is_null(field.type):  # no value to tell the type by: the answers' untyped columns are text
            schema = schema.set(i, field.with_type(pa.string()))
    table = pa.Table.from_pandas(frame, schema=schema, preserve_index=False)
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()


def check_output(fmt: str, output: Path | None) -> None:
    """Where the answer goes can work: ``--output`` with a file format and a writable place, Parquet
    without it only to a file or pipe."""
    if output is None:
        if fmt == "parquet" and sys.stdout.isatty():
            msg = ("--format parquet writes binary: give --output FILE, or send stdout to a file or pipe "
                   "(tiltframe query ... --format parquet > answer.parquet)")
            raise UsageError(msg)
        return
    if fmt == "table":
        msg = f"--output {output}: give --format csv, json, jsonl or parquet (the table is for the terminal)"
        raise UsageError(msg)
    if output.is_dir():
        msg = f"--output {output} is a directory; give a file name"
        raise UsageError(msg)
    if not output.parent.is_dir():
        msg = f"--output {output}: folder '{output.parent}' does not exist"
        raise UsageError(msg)


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
    fmt: Annotated[
        str,
        typer.Option("--format", metavar="|".join(FORMATS),
                     help="table; csv; json (one JSON array); jsonl (JSON Lines: one JSON object per row, "
                     "values as in json); parquet (binary: needs --output, or stdout to a file or pipe)."),
    ] = "table",
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", metavar="FILE", show_default=False,
                     help="Write the answer to FILE (replaced if it exists) instead of stdout; any --format "
                     "but table."),
    ] = None,
    data_dir: DataDirOpt = None,
) -> None:
    """Answer an on-demand retrieval from the store (no Spark needed).

    The table goes to the terminal (its row count to stderr); csv, json and jsonl go to stdout or
    --output FILE; parquet goes to --output FILE, or to stdout only when stdout is not a terminal.
    Parquet keeps the answer's types: AGG_TIMESTAMP and other longs as int64, doubles as float64,
    AGG_TIME as a timestamp with its zone, NULL as null.
    """
    with handle_errors():
        check_format(fmt, FORMATS)
        check_output(fmt, output)
        spec = api.load_app(app_file)
        directory = resolve_data_dir(data_dir)
    with handle_errors("query"):
        from tiltframe.lang import parse_retrieval

        zone = spec.timezone or "UTC"
        if text.lstrip()[:6].lower() == "select":  # SQL over a pre-aggregated table
            frame = api.select(spec, text, data_dir=directory)
        else:
            q = parse_retrieval(text, spec)  # sides resolved: unqualified names, stream queries refused
            frame = api.query(spec, q, data_dir=directory)
            zone = spec.zone_of(spec.aggregation(q.aggregation))
        if fmt == "table":
            stdout_console(wide=True).print(result_table(frame, zone=zone))
            stderr_console().print(f"{len(frame):,} rows", style="dim")
            return
        if fmt == "parquet":
            data = parquet_bytes(frame)
        elif fmt == "json":
            data = (to_json(records(frame)) + "\n").encode("utf-8")
        elif fmt == "jsonl":
            data = jsonl_text(frame).encode("utf-8")
        else:
            data = csv_text(frame).encode("utf-8")
    with handle_errors(f"--output {output}"):
        if output is not None:
            output.write_bytes(data)
            stderr_console().print(f"{len(frame):,} rows written to {output}", style="dim", markup=False)
        elif fmt == "parquet":
            sys.stdout.buffer.write(data)
            sys.stdout.flush()
        else:
            typer.echo(data.decode("utf-8"), nl=False)
