"""The stateful processor of a continuous query (``transformWithStateInPandas``): windows, late events
and EMIT policies.

Spark groups the query's input by a hash bucket of the GROUP BY keys, so one call handles every group of a
bucket at once with vectorised pandas (one call per bucket and micro-batch, not one per key).  Each call
receives the bucket's events and the clock's ticks (``clock.py``), and:

1. takes processing time (``now``) and the watermark from the ticks: the greatest event time of the query
   (all buckets, earlier micro-batches) minus ``WITH DELAY``; with arrival time (no event-time attribute)
   an event's time is ``now`` and the watermark is ``now`` minus the delay, so windows close as processing
   time passes;
2. sets aside late events and events with bad values, to be counted and recorded with their reason: as in
   Proton, an event is late when its time is below the watermark, which for tumble and hop is the end of
   the last window closed (so a hop's event whose earliest window closed goes into none of its windows) and
   for sessions the greatest event time minus the delay (``Step._late``, ``windows/hop_step.py``);
3. assigns windows, builds the partial states of the new events (``states.build_states``) and merges them
   into the open groups kept in state (``merge_rows``);
4. closes the windows the watermark passed, the count windows that are full, the windows and keys whose
   ``TIMEOUT`` ran out, the keys whose span passed ``MAXSPAN``, and emits rows as the EMIT policy says, as a
   stream of rows or as a changelog (retraction of the previous row, then the new row);
5. reports the greatest event time it aggregated, which the driver feeds back into the clock.

Periodic emission (``PERIODIC i``, ``ON UPDATE WITH BATCH i``) happens in the call whose ``now`` passes a
multiple of ``i`` (every bucket sees every clock move, so all buckets emit in the same micro-batch).

**Windows.**

- ``tumble`` and ``hop``: ``[start, start + size)``; a hop window starts at every multiple of the slide.
- ``session(s, gap[, max_length])``: per key, events less than ``gap`` apart form one session; a new event
  may extend a session on either side or bridge two into one.  ``window_start`` is the first event time,
  ``window_end`` the last event time plus ``gap``, and the session closes when the watermark reaches it.
  With ``max_length`` the first event at or past start + max_length ends a piece there and starts the next
  (Proton; checked before the gap), so a long session emits one row per piece.  A row before the session is
  closed, or at a TIMEOUT close, ends 1 ms after its last event (Proton).  A piece's start can still move
  while it is above the watermark (an earlier event, or a bridge to an earlier session), so until then the
  session is kept as per-event-time partial states and cut again; once a piece's start is at or below the
  watermark it is final and one merged state.
- ``session(s, gap, [start, end])``: sessions open at an event meeting ``start`` and end at one meeting
  ``end`` (``windows/bounded_session_step.py``); they stay per-event-time partial states until they close.
- ``tumble(s, N events)`` (count windows): per group, every N events form a window, taken in arrival order
  (micro-batch by micro-batch; inside one, by event time then as delivered); a window is emitted when it
  holds N events, or by ``TIMEOUT`` incomplete.  ``window_start`` and ``window_end`` are its earliest and
  latest event time.  Count windows have no watermark: no event is late.

**AFTER KEY EXPIRE** (global aggregation): the span of a key is the greatest minus the least value of the
``IDENTIFIED BY`` column over its events; in the micro-batch where the span exceeds ``MAXSPAN`` (events of
that micro-batch included) the key's row is emitted and the key forgotten (its next event starts it anew).
With ``AND TIMEOUT t`` a key that received no event for ``t`` of processing time is emitted and forgotten
too, unless ``ONLY`` is given: then only keys whose span exceeded ``MAXSPAN`` are ever emitted.

The open groups, the rows last emitted (for retractions and ON UPDATE comparisons) and, for sessions, the
open sessions are Arrow tables in value state, read and written once per call.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pandas as pd
import pyarrow as pa
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle, TimerValues

from tiltframe.engine.continuous.columns import ProcessorConfig
from tiltframe.engine.continuous.windows import step_class


def pack(frame: pd.DataFrame) -> bytes:
    table = pa.Table.from_pandas(frame, preserve_index=False)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def unpack(data: bytes | None) -> pd.DataFrame | None:
    if data is None:
        return None
    return pa.ipc.open_stream(pa.py_buffer(bytes(data))).read_all().to_pandas()


class ContinuousProcessor(StatefulProcessor):
    def __init__(self, config: ProcessorConfig) -> None:
        self.config = config
        self.step = step_class(config.query.window)

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.meta = handle.getValueState("meta", "now long, max_ts long")
        names = ("open", "emitted", "sessions", "partitions")
        self.tables = {name: handle.getValueState(name, "data binary") for name in names}

    def handleInputRows(
        self, key: Any, rows: Iterator[pd.DataFrame], timerValues: TimerValues
    ) -> Iterator[pd.DataFrame]:
        frames = [f for f in rows if len(f)]
        batch = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
        meta = self.meta.get() if self.meta.exists() else (None, None)
        tables = {name: unpack(s.get()[0]) if s.exists() else None for name, s in self.tables.items()}
        step = self.step(self.config, meta, tables["open"], tables["emitted"], tables["sessions"], tables["partitions"])
        out = step.run(batch)
        self.meta.update(step.meta())
        for name, frame in (
            ("open", step.open), ("emitted", step.emitted), ("sessions", step.sessions), ("partitions", step.partitions)
        ):
            if frame is None or frame.empty:
                self.tables[name].clear()
            else:
                self.tables[name].update((pack(frame),))
        if not out.empty:
            yield out

    def close(self) -> None:
        pass

