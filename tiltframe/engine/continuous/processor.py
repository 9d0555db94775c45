"""The stateful processor of a continuous query (``transformWithStateInPandas``): windows, late events
and EMIT policies.

Spark groups the query's input by a hash bucket of the GROUP BY keys, so one call handles every group of a
bucket at once with vectorised pandas (one call per bucket and micro-batch, not one per key).  Each call
receives the bucket's events and the clock's ticks (``clock.py``), and:

1. takes processing time (``now``) and the watermark (greatest event time of the query minus the delay)
   from the ticks;
2. sets late events aside (windows only: event time below the watermark), to be counted and recorded;
3. assigns windows, builds the partial states of the new events (``states.build_states``) and merges them
   into the open groups kept in state (``merge_rows``);
4. closes the windows the watermark passed (or whose ``TIMEOUT`` ran out) and emits rows as the EMIT
   policy says, as a stream of rows or as a changelog (retraction of the previous row, then the new row);
5. reports the greatest event time it saw, which the driver feeds back into the clock.

The open groups and the rows last emitted are two Arrow tables in value state, read and written once per
call.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle, TimerValues

from tiltframe.engine.continuous.states import SEQ, TS, build_states
from tiltframe.retrieval.evaluate import evaluate
from tiltframe.retrieval.merge import finalize, merge_rows
from tiltframe.spec.continuous import WINDOW_END, WINDOW_START, ContinuousQuery, EmitPolicy, WindowKind
from tiltframe.store.layout import AGG_TIMESTAMP, AggregationLayout

# Input columns besides keys and aggregate arguments (PySpark renames pandas columns that start with "_").
KIND = "tf_kind"  # "e" an event, "t" a clock tick
NOW = "tf_now"  # tick: processing time
MAX_TS = "tf_max_ts"  # tick: greatest event time of the query so far
RAW = "tf_raw"
REASON = "tf_reason"  # why an event could not be typed (null when fine)
# Output columns besides the query's outputs.
OUT_KIND = "tf_out"  # "row", "late", "rejected" or "max_ts"
EMITTED_AT = "tf_emit_time"
DELTA = "tf_delta"
#: The changelog's column as users see it (Timeplus's name): +1 an inserted row, -1 a retracted one.
CHANGELOG_DELTA = "_tp_delta"
# Bookkeeping columns of open groups.
WE = "_we"
LAST = "_last_arrival"
DIRTY = "_dirty"


@dataclass(frozen=True)
class ProcessorConfig:
    query: ContinuousQuery
    layout: AggregationLayout
    output_names: tuple[str, ...]
    output_dtypes: dict[str, str]


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
        self.meta = handle.getValueState("meta", "now long, max_ts long, next_emit long")
        self.open = handle.getValueState("open", "data binary")
        self.emitted = handle.getValueState("emitted", "data binary")

    def handleInputRows(
        self, key: Any, rows: Iterator[pd.DataFrame], timerValues: TimerValues
    ) -> Iterator[pd.DataFrame]:
        frames = [f for f in rows if len(f)]
        batch = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
        meta = self.meta.get() if self.meta.exists() else (None, None, None)
        open_ = _unpack(self.open.get()[0]) if self.open.exists() else None
        emitted = _unpack(self.emitted.get()[0]) if self.emitted.exists() else None
        step = _Step(self.config, meta, open_, emitted)
        out = step.run(batch)
        self.meta.update(step.meta())
        if step.open is None or step.open.empty:
            self.open.clear()
        else:
            self.open.update((_pack(step.open),))
        if step.emitted is None or step.emitted.empty:
            self.emitted.clear()
        else:
            self.emitted.update((_pack(step.emitted),))
        if not out.empty:
            yield out

    def close(self) -> None:
        pass


def _maximum(*values: Any) -> int | None:
    present = [int(v) for v in values if v is not None and not pd.isna(v)]
    return max(present) if present else None


class _Step:
    """One call of the processor for one bucket: pure pandas over the state it was given."""

    def __init__(
        self, config: ProcessorConfig, meta: tuple[Any, ...], open_: pd.DataFrame | None, emitted: pd.DataFrame | None
    ) -> None:
        self.config = config
        self.query = config.query
        self.layout = config.layout
        self.keys = list(self.layout.key_names)
        self.now, self.max_ts, self.next_emit = meta
        self.open = open_
        self.emitted = emitted
        self.out: list[pd.DataFrame] = []

    def meta(self) -> tuple[Any, ...]:
        return (self.now, self.max_ts, self.next_emit)

    # --- the call ---------------------------------------------------------------------------------------

    def run(self, batch: pd.DataFrame) -> pd.DataFrame:
        if not batch.empty:
            ticks = batch[batch[KIND] == "t"]
            self.now = _maximum(self.now, *ticks[NOW].tolist())
            self.max_ts = _maximum(self.max_ts, *ticks[MAX_TS].tolist())
            events = batch[batch[KIND] == "e"]
            if not events.empty:
                self._take(events)
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
        if not self.query.window.is_windowed or self.max_ts is None:
            return None
        return int(self.max_ts) - (self.query.emit.delay_ms or 0)

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

    def _take(self, events: pd.DataFrame) -> None:
        bad = events[REASON].notna().to_numpy()
        if bad.any():
            self._records("rejected", events[bad], events[REASON][bad])
            events = events[~bad]
        events = events.copy()
        events[SEQ] = np.arange(len(events))  # arrival order within the call (first/last tie-breaks)
        if self.query.window.time_attribute is None:
            events[TS] = self.now
        events[TS] = events[TS].astype("int64")
        wm = self.watermark
        if wm is not None:
            late = (events[TS] < wm).to_numpy()
            if late.any():
                reason = (
                    f"late: event time is behind the watermark {wm} (greatest event time {self.max_ts} minus "
                    f"delay {self.query.emit.delay_ms or 0} ms); not aggregated"
                )
                self._records("late", events[late], reason)
                events = events[~late]
        if events.empty:
            return
        self.out.append(pd.DataFrame({OUT_KIND: ["max_ts"], EMITTED_AT: [self.now], TS: [int(events[TS].max())]}))
        windowed = self._windows(events)
        partial = build_states(windowed, self.layout, int(self.now or 0))
        book = windowed.groupby(self.keys, sort=False, dropna=False)[WE].max().reset_index()
        partial = partial.merge(book, on=self.keys, how="left")
        partial[LAST] = self.now
        partial[DIRTY] = True
        self._merge_open(partial)

    def _windows(self, events: pd.DataFrame) -> pd.DataFrame:
        """Each event once per window it belongs to, with ``AGG_TIMESTAMP`` (window start) and end."""
        window = self.query.window
        ts = events[TS].to_numpy(dtype="int64")
        if window.kind is WindowKind.GLOBAL:
            return events.assign(**{AGG_TIMESTAMP: 0, WE: np.nan})
        if window.kind is WindowKind.TUMBLE:
            size = int(window.size_ms or 0)
            start = ts - np.mod(ts, size)
            return events.assign(**{AGG_TIMESTAMP: start, WE: start + size})
        if window.kind is WindowKind.HOP:
            size, slide = int(window.size_ms or 0), int(window.slide_ms or 0)
            last = np.floor_divide(ts, slide)
            first = np.floor_divide(ts - size, slide) + 1
            counts = (last - first + 1).astype("int64")
            repeated = events.loc[events.index.repeat(counts)].copy()
            offsets = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
            start = (np.repeat(first, counts) + offsets) * slide
            repeated[AGG_TIMESTAMP] = start
            repeated[WE] = start + size
            return repeated
        msg = f"{window.kind.value} windows are not supported yet"
        raise NotImplementedError(msg)

    def _merge_open(self, partial: pd.DataFrame) -> None:
        if self.open is None or self.open.empty:
            self.open = partial.reset_index(drop=True)
            return
        rows = pd.concat([self.open, partial], ignore_index=True)
        book = rows.groupby(self.keys, sort=False, dropna=False).agg({WE: "max", LAST: "max", DIRTY: "any"})
        merged = merge_rows(rows.drop(columns=[WE, LAST, DIRTY]), self.layout)
        self.open = merged.merge(book.reset_index(), on=self.keys, how="left")

    # --- emission ---------------------------------------------------------------------------------------

    def _due(self, interval: int | None) -> bool:
        """Whether a periodic boundary passed; boundaries are multiples of ``interval`` in processing time, so
        every bucket emits in the same micro-batch."""
        if interval is None or self.now is None:
            return interval is None
        now = int(self.now)
        if self.next_emit is None:
            self.next_emit = (now // interval + 1) * interval
            return False
        if now < self.next_emit:
            return False
        self.next_emit = (now // interval + 1) * interval
        return True

    def _emit(self) -> None:
        if self.open is None or self.open.empty:
            return
        emit, window = self.query.emit, self.query.window
        open_ = self.open
        closed = np.zeros(len(open_), dtype=bool)
        wm = self.watermark
        if window.is_windowed:
            if wm is not None:
                closed |= (open_[WE] <= wm).to_numpy()
            if emit.timeout_ms is not None and self.now is not None:
                closed |= (int(self.now) - open_[LAST] >= emit.timeout_ms).to_numpy()
        dirty = open_[DIRTY].to_numpy(dtype=bool)
        policy = emit.policy
        if policy is EmitPolicy.AFTER_WINDOW_CLOSE:
            chosen = closed
        elif policy is EmitPolicy.PERIODIC:
            due = self._due(emit.interval_ms)
            chosen = (closed & dirty) | (due & (np.ones_like(dirty) if emit.repeat else dirty))
        elif policy is EmitPolicy.ON_UPDATE:
            due = self._due(emit.batch_ms)
            chosen = dirty & (due | closed)
        else:
            msg = f"EMIT {policy.value if policy else None} is not supported yet"
            raise NotImplementedError(msg)
        if chosen.any():
            self._emit_rows(open_[chosen].reset_index(drop=True), only_changes=policy is EmitPolicy.ON_UPDATE)
            open_.loc[chosen, DIRTY] = False
        if closed.any():
            gone = open_[closed][self.keys]
            self.open = open_[~closed].reset_index(drop=True)
            if self.emitted is not None and not self.emitted.empty:
                marker = self.emitted.merge(gone.assign(_gone=True), on=self.keys, how="left")["_gone"]
                self.emitted = self.emitted[marker.isna().to_numpy()].reset_index(drop=True)

    def _outputs(self, groups: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray]:
        """The query's output columns of ``groups`` (keys and ids first) and which rows pass HAVING."""
        final = finalize(groups, self.layout)
        scope = final.rename(columns={AGG_TIMESTAMP: WINDOW_START})
        scope[WINDOW_END] = groups[WE].to_numpy()
        values = pd.DataFrame({k: groups[k].to_numpy() for k in self.keys})
        for name, expr in self.query.outputs:
            values[name] = _column(evaluate(expr, scope, None), len(scope))
        keep = np.ones(len(values), dtype=bool)
        if self.query.having is not None:
            keep = pd.Series(_column(evaluate(self.query.having, scope, None), len(scope))).fillna(False).to_numpy(bool)
        return values, keep

    def _emit_rows(self, groups: pd.DataFrame, *, only_changes: bool) -> None:
        names = list(self.config.output_names)
        values, keep = self._outputs(groups)
        if self.emitted is not None and not self.emitted.empty:
            previous = values[self.keys].merge(self.emitted, on=self.keys, how="left")
        else:
            previous = values[self.keys].assign(_had=False)
        had = previous["_had"].eq(True).to_numpy()
        if only_changes:
            same = had.copy()
            for n in names:
                new, old = (
                    values[n].to_numpy(dtype=object),
                    previous[_last(n)].to_numpy(dtype=object) if had.any() else None,
                )
                if old is None:
                    break
                same &= np.array([_equal(a, b) for a, b in zip(new, old, strict=True)], dtype=bool)
            unchanged = same & keep
            values, keep, had = values[~unchanged].reset_index(drop=True), keep[~unchanged], had[~unchanged]
            previous = previous[~unchanged].reset_index(drop=True)
        rows = []
        changelog = self.query.emit.changelog
        if changelog and had.any():
            old = previous[had].reset_index(drop=True)
            retract = pd.DataFrame({n: old[_last(n)].to_numpy() for n in names})
            retract[DELTA] = -1
            rows.append(retract)
        new_rows = values[keep].reset_index(drop=True)[names].copy()
        if changelog:
            new_rows[DELTA] = 1
        rows.append(new_rows)
        emitted_rows = pd.concat(rows, ignore_index=True)
        emitted_rows[OUT_KIND] = "row"
        emitted_rows[EMITTED_AT] = self.now
        self.out.append(emitted_rows)
        self._remember(values, keep)

    def _remember(self, values: pd.DataFrame, keep: np.ndarray) -> None:
        """Keep the last row emitted per group (for changelog retractions and on-update comparisons); a
        group whose row no longer passes HAVING has none."""
        fresh = pd.DataFrame({k: values[k].to_numpy() for k in self.keys})
        for n in self.config.output_names:
            fresh[_last(n)] = values[n].to_numpy()
        fresh = fresh[keep].assign(_had=True)
        old = self.emitted
        if old is not None and not old.empty:
            touched = values[self.keys].assign(_touched=True)
            marker = old.merge(touched, on=self.keys, how="left")["_touched"]
            fresh = pd.concat([old[marker.isna().to_numpy()], fresh], ignore_index=True)
        self.emitted = fresh.reset_index(drop=True)


def _last(name: str) -> str:
    """The column of an output's last emitted value."""
    return f"_last:{name}"


def _column(value: Any, n: int) -> Any:
    if isinstance(value, pd.Series):
        return value.to_numpy()
    return np.full(n, value, dtype=object) if not isinstance(value, np.ndarray) else value


def _equal(a: Any, b: Any) -> bool:
    if a is None or (isinstance(a, float) and np.isnan(a)):
        return b is None or (isinstance(b, float) and np.isnan(b))
    return bool(a == b)
