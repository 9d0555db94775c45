"""The driver of a continuous query without Spark: the processor's pandas step called the way
``transformWithStateInPandas`` and ``ContinuousRun`` call it (events and clock ticks per bucket, the greatest
event time fed back into the clock), so window and policy rules can be checked in milliseconds.  The Spark
tests in ``test_continuous.py`` run the same sequences through the real engine."""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from tiltframe.aggregates.layout import expression_type
from tiltframe.engine.continuous.columns import (
    CHANGELOG_DELTA,
    DELTA,
    FLAG,
    IDENT,
    KIND,
    MAX_TS,
    NOW,
    OUT_KIND,
    RAW,
    REASON,
    ProcessorConfig,
    version_outputs,
)
from tiltframe.engine.continuous.processor import pack, unpack
from tiltframe.engine.continuous.query import emitted_rows, row_order, stamp_emit_version
from tiltframe.engine.continuous.windows import step_class
from tiltframe.lang import parse_app
from tiltframe.model.app import AppSpec
from tiltframe.model.continuous import ContinuousQuery, EmitPolicy
from tiltframe.retrieval.evaluate import evaluate
from tiltframe.retrieval.pandas_states import TS, arg_column, layout_for


@dataclass
class Sim:
    """One continuous query over ``buckets`` simulated buckets (keys hashed like the engine's buckets)."""

    app: AppSpec
    query: ContinuousQuery
    buckets: int = 2
    now: int | None = None
    max_ts: int | None = None
    states: dict[int, tuple[Any, ...]] = field(default_factory=dict)
    records: list[dict[str, Any]] = field(default_factory=list)
    emitted: list[pd.DataFrame] = field(default_factory=list)
    versions: int = 0  # the next emit_version()

    @classmethod
    def of(cls, text: str, name: str | None = None, **kwargs: Any) -> Sim:
        app = parse_app(text)
        query = app.continuous_query(name) if name else app.continuous[0]
        return cls(app, query, **kwargs)

    def __post_init__(self) -> None:
        layout = layout_for(self.app, self.query)
        self.config = ProcessorConfig(self.query, layout, self.query.output_names, _dtypes(self.app, self.query))

    def step(self, events: list[dict[str, Any]] | None = None, now: int | None = None) -> list[dict[str, Any]]:
        """New events and/or a new processing time, then everything that follows (the clock moved by the
        greatest event time); the rows emitted, in the engine's order."""
        ticks = now is not None and now != self.now
        if now is not None:
            self.now = now
        out = self._batch(self._events(events or []), tick=ticks)
        while True:
            reports = out[out[OUT_KIND] == "max_ts"][TS].dropna()
            rows = emitted_rows(out)
            if not rows.empty and version_outputs(self.query):
                rows = stamp_emit_version(rows.copy(), self.query, self.versions)
                self.versions += 1
            recorded = out[out[OUT_KIND].isin(["late", "rejected", "unwindowed"])]
            self.records += recorded[[OUT_KIND, REASON, TS, RAW]].to_dict("records")
            self.emitted.append(rows)
            if reports.empty or (self.max_ts is not None and int(reports.max()) <= self.max_ts):
                break
            self.max_ts = int(reports.max())
            out = self._batch(self._events([]), tick=True)
        return self.take()

    def take(self) -> list[dict[str, Any]]:
        """The rows emitted since the last call, each micro-batch's in the engine's order."""
        batches, self.emitted = [r for r in self.emitted if not r.empty], []
        columns = [*self.query.output_names, *([DELTA] if self.query.emit.changelog else [])]
        out = []
        for rows in batches:
            rows = rows.sort_values(row_order(self.query), kind="stable")[columns]
            rows = rows.rename(columns={DELTA: CHANGELOG_DELTA})
            out += [plain(r) for r in rows.to_dict("records")]
        return out

    def _batch(self, events: pd.DataFrame, *, tick: bool) -> pd.DataFrame:
        outs = []
        for bucket in range(self.buckets):
            part = events[events["_bucket"] == bucket].drop(columns="_bucket")
            if tick:
                part = pd.concat([part, pd.DataFrame({KIND: ["t"], NOW: [self.now], MAX_TS: [self.max_ts]})])
            if part.empty:
                continue
            meta, *tables = self.states.get(bucket, ((None, None), None, None, None, None))
            step = step_class(self.query.window)(self.config, meta, *(unpack(t) for t in tables))
            outs.append(step.run(part.reset_index(drop=True)))
            # Tables go through Arrow as in Spark's state store (dtypes included).
            tables = (step.open, step.emitted, step.sessions, step.partitions)
            packed = (None if t is None or t.empty else pack(t) for t in tables)
            self.states[bucket] = (step.meta(), *packed)
        outs = [o for o in outs if not o.empty]
        return pd.concat(outs, ignore_index=True) if outs else pd.DataFrame(columns=[OUT_KIND, TS, RAW, REASON])

    def _events(self, events: list[dict[str, Any]]) -> pd.DataFrame:
        stream = self.app.stream(self.query.stream)
        names = [a.name for a in stream.attributes]
        frame = pd.DataFrame(events, columns=names) if events else pd.DataFrame(columns=names)
        frame = frame.astype(object).where(frame.notna(), None)
        out = pd.DataFrame({KIND: "e", NOW: None, MAX_TS: None}, index=frame.index)
        time_attr = self.query.window.time_attribute
        out[TS] = frame[time_attr] if time_attr else None
        out[RAW] = [json.dumps({k: v for k, v in r.items()}) for r in frame.to_dict("records")]
        out[REASON] = None
        for k in self.query.keys:
            out[k] = frame[k]
        if self.query.where is not None and not frame.empty:
            keep = pd.Series(evaluate(self.query.where, frame, None), index=frame.index).fillna(False).astype(bool)
            frame, out = frame[keep], out[keep]
        for item in self.query.aggregates:
            if item.arg is not None:
                value = evaluate(item.arg, frame, None) if not frame.empty else []
                series = pd.Series(value, index=frame.index, dtype=object)
                numeric = expression_type(item.arg, stream).is_numeric
                out[arg_column(item.alias)] = pd.to_numeric(series, errors="coerce") if numeric else series
        if self.query.emit.policy is EmitPolicy.AFTER_KEY_EXPIRE:
            out[IDENT] = frame[self.query.emit.identified_by or time_attr]
        window = self.query.window
        if window.conditions is not None and not frame.empty:
            flags = [pd.Series(evaluate(c, frame, None), index=frame.index).fillna(False).astype(bool).to_numpy()
                     for c in window.conditions]
            out[FLAG] = flags[0] * 1 + flags[1] * 2
        elif window.is_bounded:
            out[FLAG] = pd.Series(dtype="int64")
        spread = list(self.query.partitions or self.query.keys)
        key_text = out[spread].astype(str).agg("|".join, axis=1) if spread else None
        out["_bucket"] = [zlib.crc32(t.encode()) % self.buckets for t in key_text] if key_text is not None else 0
        return out.reset_index(drop=True)


def _dtypes(app: AppSpec, query: ContinuousQuery) -> dict[str, str]:
    from tiltframe.engine.continuous.query import _PANDAS_DTYPES
    from tiltframe.retrieval.pandas_states import output_types

    return {n: _PANDAS_DTYPES[t] for n, t in output_types(app, query).items()}


def plain(row: dict[str, Any]) -> dict[str, Any]:
    """A row with Python values: numpy numbers as int and float, every missing value as None."""
    out = {}
    for k, v in row.items():
        if v is None or v is pd.NA or (isinstance(v, float) and np.isnan(v)):
            out[k] = None
        elif isinstance(v, np.integer):
            out[k] = int(v)
        elif isinstance(v, np.floating):
            out[k] = float(v)
        else:
            out[k] = v
    return out
