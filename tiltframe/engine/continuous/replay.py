"""Replay for the continuous queries of a SiddhiQL app: captured inputs fed through each query's processor one
at a time, with processing time set to each input's ingest time, every output in emission order.

Each input is one micro-batch, as a run that receives it alone processes it, through the same processor
(``step.Step``) and the same driver-side handling (``query.batch_outputs``): the clock moves to the input's
time first (a tick: TIMEOUT and PERIODIC emit on it), then the event is processed, then the clock takes the
greatest event time it reported (the windows the new watermark closes emit in the same step).  A timer tick
moves the clock only.  Spark types the events and evaluates WHERE and the arguments, once for all inputs
(``query.query_events``); the processor runs in this process, on one bucket, milliseconds an input.

A query reading a stream that stream queries make (``from S[filter] select ... insert into T``) is given the
input stream's events: Spark derives its stream's events from them as a run does (``derived.derive``), each
tagged with the place of the input event it came from; an input the stream queries filter out reaches no
query of that stream.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from tiltframe.engine.continuous.columns import KIND, MAX_TS, NOW
from tiltframe.engine.continuous.query import PASSES, batch_outputs, processor_config, query_events
from tiltframe.engine.continuous.windows import step_class
from tiltframe.engine.events.derived import derive
from tiltframe.engine.events.typed import ARRIVAL_PART
from tiltframe.engine.inputs.text_sources import parse_records
from tiltframe.engine.replay_inputs import BadLine, Event, Output, Tick
from tiltframe.engine.sinks import rows_as_records
from tiltframe.errors import UsageError, unknown
from tiltframe.model.app import AppSpec


@dataclass(frozen=True)
class Fed:
    """One input of a stream (``stream`` None for a tick, which every query sees)."""

    stream: str | None
    item: Event | Tick | BadLine


def merged(inputs: Mapping[str, list[Event | Tick | BadLine]]) -> list[Fed]:
    """The inputs of several streams in one order, each file's kept as it is: of the next input of each
    stream, the earliest (ingest time or tick), the stream given first on a tie; a bad line goes with the
    input before it."""

    def fed(s_index: int, stream: str, items: list[Event | Tick | BadLine]) -> Iterator[tuple[int, int, Fed]]:
        at = 0
        for item in items:
            at = item.ingest_ns if isinstance(item, Event) else item.ns if isinstance(item, Tick) else at
            yield at, s_index, Fed(None if isinstance(item, Tick) else stream, item)

    streams = [fed(i, stream, items) for i, (stream, items) in enumerate(inputs.items())]
    return [f for _, _, f in heapq.merge(*streams, key=lambda k: (k[0], k[1]))]


class _Driven:
    """One continuous query's processor driven in this process: its state, its clock, what it emitted."""

    def __init__(self, app: AppSpec, index: int, events: pd.DataFrame, start_ms: int) -> None:
        self.query = app.continuous[index]
        self.name = app.continuous_name(index)
        self.config = processor_config(app, self.query)
        #: Where each input event's row is (by its place among its input stream's events): none when
        #: the stream queries making the query's stream filter it out.
        self.rows = {int(n): i for i, n in enumerate(events[ARRIVAL_PART])}
        self.events = events.drop(columns=[ARRIVAL_PART])
        self.state: tuple[Any, ...] = ((None, None), None, None, None, None)
        self.now: int | None = None
        self.max_ts: int | None = None  # the clock's greatest event time: the driver's, as in a run
        self.emits = 0
        self.start = self.at(start_ms)

    def at(self, now_ms: int) -> list[Output]:
        """Move processing time to ``now_ms`` (a tick when it changes)."""
        if now_ms == self.now:
            return []
        self.now = now_ms
        return self._call(self._tick())

    def take(self, n: int) -> list[Output]:
        """The ``n``-th event of the input stream, unless a stream query or WHERE leaves it out."""
        at = self.rows.get(n)
        if at is None:
            return []
        row = self.events.iloc[[at]]
        if not bool(row[PASSES].iloc[0]):
            return []
        return self._call(row.drop(columns=[PASSES]).reset_index(drop=True))

    def _tick(self) -> pd.DataFrame:
        columns = [c for c in self.events.columns if c != PASSES]
        return pd.DataFrame([{**dict.fromkeys(columns), KIND: "t", NOW: self.now, MAX_TS: self.max_ts}])[columns]

    def _call(self, batch: pd.DataFrame) -> list[Output]:
        meta, *tables = self.state
        step = step_class(self.query.window)(self.config, meta, *tables)
        out = step.run(batch)
        self.state = (step.meta(), step.open, step.emitted, step.sessions, step.partitions)
        made = batch_outputs(out, self.query, self._version)
        outputs = [Output(self.name, record) for record in rows_as_records(made.rows)] if not made.rows.empty else []
        outputs += [Output("err", _event(event), f"{self.name}: {kind}: {reason}")
                    for kind, reason, event in zip(made.records["kind"], made.records["reason"],
                                                   made.records["event"], strict=True)]
        if made.max_ts is not None and (self.max_ts is None or made.max_ts > self.max_ts):
            self.max_ts = made.max_ts  # the clock moves: a tick carries the new watermark
            outputs += self._call(self._tick())
        return outputs

    def _version(self) -> int:
        self.emits += 1
        return self.emits - 1


def _typed(spark: SparkSession, app: AppSpec, stream: str, items: list[Event | Tick | BadLine]) -> DataFrame:
    """An input stream's events as read from files: one row per event, every attribute as text, and
    ``ARRIVAL_PART`` its place among the stream's events (one partition: the ids count from 0 in order)."""
    texts = [(json.dumps(i.value, ensure_ascii=False),) for i in items if isinstance(i, Event)]
    raw = parse_records(spark.createDataFrame(texts, "value string").coalesce(1), app.stream(stream), column="value")
    return raw.withColumn(ARRIVAL_PART, F.monotonically_increasing_id())


def replay_app(app: AppSpec, inputs: Mapping[str, list[Event | Tick | BadLine]], spark: SparkSession
               ) -> Iterator[Output]:
    """Every output of the app's continuous queries over ``inputs`` (per input stream), in emission order: a
    step's outputs query by query (in the app's order), each query's rows then its late and rejected events
    (on ``err``, with the query's name and the reason)."""
    streams = {app.root_stream(q.stream) for q in app.continuous}
    for stream in inputs:
        if stream not in streams:
            raise UsageError(unknown("stream a continuous query reads", stream, streams))
    feed = merged(inputs)
    first = next((f.item for f in feed if not isinstance(f.item, BadLine)), None)
    start = _ms(first) if first is not None else 0
    queries: list[tuple[str, _Driven]] = []
    for i, q in enumerate(app.continuous):
        root = app.root_stream(q.stream)
        if root in inputs:
            raw = _typed(spark, app, root, inputs[root])
            if app.writer_of(q.stream) is not None:
                raw = derive(raw, app, q.stream, q.window.time_attribute)
            events = query_events(app, q, raw, 1, filtered=False, carry=[ARRIVAL_PART]).toPandas()
            queries.append((root, _Driven(app, i, events, start)))
    for _, query in queries:
        yield from query.start
    seen = dict.fromkeys(inputs, 0)  # events of each stream so far: the row of the next one
    for fed in feed:
        if isinstance(fed.item, BadLine):
            yield Output("err", fed.item.text, fed.item.reason)
            continue
        for stream, query in queries:
            yield from query.at(_ms(fed.item))
            if isinstance(fed.item, Event) and stream == fed.stream:
                yield from query.take(seen[stream])
        if isinstance(fed.item, Event):
            assert fed.stream is not None
            seen[fed.stream] += 1


def _ms(item: Event | Tick | BadLine) -> int:
    return (item.ingest_ns if isinstance(item, Event) else item.ns if isinstance(item, Tick) else 0) // 1_000_000


def _event(text: Any) -> Any:
    if not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text
