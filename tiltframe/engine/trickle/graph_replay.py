"""A trickle query's graph fed one input at a time, as Tremor's own test harness runs it: events and timer
ticks in order, every output in emission order, the same on every run.

Selects chain through the streams they write: an output of a select goes at once to the selects reading its
stream (depth first; of several readers of one stream the one written last runs first, as in Tremor), and
to the caller when the stream is ``out``, ``err`` or one no select reads.  An input an expression cannot be
evaluated on stops there (outputs it already made stay) and comes out on ``err`` with the reason
(``{"stream": "err", "event": ..., "error": ...}``): nothing is dropped silently.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from tiltframe.engine.replay_inputs import BadLine, Event, Output, Tick
from tiltframe.engine.trickle.select_operator import SelectOperator
from tiltframe.functions.trickle_values import TrickleRuntimeError
from tiltframe.model.trickle import INPUT_PORT, OUTPUT_PORTS, TrickleQuery


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

    def deliver(self, stream: str, event: Any, t: int) -> list[Output]:
        """An output of a select on ``stream`` at time ``t``, through the selects that read it (a Spark run's
        selects after the first, on the driver): what comes out, and an error on ``err`` if one fails."""
        outputs: list[Output] = []
        try:
            self._deliver(stream, event, t, outputs)
        except TrickleRuntimeError as exc:
            outputs.append(Output("err", event, str(exc)))
        return outputs

    def tick_later_selects(self, ns: int) -> list[Output]:
        """A timer tick at ``ns`` for the selects that read another select's stream (a Spark run's selects after
        the first, on the driver; the first ones had it on the executors), in the query's order."""
        outputs: list[Output] = []
        try:
            for op in self.operators:
                if op.select.source != INPUT_PORT:
                    for out in op.on_tick(ns):
                        self._deliver(op.select.into, out, ns, outputs)
        except TrickleRuntimeError as exc:  # as in push: the tick stops there
            outputs.append(Output("err", {"tick": ns}, str(exc)))
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
