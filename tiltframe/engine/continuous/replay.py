"""Replay for the continuous queries of a SiddhiQL app: captured inputs fed through the queries on Spark one
at a time, with processing time set to each input's ingest time, every output in emission order.

Each input is one micro-batch, as a run that receives it alone would process it: the event's file is dropped
into the stream's folder with the clock moved to its ingest time, and every query processes what is available
(the event's micro-batch, then the clock's, carrying the new greatest event time: the windows the event closed
emit in the same step).  A timer tick moves the clock only (``PERIODIC``, ``TIMEOUT`` and arrival-time windows
emit on it).  The queries are ``ContinuousRun``\\ s with a hand-driven clock, the same code as ``tiltframe run``'s,
in a temporary folder: a replay is a real run, about a second per input.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from pyspark.sql import SparkSession

from tiltframe.engine.continuous.query import ContinuousRun
from tiltframe.engine.replay_inputs import BadLine, Event, Output, Tick
from tiltframe.engine.sinks import CallbackSink, rows_as_records
from tiltframe.engine.sources import FileInput, read_stream
from tiltframe.errors import NotSupportedYet, UsageError, unknown
from tiltframe.model.app import AppSpec


@dataclass(frozen=True)
class Fed:
    """One input of a stream (``stream`` None for a tick, which every query sees)."""

    stream: str | None
    item: Event | Tick | BadLine


def merged(inputs: Mapping[str, list[Event | Tick | BadLine]]) -> list[Fed]:
    """The inputs of several streams in one order: by time (ingest time or tick), then the order the streams
    are given in, then their order in the file; a bad line keeps its place after the input before it."""
    keyed = []
    for s_index, (stream, items) in enumerate(inputs.items()):
        at = 0
        for i_index, item in enumerate(items):
            at = item.ingest_ns if isinstance(item, Event) else item.ns if isinstance(item, Tick) else at
            keyed.append(((at, s_index, i_index), Fed(None if isinstance(item, Tick) else stream, item)))
    return [fed for _, fed in sorted(keyed, key=lambda k: k[0])]


class _Query:
    """One continuous query started with a hand-driven clock; what its last steps emitted, in order."""

    def __init__(self, app: AppSpec, index: int, inbox: Path, data: Path, spark: SparkSession, now: int) -> None:
        query = app.continuous[index]
        self.name = app.continuous_name(index)
        self.outputs: list[Output] = []
        events = read_stream(spark, FileInput(str(inbox), format="json"), app.stream(query.stream))
        self.run = ContinuousRun(app, query, events, CallbackSink(self._rows), data_dir=data, spark=spark,
                                 name=self.name, manual_clock=True, trigger_ms=10, buckets=1,
                                 records=CallbackSink(self._records))
        self.run.advance(now)
        self.run.start()

    def _rows(self, _stream: str, rows: pd.DataFrame) -> None:
        self.outputs.extend(Output(self.name, record) for record in rows_as_records(rows))

    def _records(self, _stream: str, frame: pd.DataFrame) -> None:
        for kind, reason, event in zip(frame["kind"], frame["reason"], frame["event"], strict=True):
            self.outputs.append(Output("err", _event(event), f"{self.name}: {kind}: {reason}"))

    def step(self, now_ms: int) -> list[Output]:
        self.run.advance(now_ms)
        self.run.process()
        made, self.outputs = self.outputs, []
        return made


def replay_app(app: AppSpec, inputs: Mapping[str, list[Event | Tick | BadLine]], spark: SparkSession
               ) -> Iterator[Output]:
    """Every output of the app's continuous queries over ``inputs`` (per input stream), in emission order: a
    step's outputs query by query (in the app's order), each query's rows then its late and rejected events
    (on ``err``, with the query's name and the reason)."""
    streams = {app.root_stream(q.stream) for q in app.continuous}
    for stream in inputs:
        if stream not in streams:
            raise UsageError(unknown("stream a continuous query reads", stream, streams))
    for i, q in enumerate(app.continuous):
        if q.stream != app.root_stream(q.stream):
            msg = (f"continuous query {app.continuous_name(i)} reads stream {q.stream}, which a stream query makes: "
                   "not replayed yet")
            raise NotSupportedYet(msg)
    feed = merged(inputs)
    first = next((f.item for f in feed if not isinstance(f.item, BadLine)), None)
    start = _ms(first) if first is not None else 0
    with tempfile.TemporaryDirectory(prefix="tiltframe-replay-") as work:
        root = Path(work)
        inboxes = {s: root / "in" / s for s in inputs}
        for folder in inboxes.values():
            folder.mkdir(parents=True)
        queries = [(q.stream, _Query(app, i, inboxes[q.stream], root / "data", spark, start))
                   for i, q in enumerate(app.continuous) if q.stream in inboxes]
        try:
            for n, fed in enumerate(feed):
                if isinstance(fed.item, BadLine):
                    yield Output("err", fed.item.text, fed.item.reason)
                    continue
                if isinstance(fed.item, Event):
                    assert fed.stream is not None
                    _drop(inboxes[fed.stream], fed.item.value, n)
                for stream, query in queries:
                    if fed.stream is None or stream == fed.stream:
                        yield from query.step(_ms(fed.item))
        finally:
            for _, query in queries:
                query.run.stop()


def _ms(item: Event | Tick | BadLine) -> int:
    return (item.ingest_ns if isinstance(item, Event) else item.ns if isinstance(item, Tick) else 0) // 1_000_000


def _drop(folder: Path, value: Any, n: int) -> None:
    """The event as a one-line JSON file, written under a hidden name and renamed: Spark sees all or nothing."""
    tmp = folder / f".{n:08d}.tmp"
    tmp.write_text(json.dumps(value, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, folder / f"{n:08d}.jsonl")


def _event(text: Any) -> Any:
    if not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text
