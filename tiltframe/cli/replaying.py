"""``tiltframe replay``: feed captured inputs through a query one at a time and print every output as a
JSON line, in emission order, the same on every run: for unit tests of a query and for captured traffic.

A trickle query runs in this process, an input at a time; the continuous queries of a SiddhiQL app through
their processor in this process, each input a micro-batch, after Spark typed the events
(``engine.continuous.replay``)."""

from __future__ import annotations

import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated

import typer

from tiltframe import api
from tiltframe.cli import logs
from tiltframe.cli.failing import handle_errors
from tiltframe.cli.options import LangOpt, is_trickle, pairs
from tiltframe.cli.output import stderr_console
from tiltframe.errors import UsageError
from tiltframe.model.trickle import INPUT_PORT


def replay(
    query_file: Annotated[Path, typer.Argument(metavar="APP",
                                               help="A trickle query (.trickle) or an app with continuous queries.")],
    inputs: Annotated[
        list[str],
        typer.Argument(metavar="STREAM=FILE...",
                       help='The inputs of a stream, one per line: {"ingest_ns": N, "event": VALUE} for an event '
                            'arriving at N nanoseconds, {"tick": N} for a timer tick.'),
    ],
    master: Annotated[str | None, typer.Option(
        "--master", help="Spark master for an app's continuous queries \\[default: $TILTFRAME_SPARK_MASTER or "
                         "local\\[*]].")] = None,
    lang: LangOpt = None,
) -> None:
    """Replay inputs through a trickle query or an app's continuous queries: each output on stdout as
    {"stream": NAME, "event": VALUE} (an app's: the query's name); an input that cannot be taken as
    {"stream": "err", "event": INPUT, "error": REASON} (the others go on).  The counts go to stderr."""
    from tiltframe.engine.replay_inputs import Output, read_replay_file

    counts = {"inputs": 0, "outputs": 0, "errors": 0}

    def echo(outputs: Iterable[Output]) -> None:
        for output in outputs:
            counts["errors" if output.error else "outputs"] += 1
            typer.echo(output.line())

    with handle_errors(str(query_file)):
        given = pairs(inputs, "STREAM=FILE")
        if is_trickle(query_file, lang):
            from tiltframe.engine.trickle.graph_replay import QueryGraph

            query = api.load_trickle(query_file)
            if set(given) != {INPUT_PORT}:
                msg = (f"a trickle query reads the stream '{INPUT_PORT}': give {INPUT_PORT}=FILE (one file of inputs), "
                       f"not {' '.join(inputs) or 'nothing'}")
                raise UsageError(msg)
            graph = QueryGraph(query)
            for item in read_replay_file(Path(given[INPUT_PORT])):
                counts["inputs"] += 1
                echo(graph.push(item))
        else:
            from tiltframe.engine.continuous.replay import replay_app

            app = api.load_app(query_file)
            if not app.continuous:
                raise UsageError(f"'{query_file}' has no continuous query to replay")
            read = {stream: list(read_replay_file(Path(path))) for stream, path in given.items()}
            if not read:
                raise UsageError("give the inputs as STREAM=FILE (one file of inputs per stream)")
            counts["inputs"] = sum(len(items) for items in read.values())
            with tempfile.TemporaryDirectory(prefix="tiltframe-replay-log-") as logs_dir:
                echo(replay_app(app, read, logs.start_spark(master, Path(logs_dir))))
    stderr_console().print(f"{counts['inputs']} inputs, {counts['outputs']} outputs, "
                           f"{counts['errors']} on err (inputs not taken)", markup=False)
