"""The stateful processor of a continuous query (``transformWithStateInPandas``): windows, late events
and EMIT policies.

Spark groups the query's input by a hash bucket of the GROUP BY keys, so one call handles every group of a
bucket at once with vectorised pandas (one call per bucket and micro-batch, not one per key).  Each call
receives the bucket's events and the clock's ticks (``clock.py``), and:

1. takes processing time (``now``) and the watermark from the ticks: the greatest event time of the query
   (all buckets, earlier micro-batches) minus ``WITH DELAY``; with arrival time (no event-time attribute)
   an event's time is ``now`` and the watermark is ``now`` minus the delay, so windows close as processing
   time passes;
2. sets aside late events (tumble and hop: every window of the event ends at or before the watermark, so an
   out-of-order event of a window still open is aggregated, as in Proton; sessions: event time below the
   watermark) and events with bad values, to be counted and recorded with their reason;
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
  With ``max_length`` the session is cut into consecutive pieces ``[S + k*max_length, S + (k+1)*max_length)``
  measured from its first event time ``S``; each piece is a window of its own (``window_start`` its first
  event, ``window_end`` its last event plus ``gap`` or the cut, whichever is first), so a long session emits
  one row per piece.  A session's start can still move while it is above the watermark (an earlier event,
  or a bridge to an earlier session), so until then the session is kept as per-event-time partial states and
  cut again when it moves; once its start is at or below the watermark it is final and each piece is one
  merged state.
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
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle, TimerValues

from tiltframe.engine.continuous.states import SEQ, TS, build_states
from tiltframe.engine.event_time import event_time_ms
from tiltframe.engine.events import SPARK_TYPES
from tiltframe.functions.scalars import json_value
from tiltframe.retrieval.evaluate import evaluate, holds
from tiltframe.retrieval.merge import finalize, merge_rows
from tiltframe.spec.continuous import (
    EMIT_VERSION,
    WINDOW_END,
    WINDOW_START,
    ContinuousQuery,
    EmitPolicy,
    WindowKind,
)
from tiltframe.spec.expressions import Attr
from tiltframe.spec.model import StreamDef
from tiltframe.store.layout import AGG_COUNT, AGG_EVENT_TIMESTAMP, AGG_TIMESTAMP, AggregationLayout

# Input columns besides keys and aggregate arguments (PySpark renames pandas columns that start with "_").
KIND = "tf_kind"  # "e" an event, "t" a clock tick
NOW = "tf_now"  # tick: processing time
MAX_TS = "tf_max_ts"  # tick: greatest event time of the query so far
RAW = "tf_raw"
REASON = "tf_reason"  # why an event could not be typed (null when fine)
IDENT = "tf_ident"  # AFTER KEY EXPIRE: the IDENTIFIED BY column in epoch ms
# Output columns besides the query's outputs.
OUT_KIND = "tf_out"  # a row kind (ROW_KINDS), "late", "rejected" or "max_ts"
#: Kinds of emitted rows: "row" always reaches the sink; a periodic row of a group with news is "period", of
#: a group without news "period?", which reaches the sink only in a micro-batch that also has a "period" row
#: (the query emits at a period where anything arrived, in any bucket: the driver decides, ``emitted_rows``).
ROW, PERIOD, PERIOD_IF = "row", "period", "period?"
ROW_KINDS = (ROW, PERIOD, PERIOD_IF)
EMITTED_AT = "tf_emit_time"
DELTA = "tf_delta"
#: The changelog's column as users see it (Timeplus's name): +1 an inserted row, -1 a retracted one.
CHANGELOG_DELTA = "_tp_delta"
# Bookkeeping columns of open groups, and how two rows of one group combine.
WS = "_ws"  # window_start as emitted
WE = "_we"  # window_end as emitted (time windows: when the window closes)
LAST = "_last_arrival"  # processing time of the group's last event (TIMEOUT)
DIRTY = "_dirty"  # events arrived since the group's last row
IMIN = "_imin"  # AFTER KEY EXPIRE: least and greatest IDENTIFIED BY value
IMAX = "_imax"
PIECE = "_piece"  # session segments: the piece (window) they belong to, S + k * max_length
_BOOK = {WS: "min", WE: "max", LAST: "max", DIRTY: "any", IMIN: "min", IMAX: "max", PIECE: "max"}
# Open sessions: start, last event time, last arrival.
SS = "_ss"
SL = "_sl"
# Rows last emitted: window start of the group then (to follow a session that moves), last values.
MWS = "_mws"


@dataclass(frozen=True)
class ProcessorConfig:
    query: ContinuousQuery
    layout: AggregationLayout
    output_names: tuple[str, ...]
    output_dtypes: dict[str, str]


def extra_columns(query: ContinuousQuery, stream: StreamDef) -> list[Column]:
    """Spark columns of the events the processor needs besides keys and aggregate arguments: the
    ``IDENTIFIED BY`` column of AFTER KEY EXPIRE in epoch milliseconds."""
    emit = query.emit
    if emit.policy is not EmitPolicy.AFTER_KEY_EXPIRE:
        return []
    name = emit.identified_by or query.window.time_attribute
    if name is None:
        msg = "EMIT AFTER KEY EXPIRE needs IDENTIFIED BY or an event-time attribute"
        raise ValueError(msg)
    return [event_time_ms(F.col(name), SPARK_TYPES[stream.attribute(name).type]).alias(IDENT)]


def version_outputs(query: ContinuousQuery) -> tuple[str, ...]:
    """The outputs that are ``emit_version()``: numbered by the driver, not part of a row's values."""
    return tuple(n for n, e in query.outputs if isinstance(e, Attr) and e.name == EMIT_VERSION)


def _pack(frame: pd.DataFrame) -> bytes:
    table = pa.Table.from_pandas(frame, preserve_index=False)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def _unpack(data: bytes | None) -> pd.DataFrame | None:
    if data is None:
        return None
    return pa.ipc.open_stream(pa.py_buffer(bytes(data))).read_all().to_pandas()


class ContinuousProcessor(StatefulProcessor):
    def __init__(self, config: ProcessorConfig) -> None:
        self.config = config

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.meta = handle.getValueState("meta", "now long, max_ts long")
        self.tables = {name: handle.getValueState(name, "data binary") for name in ("open", "emitted", "sessions")}

    def handleInputRows(
        self, key: Any, rows: Iterator[pd.DataFrame], timerValues: TimerValues
    ) -> Iterator[pd.DataFrame]:
        frames = [f for f in rows if len(f)]
        batch = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
        meta = self.meta.get() if self.meta.exists() else (None, None)
        tables = {name: _unpack(s.get()[0]) if s.exists() else None for name, s in self.tables.items()}
        step = _Step(self.config, meta, tables["open"], tables["emitted"], tables["sessions"])
        out = step.run(batch)
        self.meta.update(step.meta())
        for name, frame in (("open", step.open), ("emitted", step.emitted), ("sessions", step.sessions)):
            if frame is None or frame.empty:
                self.tables[name].clear()
            else:
                self.tables[name].update((_pack(frame),))
        if not out.empty:
            yield out

    def close(self) -> None:
        pass


def _maximum(*values: Any) -> int | None:
    present = [int(v) for v in values if v is not None and not pd.isna(v)]
    return max(present) if present else None


def _empty(frame: pd.DataFrame | None) -> bool:
    return frame is None or frame.empty


def _hits(frame: pd.DataFrame, other: pd.DataFrame, on: list[str]) -> np.ndarray:
    """Which rows of ``frame`` have their ``on`` values among the rows of ``other`` (nulls match nulls)."""
    if frame.empty or other.empty:
        return np.zeros(len(frame), dtype=bool)
    marks = other[on].drop_duplicates().assign(_hit=True)
    return frame[on].merge(marks, on=on, how="left")["_hit"].notna().to_numpy()


class _Step:
    """One call of the processor for one bucket: pure pandas over the state it was given."""

    def __init__(
        self,
        config: ProcessorConfig,
        meta: tuple[Any, ...],
        open_: pd.DataFrame | None,
        emitted: pd.DataFrame | None,
        sessions: pd.DataFrame | None = None,
    ) -> None:
        self.config = config
        self.query = config.query
        self.window = config.query.window
        self.emit = config.query.emit
        self.layout = config.layout
        self.keys = list(self.layout.key_names)
        self.now, self.max_ts = meta[0], meta[1]
        self.previous_now = self.now
        self.open = open_
        self.emitted = emitted
        self.sessions = sessions
        self.out: list[pd.DataFrame] = []

    def meta(self) -> tuple[Any, ...]:
        return (self.now, self.max_ts)

    # --- the call ---------------------------------------------------------------------------------------

    def run(self, batch: pd.DataFrame) -> pd.DataFrame:
        if not batch.empty:
            ticks = batch[batch[KIND] == "t"]
            self.now = _maximum(self.now, *ticks[NOW].tolist())
            self.max_ts = _maximum(self.max_ts, *ticks[MAX_TS].tolist())
            events = batch[batch[KIND] == "e"]
            if not events.empty:
                self._take(events.reset_index(drop=True))
        self._emit()
        parts = [p for p in self.out if not p.empty]
        if not parts:
            return pd.DataFrame(columns=self._columns())
        out = pd.concat(parts, ignore_index=True).reindex(columns=self._columns())
        dtypes = {
            OUT_KIND: "object",
            EMITTED_AT: "Int64",
            DELTA: "Int32",
            TS: "Int64",
            RAW: "object",
            REASON: "object",
            **self.config.output_dtypes,
        }
        for name, dtype in dtypes.items():
            column = out[name]
            if dtype == "object":
                out[name] = column.astype(object).where(column.notna(), None)
            elif dtype in ("Int32", "Int64", "boolean"):
                out[name] = pd.array(column.astype(object).where(column.notna(), None).tolist(), dtype=dtype)
            else:
                out[name] = column.astype(dtype)
        return out

    def _columns(self) -> list[str]:
        return [OUT_KIND, EMITTED_AT, DELTA, TS, RAW, REASON, *self.config.output_names]

    @property
    def watermark(self) -> int | None:
        """Event times below it are late and windows ending at or before it are closed; None for global
        aggregation and count windows, and before the first event."""
        if self.window.kind in (WindowKind.GLOBAL, WindowKind.COUNT):
            return None
        base = self.now if self.window.time_attribute is None else self.max_ts
        if base is None:
            return None
        return int(base) - (self.emit.delay_ms or 0)

    def _crossed(self, interval: int | None) -> bool:
        """Whether processing time passed a multiple of ``interval`` since the previous call (always true
        without an interval: every micro-batch)."""
        if interval is None:
            return True
        if self.previous_now is None or self.now is None:
            return False
        return int(self.now) // interval > int(self.previous_now) // interval

    def _records(self, kind: str, events: pd.DataFrame, reasons: Any) -> None:
        self.out.append(
            pd.DataFrame(
                {
                    OUT_KIND: kind,
                    EMITTED_AT: self.now,
                    TS: events[TS].to_numpy(),
                    RAW: events[RAW].to_numpy(),
                    REASON: np.asarray(reasons, dtype=object),
                }
            )
        )

    # --- events -----------------------------------------------------------------------------------------

    def _take(self, events: pd.DataFrame) -> None:
        bad = events[REASON].notna().to_numpy()
        time_attribute = self.window.time_attribute
        if time_attribute is not None:
            missing = events[TS].isna().to_numpy() & ~bad
            if missing.any():
                self._records("rejected", events[missing], f"missing field '{time_attribute}'")
                bad |= missing
        if bad.any():
            rejected = bad & events[REASON].notna().to_numpy()
            if rejected.any():
                self._records("rejected", events[rejected], events[REASON][rejected])
            events = events[~bad]
        events = events.reset_index(drop=True)
        events[SEQ] = np.arange(len(events))  # arrival order within the call (ties of first/last, count windows)
        if time_attribute is None:
            events[TS] = self.now if self.now is not None else 0
        events[TS] = events[TS].astype("int64")
        wm = self.watermark
        kind = self.window.kind
        windowed = self._windows(events) if kind in (WindowKind.TUMBLE, WindowKind.HOP) else None
        if wm is not None:
            if windowed is not None:
                # Proton: an event is late only when every window it belongs to has closed; an out-of-order
                # event of a window still open is aggregated into it (and only into the open ones).
                still_open = (windowed[WE] > wm).to_numpy()
                late = ~np.isin(events[SEQ].to_numpy(), windowed[SEQ].to_numpy()[still_open])
                windowed = windowed[still_open].reset_index(drop=True)
                what = "every window of the event has closed (its end is at or before the watermark"
            else:
                late = (events[TS] < wm).to_numpy()
                what = "event time is behind the watermark"
            if late.any():
                reason = (
                    f"late: {what} {wm}, the greatest event time {self.max_ts} minus delay "
                    f"{self.emit.delay_ms or 0} ms{')' if windowed is not None else ''}; not aggregated"
                )
                self._records("late", events[late], reason)
                events = events[~late].reset_index(drop=True)
        if events.empty:
            return
        self.out.append(pd.DataFrame({OUT_KIND: ["max_ts"], EMITTED_AT: [self.now], TS: [int(events[TS].max())]}))
        if kind is WindowKind.SESSION:
            self._take_session(events)
            return
        if windowed is None:
            windowed = self._count_windows(events) if kind is WindowKind.COUNT else self._windows(events)
        partial = build_states(windowed, self.layout, int(self.now or 0))
        book = {WS: (WS, "min"), WE: (WE, "max")}
        if self.emit.policy is EmitPolicy.AFTER_KEY_EXPIRE:
            book.update({IMIN: (IDENT, "min"), IMAX: (IDENT, "max")})
        books = windowed.groupby(self.keys, sort=False, dropna=False).agg(**book).reset_index()
        partial = partial.merge(books, on=self.keys, how="left")
        partial[LAST] = self.now
        partial[DIRTY] = True
        self.open = partial if _empty(self.open) else self._merge(pd.concat([self.open, partial], ignore_index=True))

    def _windows(self, events: pd.DataFrame) -> pd.DataFrame:
        """Each event once per window it belongs to: ``AGG_TIMESTAMP`` (window start), ``WS``, ``WE``."""
        window = self.window
        ts = events[TS].to_numpy(dtype="int64")
        if window.kind is WindowKind.GLOBAL:
            return events.assign(**{AGG_TIMESTAMP: 0, WS: np.nan, WE: np.nan})
        if window.kind is WindowKind.TUMBLE:
            size = int(window.size_ms or 0)
            start = ts - np.mod(ts, size)
            return events.assign(**{AGG_TIMESTAMP: start, WS: start, WE: start + size})
        if window.kind is WindowKind.HOP:
            size, slide = int(window.size_ms or 0), int(window.slide_ms or 0)
            last = np.floor_divide(ts, slide)
            first = np.floor_divide(ts - size, slide) + 1
            counts = np.maximum(last - first + 1, 0).astype("int64")
            repeated = events.loc[events.index.repeat(counts)].copy()
            offsets = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
            start = (np.repeat(first, counts) + offsets) * slide
            repeated[AGG_TIMESTAMP] = start
            repeated[WS] = start
            repeated[WE] = start + size
            return repeated.reset_index(drop=True)
        msg = f"{window.kind.value} windows are not assigned here"
        raise NotImplementedError(msg)

    def _count_windows(self, events: pd.DataFrame) -> pd.DataFrame:
        """Count windows: the events of each group in order, numbered on from the group's open window
        (``AGG_TIMESTAMP`` 0, holding fewer than N events); ``AGG_TIMESTAMP`` is the window's ordinal."""
        size = int(self.window.count or 1)
        ordered = events.sort_values([TS, SEQ], kind="stable").assign(**{AGG_TIMESTAMP: 0}).reset_index(drop=True)
        rank = ordered.groupby(self.keys, sort=False, dropna=False).cumcount().to_numpy()
        have = np.zeros(len(ordered), dtype="int64")
        if not _empty(self.open):
            counts = self.open[[*self.keys, AGG_COUNT]]
            have = ordered[self.keys].merge(counts, on=self.keys, how="left")[AGG_COUNT].fillna(0).to_numpy("int64")
        ordered[AGG_TIMESTAMP] = (have + rank) // size
        ordered[WS] = ordered[TS]
        ordered[WE] = ordered[TS]
        return ordered

    def _merge(self, rows: pd.DataFrame) -> pd.DataFrame:
        """Rows of the same group (``AGG_TIMESTAMP`` and keys) merged into one: partial states by
        ``merge_rows``, bookkeeping columns by their rule."""
        book = {c: rule for c, rule in _BOOK.items() if c in rows.columns}
        if not rows.duplicated(self.keys).any():
            return rows.reset_index(drop=True)
        books = rows.groupby(self.keys, sort=False, dropna=False).agg(book).reset_index()
        merged = merge_rows(rows.drop(columns=list(book)), self.layout)
        return merged.merge(books, on=self.keys, how="left")

    # --- sessions ---------------------------------------------------------------------------------------

    def _take_session(self, events: pd.DataFrame) -> None:
        """New events as one partial state per (event time, key), then every segment of the bucket cut into
        sessions and pieces again; segments of a final session are merged per piece."""
        atoms = build_states(events.assign(**{AGG_TIMESTAMP: events[TS]}), self.layout, int(self.now or 0))
        atoms[WS] = atoms[AGG_TIMESTAMP]
        atoms[LAST] = self.now
        atoms[DIRTY] = True
        segments = atoms if _empty(self.open) else pd.concat([self.open, atoms], ignore_index=True)
        segments = segments.reset_index(drop=True)
        gap, length = int(self.window.gap_ms or 0), self.window.max_length_ms
        keys = list(self.query.keys)
        # Sessions over the segments and the open sessions (which remember where a cut session started).
        members = pd.DataFrame({k: segments[k].to_numpy() for k in keys})
        members[SS] = segments[WS].to_numpy(dtype="int64")
        members[SL] = segments[AGG_EVENT_TIMESTAMP].to_numpy(dtype="int64")
        members[LAST] = segments[LAST].to_numpy()
        members["_row"] = np.arange(len(segments))
        if not _empty(self.sessions):
            members = pd.concat([members, self.sessions.assign(_row=-1)], ignore_index=True)
        group = members.groupby(keys, sort=False, dropna=False).ngroup() if keys else pd.Series(0, members.index)
        members["_g"] = group.to_numpy()
        members = members.sort_values(["_g", SS, SL], kind="stable").reset_index(drop=True)
        reach = members.groupby("_g", sort=False)[SL].cummax().shift(1).to_numpy(dtype="float64")
        first = members["_g"].ne(members["_g"].shift(1)).to_numpy()
        new = first | (members[SS].to_numpy() - reach >= gap)
        members["_sid"] = np.cumsum(new)
        bysession = members.groupby("_sid", sort=False)
        start = bysession[SS].transform("min").to_numpy(dtype="int64")
        spans = {SS: (SS, "min"), SL: (SL, "max"), LAST: (LAST, "max")}
        self.sessions = bysession.agg(**{k: (k, "first") for k in keys}, **spans).reset_index(drop=True)
        # Pieces and merge identities of the segments.
        rows = members["_row"].to_numpy()
        of_segment = rows >= 0
        session_start = np.empty(len(segments), dtype="int64")
        session_start[rows[of_segment]] = start[of_segment]
        seg_start = segments[WS].to_numpy(dtype="int64")
        if length:
            piece = session_start + (seg_start - session_start) // int(length) * int(length)
            wm = self.watermark
            final = session_start <= wm if wm is not None else np.zeros(len(segments), dtype=bool)
            identity = np.where(final, piece, seg_start)
        else:
            piece = identity = session_start
        if PIECE in segments.columns:  # a piece that moved (earlier start, bridged sessions) has news to emit
            before = segments[PIECE].to_numpy(dtype="float64")
            segments[DIRTY] = segments[DIRTY].to_numpy(dtype=bool) | (before != piece)
        segments[PIECE] = piece
        segments[AGG_TIMESTAMP] = identity
        self.open = self._merge(segments)
        self._follow_pieces()

    def _follow_pieces(self) -> None:
        """Rows last emitted follow their session piece when it moves: each one now belongs to the piece
        holding the event time it started at (pieces never lose events while open)."""
        memory = self.emitted
        if _empty(memory) or _empty(self.open):
            return
        keys = list(self.query.keys)
        pieces = self.open.groupby([*keys, PIECE], sort=False, dropna=False)[WS].min().reset_index()
        both = pd.concat([pieces[keys], memory[keys]], ignore_index=True)
        code = both.groupby(keys, sort=False, dropna=False).ngroup().to_numpy() if keys else np.zeros(len(both))
        pieces = pieces.assign(_code=code[: len(pieces)], _at=pieces[WS].astype("int64"))
        memory = memory.assign(_code=code[len(pieces) :], _at=memory[MWS].astype("int64"), _pos=np.arange(len(memory)))
        found = pd.merge_asof(
            memory.sort_values("_at")[["_at", "_code", "_pos"]],
            pieces.sort_values("_at")[["_at", "_code", PIECE]],
            on="_at",
            by="_code",
            direction="backward",
        ).sort_values("_pos")
        moved = found[PIECE].to_numpy(dtype="float64")
        self.emitted = self.emitted.assign(
            **{AGG_TIMESTAMP: np.where(np.isnan(moved), memory[AGG_TIMESTAMP], moved).astype("int64")}
        )

    def _groups(self) -> pd.DataFrame:
        """The groups the policy emits: the open rows, or for sessions their segments merged per piece."""
        assert self.open is not None
        if self.window.kind is not WindowKind.SESSION:
            return self.open
        pieces = self._merge(self.open.assign(**{AGG_TIMESTAMP: self.open[PIECE]}))
        end = pieces[AGG_EVENT_TIMESTAMP].to_numpy(dtype="int64") + int(self.window.gap_ms or 0)
        if self.window.max_length_ms:
            end = np.minimum(end, pieces[AGG_TIMESTAMP].to_numpy(dtype="int64") + int(self.window.max_length_ms))
        pieces[WE] = end
        return pieces

    # --- emission ---------------------------------------------------------------------------------------

    def _emit(self) -> None:
        if _empty(self.open):
            return
        emit, window = self.emit, self.window
        groups = self._groups()
        now = int(self.now) if self.now is not None else None
        closed = np.zeros(len(groups), dtype=bool)
        timed_out = np.zeros(len(groups), dtype=bool)
        if emit.timeout_ms is not None and now is not None:
            timed_out = now - groups[LAST].to_numpy(dtype="float64") >= emit.timeout_ms
        wm = self.watermark
        if wm is not None:
            closed |= (groups[WE] <= wm).to_numpy()
        if window.kind is WindowKind.COUNT:
            closed |= (groups[AGG_COUNT] >= int(window.count or 1)).to_numpy()
        dirty = groups[DIRTY].to_numpy(dtype=bool)
        kinds = np.full(len(groups), ROW, dtype=object)
        policy = emit.policy
        if policy is EmitPolicy.AFTER_KEY_EXPIRE:
            span = (groups[IMAX] - groups[IMIN]).to_numpy(dtype="float64")
            exceeded = np.nan_to_num(span, nan=-1.0) > int(emit.maxspan_ms or 0)
            closed = exceeded | timed_out
            chosen = exceeded | (timed_out & (not emit.only))
        else:
            if window.is_windowed:
                closed |= timed_out
            if policy is EmitPolicy.AFTER_WINDOW_CLOSE:
                chosen = closed
            elif policy is EmitPolicy.PERIODIC:
                # At each period every open group (REPEAT: always; else if anything arrived, which the
                # driver knows across buckets), and every window's final row when it closes.
                due = self._crossed(emit.interval_ms)
                chosen = closed | due
                kinds = np.where(closed | emit.repeat, ROW, np.where(dirty, PERIOD, PERIOD_IF))
            elif policy is EmitPolicy.ON_UPDATE:
                chosen = dirty & (self._crossed(emit.batch_ms) | closed)
            else:
                msg = f"EMIT {policy.value if policy else None} is not supported"
                raise NotImplementedError(msg)
        if chosen.any():
            self._emit_rows(
                groups[chosen].reset_index(drop=True), only_changes=policy is EmitPolicy.ON_UPDATE, kinds=kinds[chosen]
            )
        self._settle(groups, chosen, closed)

    def _settle(self, groups: pd.DataFrame, chosen: np.ndarray, closed: np.ndarray) -> None:
        """Mark the emitted groups clean, drop the closed ones (and their last rows)."""
        assert self.open is not None
        if self.window.kind is WindowKind.SESSION:
            identity = self.open.assign(**{AGG_TIMESTAMP: self.open[PIECE]})
            seg_chosen = _hits(identity, groups[chosen], self.keys)
            seg_closed = _hits(identity, groups[closed], self.keys)
        else:
            seg_chosen, seg_closed = chosen, closed
        if seg_chosen.any():
            self.open.loc[seg_chosen, DIRTY] = False
        if seg_closed.any():
            self.open = self.open[~seg_closed].reset_index(drop=True)
            if not _empty(self.emitted):
                self.emitted = self.emitted[~_hits(self.emitted, groups[closed], self.keys)].reset_index(drop=True)
        if self.window.kind is WindowKind.SESSION and not _empty(self.sessions):
            ended = np.zeros(len(self.sessions), dtype=bool)
            wm = self.watermark
            if wm is not None:
                ended |= (self.sessions[SL] + int(self.window.gap_ms or 0) <= wm).to_numpy()
            if self.emit.timeout_ms is not None and self.now is not None:
                ended |= (int(self.now) - self.sessions[LAST] >= self.emit.timeout_ms).to_numpy()
            self.sessions = self.sessions[~ended].reset_index(drop=True)
        if self.window.kind is WindowKind.COUNT:
            # A group has one open count window left (the full ones closed): it is window 0 again.
            self.open[AGG_TIMESTAMP] = 0
            if not _empty(self.emitted):
                self.emitted[AGG_TIMESTAMP] = 0

    def _outputs(self, groups: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray]:
        """The query's output columns of ``groups`` (group identity first) and which rows pass HAVING."""
        final = finalize(groups, self.layout)
        scope = final.rename(columns={AGG_TIMESTAMP: WINDOW_START})
        scope[WINDOW_START] = groups[WS].to_numpy()
        scope[WINDOW_END] = groups[WE].to_numpy()
        scope[EMIT_VERSION] = -1  # the driver numbers the emits (query.stamp_emit_version)
        values = pd.DataFrame({k: groups[k].to_numpy() for k in self.keys})
        for name, expr in self.query.outputs:
            values[name] = _column(evaluate(expr, scope, None), len(scope))
        keep = np.ones(len(values), dtype=bool)
        for condition in (self.query.having, self.query.filter):
            if condition is not None:
                keep &= holds(condition, scope, None)
        values[MWS] = groups[WS].to_numpy()
        return values, keep

    def _emit_rows(self, groups: pd.DataFrame, *, only_changes: bool, kinds: np.ndarray) -> None:
        """Rows of ``groups`` (of the given row kinds); a changelog retracts every row last emitted for each
        group first.  With ``only_changes`` a group whose values equal its one last row is skipped."""
        names = list(self.config.output_names)
        values, keep = self._outputs(groups)
        values[OUT_KIND] = kinds
        if _empty(self.emitted):
            previous = pd.DataFrame({"_gid": np.zeros(0, dtype="int64")})
        else:
            assert self.emitted is not None
            ids = values[self.keys].assign(_gid=np.arange(len(values)))
            previous = ids.merge(self.emitted, on=self.keys, how="inner")
        gids = previous["_gid"].to_numpy(dtype="int64")
        counts = np.bincount(gids, minlength=len(values))
        if only_changes and not previous.empty:
            equal = np.ones(len(previous), dtype=bool)
            for n in (n for n in names if n not in version_outputs(self.query)):
                equal &= _same(values[n].to_numpy(dtype=object)[gids], previous[_last(n)].to_numpy(dtype=object))
            same = np.zeros(len(values), dtype=bool)
            same[gids[equal]] = True
            unchanged = same & (counts == 1) & keep
            if unchanged.any():
                values, keep = values[~unchanged].reset_index(drop=True), keep[~unchanged]
                previous = previous[~unchanged[gids]]
        rows = []
        changelog = self.emit.changelog
        if changelog and not previous.empty:
            retract = pd.DataFrame({n: previous[_last(n)].to_numpy() for n in names})
            retract[DELTA] = -1
            retract[OUT_KIND] = np.asarray(kinds, dtype=object)[previous["_gid"].to_numpy(dtype="int64")]
            rows.append(retract)
        new_rows = values[keep].reset_index(drop=True)[[*names, OUT_KIND]].copy()
        if changelog:
            new_rows[DELTA] = 1
        rows.append(new_rows)
        emitted_rows = pd.concat([r for r in rows if not r.empty] or [new_rows], ignore_index=True)
        emitted_rows[EMITTED_AT] = self.now
        self.out.append(emitted_rows)
        self._remember(values, keep)

    def _remember(self, values: pd.DataFrame, keep: np.ndarray) -> None:
        """Keep the last row emitted per group (for changelog retractions and on-update comparisons); a
        group whose row no longer passes HAVING has none."""
        fresh = pd.DataFrame({k: values[k].to_numpy() for k in [*self.keys, MWS]})
        for n in self.config.output_names:
            fresh[_last(n)] = values[n].to_numpy()
        fresh = fresh[keep]
        old = self.emitted
        if not _empty(old):
            assert old is not None
            fresh = pd.concat([old[~_hits(old, values, self.keys)], fresh], ignore_index=True)
        self.emitted = fresh.reset_index(drop=True)


def _last(name: str) -> str:
    """The column of an output's last emitted value."""
    return f"_last:{name}"


def _column(value: Any, n: int) -> Any:
    if isinstance(value, pd.Series):
        return value.to_numpy()
    return np.full(n, value, dtype=object) if not isinstance(value, np.ndarray) else value


def _same(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Element-wise equality of two object arrays, nulls (None, NaN, NA) equal to each other."""
    a_null, b_null = pd.isna(a), pd.isna(b)
    left = np.where(a_null, None, a)
    right = np.where(b_null, None, b)
    if any(isinstance(v, list | np.ndarray) for v in (*left, *right)):  # group_array lists
        return np.array([json_value(x) == json_value(y) for x, y in zip(left, right, strict=True)], dtype=bool)
    return np.asarray(left == right, dtype=bool) | (a_null & b_null)
