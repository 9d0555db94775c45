"""``tiltframe replay``: feed captured inputs through a query one at a time and print every output as a
JSON line, in emission order, the same on every run: for unit tests of a query and for captured traffic."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tiltframe import api
from tiltframe.cli.errors import handle_errors
from tiltframe.cli.output import stderr_console
from tiltframe.errors import NotSupportedYet, UsageError
from tiltframe.model.trickle import INPUT_PORT, TRICKLE_SUFFIX


def replay(
    query_file: Annotated[Path, typer.Argument(metavar="QUERY", help="The query file (.trickle).")],
    inputs: Annotated[
        list[str],
        typer.Argument(metavar="STREAM=FILE...",
                       help='The inputs of a stream, one per line: {"ingest_ns": N, "event": VALUE} for an event '
                            'arriving at N nanoseconds, {"tick": N} for a timer tick.'),
    ],
) -> None:
    """Replay inputs through a trickle query: each output on stdout as {"stream": NAME, "event": VALUE}; an
    input the query cannot take as {"stream": "err", "event": INPUT, "error": REASON} (the others go on).
    The counts go to stderr."""
    with handle_errors(str(query_file)):
        if query_file.suffix != TRICKLE_SUFFIX:
            msg = (f"'{query_file}': replay runs trickle queries ({TRICKLE_SUFFIX} files); the continuous queries of "
                   "SiddhiQL apps are not replayed yet")
            raise NotSupportedYet(msg)
        query = api.load_trickle(query_file)
        stream, path = _input(inputs)
        from tiltframe.engine.trickle.replay import QueryGraph, read_replay_file

        graph = QueryGraph(query)
        counts = {"inputs": 0, "outputs": 0, "errors": 0}
        for item in read_replay_file(path):
            counts["inputs"] += 1
            for output in graph.push(item):
                counts["errors" if output.error else "outputs"] += 1
                typer.echo(output.line())
    stderr_console().print(f"{counts['inputs']} inputs on {stream}, {counts['outputs']} outputs, "
                           f"{counts['errors']} inputs not taken (on err)", markup=False)


def _input(inputs: list[str]) -> tuple[str, Path]:
    if len(inputs) != 1 or "=" not in inputs[0]:
        msg = f"give the query's input as {INPUT_PORT}=FILE (one file of inputs), not {' '.join(inputs) or 'nothing'}"
        raise UsageError(msg)
    stream, _, path = inputs[0].partition("=")
    if stream != INPUT_PORT:
        msg = f"a trickle query reads the stream '{INPUT_PORT}', not '{stream}': give {INPUT_PORT}={path}"
        raise UsageError(msg)
    return stream, Path(path)
