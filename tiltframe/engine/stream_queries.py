"""The output of a plain stream query (``from S[filter] select ... insert into T``) that nothing in the app
reads, or that the caller asked for by name: each micro-batch's rows of ``T`` go to the stream's sink.

A stream query over a retrieval join's output (``from tempStream select ...``) runs on the driver, where
the join's rows are made (:func:`apply_stream_query`).

The rows are made in Spark (``engine.events.derived``) and pass through the driver to the sink, as every sink takes
them; a row that cannot be an event of ``T`` (a value of the input that is no number, ...) is counted and
written with its reason to ``<data dir>/streams/<T>/rejected/``, never dropped silently.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
from pyspark.sql import DataFrame

from tiltframe.engine.events.derived import derive
from tiltframe.engine.events.typed import FIELD, RAW, REASON, VALUE, type_events
from tiltframe.engine.sinks import JsonLinesSink, Sink
from tiltframe.model.app import AppSpec
from tiltframe.model.queries import StreamQuery
from tiltframe.retrieval.evaluate import evaluate_column, holds

__all__ = ["StreamRows", "StreamTotals", "apply_stream_query", "consumed_streams"]


@dataclass
class StreamTotals:
    """What a stream query's output did: micro-batches, rows written to the sink, rows rejected."""

    batches: int = 0
    rows: int = 0
    rejected: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)


def consumed_streams(app: AppSpec) -> set[str]:
    """The streams something in ``app`` reads: aggregations, continuous queries, retrieval joins' requests,
    stream queries."""
    return {
        *(a.source for a in app.aggregations),
        *(q.stream for q in app.continuous),
        *(q.request_stream for q in app.queries if q.request_stream is not None),
        *(q.source for q in app.stream_queries),
    }


def apply_stream_query(query: StreamQuery, rows: pd.DataFrame) -> pd.DataFrame:
    """A stream query over rows made on the driver (a retrieval join's output), in pandas: the rows its
    filter passes (NULL does not), its target's attributes computed from them."""
    if query.where is not None and not rows.empty:
        rows = rows[holds(query.where, rows, None)].reset_index(drop=True)
    return pd.DataFrame({name: evaluate_column(expr, rows, None) for name, expr in query.outputs}, index=rows.index)


class StreamRows:
    """``foreachBatch`` of one stream query's output: the input stream's rows made rows of ``target``."""

    def __init__(self, app: AppSpec, target: str, sink: Sink, data_dir: Path) -> None:
        self.app, self.target, self.sink = app, target, sink
        self.stream = app.stream(target)
        self.records = JsonLinesSink(data_dir / "streams" / target / "rejected")
        self.totals = StreamTotals()

    def __call__(self, raw: DataFrame, batch_id: int) -> None:
        typed = type_events(derive(raw, self.app, self.target), self.stream, required=(), time_attribute=None,
                            arrival_ms=0)
        names = [a.name for a in self.stream.attributes]
        out = typed.select(*names, REASON, FIELD, VALUE, RAW).toPandas()
        bad = out[REASON].notna().to_numpy()
        rows = out.loc[~bad, names].reset_index(drop=True)
        if not rows.empty:
            self.sink.write(self.target, batch_id, rows)
        if bad.any():
            rejected = out[bad]
            self.records.write(self.target, batch_id, pd.DataFrame({
                "kind": "rejected",
                "reason": rejected[REASON].to_numpy(),
                "field": rejected[FIELD].to_numpy(),
                "value": rejected[VALUE].to_numpy(),
                "event": rejected[RAW].to_numpy(),
            }))
        with self.totals.lock:
            self.totals.batches += 1
            self.totals.rows += len(rows)
            self.totals.rejected += int(bad.sum())

