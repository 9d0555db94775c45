"""One call of a continuous query's processor for one bucket: pure pandas over the state it was given
(``processor.py`` reads and writes that state).  This part takes the clock's ticks and the events (late
and rejected ones set aside) and merges partial states; emission (``emission.py``) is its other part.

``Step`` is what every window kind shares; each kind is a subclass in ``windows/`` (chosen by
``windows.step_class``) that overrides the hooks below: which windows an event falls in, which events
are late and why, when groups close, what a close leaves."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from tiltframe.engine.continuous.columns import (
    BOOK,
    DELTA,
    DIRTY,
    EMITTED_AT,
    IDENT,
    IMAX,
    IMIN,
    KIND,
    LAST,
    MAX_TS,
    NOW,
    OUT_KIND,
    PMAX,
    RAW,
    REASON,
    WE,
    WS,
    ProcessorConfig,
    is_empty,
    maximum,
    text_of,
)
from tiltframe.engine.continuous.emission import Emission
from tiltframe.model.continuous import EmitPolicy
from tiltframe.retrieval.pandas_states import SEQ, TS, build_states
from tiltframe.store.reads.pandas_merges import merge_rows


class Step(Emission):
    """One call of the processor for one bucket: pure pandas over the state it was given."""

    #: Whether a micro-batch's rows keep the order they were emitted in (``query.row_order``), rather than
    #: being sorted by window and key.
    in_emission_order: ClassVar[bool] = False

    def __init__(
        self,
        config: ProcessorConfig,
        meta: tuple[Any, ...],
        open_: pd.DataFrame | None,
        emitted: pd.DataFrame | None,
        sessions: pd.DataFrame | None = None,
        partitions: pd.DataFrame | None = None,
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
        #: PARTITION BY: each substream's greatest event time (its own watermark), in column PMAX.
        self.partitions = partitions
        self.out: list[pd.DataFrame] = []

    def meta(self) -> tuple[Any, ...]:
        return (self.now, self.max_ts)

    # --- the call ---------------------------------------------------------------------------------------

    def run(self, batch: pd.DataFrame) -> pd.DataFrame:
        if not batch.empty:
            ticks = batch[batch[KIND] == "t"]
            self.now = maximum(self.now, *ticks[NOW].tolist())
            self.max_ts = maximum(self.max_ts, *ticks[MAX_TS].tolist())
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
        """Event times below it are late and windows ending at or before it are closed; None for windows
        the watermark does not close (global aggregation, count windows, tilt frames), and before the first
        event."""
        if not self.window.closes_by_watermark:
            return None
        base = self.now if self.window.time_attribute is None else self.max_ts
        if base is None:
            return None
        return int(base) - (self.emit.delay_ms or 0)

    def marks(self, frame: pd.DataFrame) -> np.ndarray | None:
        """The watermark of each row of ``frame`` (float, NaN before its substream's first event): the
        query's, or with PARTITION BY its substream's greatest event time minus the delay (Proton: one fast
        key does not close the windows of the others); None when nothing has a watermark."""
        parts = list(self.query.partitions)
        if not parts:
            wm = self.watermark
            return None if wm is None else np.full(len(frame), float(wm))
        if is_empty(self.partitions) or frame.empty:
            return np.full(len(frame), np.nan)
        assert self.partitions is not None
        found = frame[parts].merge(self.partitions, on=parts, how="left")[PMAX].to_numpy(dtype="float64")
        return found - (self.emit.delay_ms or 0)

    def _advance_partitions(self, events: pd.DataFrame) -> None:
        """Each substream's greatest event time moved on by its new events (aggregated ones)."""
        parts = list(self.query.partitions)
        if not parts:
            return
        news = events.groupby(parts, sort=False, dropna=False)[TS].max().rename(PMAX).reset_index()
        both = news if is_empty(self.partitions) else pd.concat([self.partitions, news], ignore_index=True)
        self.partitions = both.groupby(parts, sort=False, dropna=False)[PMAX].max().reset_index()

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
        if self.watermark is not None:
            late, reasons = self._late(events)
            if late.any():
                self._records("late", events[late], reasons())
                events = events[~late].reset_index(drop=True)
        if events.empty:
            return
        self._advance_partitions(events)
        self.out.append(pd.DataFrame({OUT_KIND: ["max_ts"], EMITTED_AT: [self.now], TS: [int(events[TS].max())]}))
        self._take_windowed(events)

    def _take_windowed(self, events: pd.DataFrame) -> None:
        """The events (late ones set aside) into their windows: by default each one's windows
        (``_assign``) as partial states merged into the open groups."""
        windowed = self._assign(events)
        partial = build_states(windowed, self.layout, int(self.now or 0))
        book = {WS: (WS, "min"), WE: (WE, "max")}
        if self.emit.policy is EmitPolicy.AFTER_KEY_EXPIRE:
            book.update({IMIN: (IDENT, "min"), IMAX: (IDENT, "max")})
        books = windowed.groupby(self.keys, sort=False, dropna=False).agg(**book).reset_index()
        partial = partial.merge(books, on=self.keys, how="left")
        partial[LAST] = self.now
        partial[DIRTY] = True
        self.open = partial if is_empty(self.open) else self._merge(pd.concat([self.open, partial], ignore_index=True))

    def _late(self, events: pd.DataFrame) -> tuple[np.ndarray, Callable[[], np.ndarray]]:
        """Which events are late, and a function giving why for each of them (asked only when some are:
        the text is made for the late events alone).  Proton's ``WatermarkStamper``: an event is late when
        its time is below the watermark of the events before it, here the watermark at the micro-batch's
        start.

        The watermark is the greatest event time minus the delay (``_late_mark`` may move it); with PARTITION
        BY each substream has its own (``marks``)."""
        marks = self.marks(events)
        assert marks is not None
        ts = events[TS].to_numpy(dtype="int64")
        known = ~np.isnan(marks)
        base = np.where(known, marks, 0).astype("int64")
        mark = self._late_mark(base)
        late = known & (ts < mark)

        def reasons() -> np.ndarray:
            at, held, closed = ts[late], mark[late], base[late]
            delay = int(self.emit.delay_ms or 0)
            greatest = f"the greatest event time{' of its substream' if self.query.partitions else ''} "
            tail = greatest + text_of(closed + delay) + f" minus delay {delay} ms; not aggregated"
            return self._late_reasons(at, held, tail)

        return late, reasons

    def _late_mark(self, base: np.ndarray) -> np.ndarray:
        """The watermark an event time is compared with, from the greatest event time minus the delay."""
        return base

    def _late_reasons(self, at: np.ndarray, held: np.ndarray, tail: str) -> np.ndarray:
        """Why each late event (time ``at``, watermark ``held``) is late; ``tail`` names the greatest event
        time the watermark came from."""
        return np.asarray("event time " + text_of(at) + " is below the watermark " + text_of(held) + ", " + tail,
                          dtype=object)

    def _assign(self, events: pd.DataFrame) -> pd.DataFrame:
        """Each event once per window it belongs to: ``AGG_TIMESTAMP`` (the window's identity), ``WS``, ``WE``."""
        msg = f"{self.window.kind} windows are not assigned here"
        raise NotImplementedError(msg)

    def _merge(self, rows: pd.DataFrame) -> pd.DataFrame:
        """Rows of the same group (``AGG_TIMESTAMP`` and keys) merged into one: partial states by
        ``merge_rows``, bookkeeping columns by their rule."""
        book = {c: rule for c, rule in BOOK.items() if c in rows.columns}
        if not rows.duplicated(self.keys).any():
            return rows.reset_index(drop=True)
        books = rows.groupby(self.keys, sort=False, dropna=False).agg(book).reset_index()
        merged = merge_rows(rows.drop(columns=list(book)), self.layout)
        return merged.merge(books, on=self.keys, how="left")
