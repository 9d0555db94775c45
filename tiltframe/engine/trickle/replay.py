"""A trickle query's graph fed one input at a time, as Tremor's own test harness runs it: events and timer
ticks in order, every output in emission order, the same on every run.

Selects chain through the streams they write: an output of a select goes at once to the selects reading its
stream (depth first; of several readers of one stream the one written last runs first, as in Tremor), and
to the caller when the stream is ``out``, ``err`` or one no select reads.  An input an expression cannot be
evaluated on stops there (outputs it already made stay) and comes out on ``err`` with the reason
(``{"stream": "err", "event": ..., "error": ...}``): nothing is dropped silently.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tiltframe.engine.trickle.select import SelectOperator
from tiltframe.errors import UsageError
from tiltframe.functions.trickle_values import TrickleRuntimeError
from tiltframe.model.trickle import INPUT_PORT, OUTPUT_PORTS, TrickleQuery


@dataclass(frozen=True)
class Output:
    """An output event of ``stream``; or, with ``error``, an input the query could not take (``event``: the
    input, on ``err``)."""

    stream: str
    event: Any
    error: str | None = None

    def line(self) -> str:
        """``{"stream": ..., "event": ...}`` (and ``"error"``) as one JSON line, keys sorted."""
        data = {"stream": self.stream, "event": self.event}
        if self.error is not None:
            data["error"] = self.error
        return json.dumps(data, separators=(",", ":"), sort_keys=True, ensure_ascii=False, allow_nan=True)


@dataclass(frozen=True)
class Tick:
    ns: int


@dataclass(frozen=True)
class Event:
    value: Any
    ingest_ns: int


@dataclass(frozen=True)
class BadLine:
    """A line of a replay file that is no input: it comes out on ``err`` with the reason, and replay goes on."""

    text: str
    reason: str


class QueryGraph:
    """The selects of a query and the streams between them."""

    def __init__(self, query: TrickleQuery) -> None:
        self.query = query
        self.operators = [SelectOperator(s, query) for s in query.selects]
        self.readers: dict[str, list[SelectOperator]] = {}
        for op in reversed(self.operators):
            self.readers.setdefault(op.select.source, []).append(op)

    def push(self, item: Event | Tick | BadLine) -> list[Output]:
        if isinstance(item, BadLine):
            return [Output("err", item.text, item.reason)]
        outputs: list[Output] = []
        try:
            if isinstance(item, Tick):
                for op in self.operators:
                    for out in op.on_tick(item.ns):
                        self._deliver(op.select.into, out, item.ns, outputs)
            else:
                self._deliver(INPUT_PORT, item.value, item.ingest_ns, outputs, source=True)
        except TrickleRuntimeError as exc:
            what = item.value if isinstance(item, Event) else {"tick": item.ns}
            outputs.append(Output("err", what, str(exc)))
        return outputs

    def _deliver(self, stream: str, event: Any, t: int, outputs: list[Output], *, source: bool = False) -> None:
        if not source and (stream in OUTPUT_PORTS or stream not in self.readers):
            outputs.append(Output(stream, event))  # out, err, or a stream no select reads: the caller's
            return
        for op in self.readers.get(stream, ()):
            for out in op.on_event(event, t):
                self._deliver(op.select.into, out, t, outputs)


def replay(query: TrickleQuery, inputs: Iterable[Event | Tick | BadLine]) -> Iterator[Output]:
    """Every output of ``inputs`` pushed through ``query`` in order."""
    graph = QueryGraph(query)
    for item in inputs:
        yield from graph.push(item)


def read_replay_file(path: Path) -> Iterator[Event | Tick | BadLine]:
    """The inputs of a replay file: lines ``{"ingest_ns": N, "event": VALUE}`` or ``{"tick": N}`` (blank lines
    skipped).  A line that is neither is a :class:`BadLine` naming the file and the line; a file that cannot
    be read is a usage error."""
    try:
        handle = path.open(encoding="utf-8-sig")
    except OSError as exc:
        msg = f"replay file '{path}' cannot be read: {exc.strerror or exc}"
        raise UsageError(msg) from None
    with handle:
        for number, line in enumerate(handle, start=1):
            if line.strip():
                yield _item(line, f"{path}, line {number}")


def _item(line: str, where: str) -> Event | Tick | BadLine:
    text = line.rstrip("\r\n")
    try:
        data = json.loads(line)
    except json.JSONDecodeError as exc:
        return BadLine(text, f"{where}: not JSON ({exc.msg} at column {exc.colno})")
    if isinstance(data, dict) and set(data) == {"tick"} and _whole(data["tick"]):
        return Tick(data["tick"])
    if isinstance(data, dict) and set(data) == {"ingest_ns", "event"} and _whole(data["ingest_ns"]):
        return Event(data["event"], data["ingest_ns"])
    shape = '{"ingest_ns": N, "event": VALUE} or {"tick": N} (N a whole number)'
    return BadLine(text, f"{where}: expected {shape}")


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
