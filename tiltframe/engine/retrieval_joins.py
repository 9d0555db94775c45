"""One micro-batch of a retrieval join (``from Req join Agg within ... per ... insert into Out``): each
request event answered against the store, and each request that cannot be answered recorded with its
reason, the batch's other requests answered all the same.

Where a request's problem is a plain column check, Spark finds it as it types the batch
(``events.type_events``): a value of the wrong type, a missing attribute the query reads.  What only
retrieval can tell, a ``per`` that is no duration the aggregation keeps or a ``within`` whose bounds are no
times or out of order, is found on the driver, request by request, where the answers are made anyway
(requests are few): ``retrieval.retrieve`` raises ``RequestRejected`` (or another ``QueryError``) for that
request alone.  A store that fails is no request's fault: it stops the run, and the batch is replayed.

The rejected requests go to ``TILTFRAME_REJECTED`` under the aggregation the join reads (kind ``request``,
the request stream named; ``tiltframe inspect``, ``tf.rejected``), replaced on a replay of the batch
(``store.writes.rejected_requests``), and are counted in :class:`RequestTotals`.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import pyarrow as pa
from pyspark.sql import DataFrame

from tiltframe.aggregates.layout import AggregationLayout
from tiltframe.engine.events.typed import FIELD, RAW, REASON, VALUE, type_events
from tiltframe.engine.inputs.hadoop_paths import Location
from tiltframe.errors import QueryError
from tiltframe.model.app import AppSpec
from tiltframe.model.expressions import attributes_of
from tiltframe.model.queries import RetrievalQuery
from tiltframe.retrieval.retrieve import RequestRejected, retrieve
from tiltframe.store.base import REJECTED_COLUMNS, RecordKind, Store

logger = logging.getLogger(__name__)

__all__ = ["RequestTotals", "RetrievalJoin"]


@dataclass
class RequestTotals:
    """What a retrieval join did: micro-batches, requests answered, requests rejected (recorded with the
    rejected events of ``aggregation``, the aggregation it reads)."""

    aggregation: str = ""
    batches: int = 0
    answered: int = 0
    rejected: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)


class RetrievalJoin:
    """``foreachBatch`` of a retrieval join: answer each request event against ``store``, hand the answers
    to ``emit`` and record the requests that cannot be answered in ``recorder()`` (the aggregation's store,
    opened for writing when first needed)."""

    def __init__(self, app: AppSpec, query: RetrievalQuery, layout: AggregationLayout, store: Store, out: str, *,
                 emit: Callable[[str, int, pd.DataFrame], None], recorder: Callable[[], Store],
                 checkpoint: Location, name: str) -> None:
        self.query, self.layout, self.store, self.out = query, layout, store, out
        self.emit, self.recorder, self.checkpoint, self.name = emit, recorder, checkpoint, name
        self.stream = app.stream(query.request_stream or "")
        # The query is resolved (lang.checks.retrieval): a request attribute carries the request's reference.
        clauses = (
            *query.within, *([query.per] if query.per else []), *([query.on] if query.on else []),
            *(i.expr for i in query.select or ()),
            *query.group_by, *([query.having] if query.having else []), *(o.expr for o in query.order_by),
        )
        self.required = {a.name for e in clauses for a in attributes_of(e) if a.qualifier == query.request_ref}
        self.totals = RequestTotals(layout.name)
        self._pipeline_id: str | None = None

    def __call__(self, raw: DataFrame, batch_id: int) -> None:
        typed = type_events(raw, self.stream, required=self.required, time_attribute=None, arrival_ms=0)
        names = [a.name for a in self.stream.attributes]
        rows = typed.select(*names, REASON, FIELD, VALUE, RAW).collect()  # requests are few: driver work
        frames: list[pd.DataFrame] = []
        rejected: list[dict[str, Any]] = []
        for row in rows:
            if row[REASON] is not None:
                rejected.append(self._record(row[REASON], row[FIELD], row[VALUE], row[RAW]))
                continue
            request = {n: row[n] for n in names}
            try:
                frames.append(retrieve(self.layout, self.store, self.query, request))
            except RequestRejected as exc:
                rejected.append(self._record(exc.reason, exc.field, exc.value, row[RAW]))
            except QueryError as exc:  # any other error retrieval finds in this request's values
                rejected.append(self._record(str(exc), None, None, row[RAW]))
        if rejected:
            from tiltframe.store.writes.rejected_requests import record_rejected_requests

            table = pa.Table.from_pylist(rejected, schema=pa.schema([(c, pa.string()) for c in REJECTED_COLUMNS]))
            record_rejected_requests(self.recorder(), self.layout.name, self.pipeline_id, batch_id, table)
            logger.warning("query %s, batch %d: %d request(s) rejected, recorded with the rejected events of "
                           "aggregation %s (first: %s)", self.name, batch_id, len(rejected), self.layout.name,
                           rejected[0]["reason"])
        if frames:
            self.emit(self.out, batch_id, pd.concat(frames, ignore_index=True))
        with self.totals.lock:
            self.totals.batches += 1
            self.totals.answered += len(frames)
            self.totals.rejected += len(rejected)

    def _record(self, reason: str, field_name: str | None, value: str | None, raw: str | None) -> dict[str, Any]:
        return {"stream": self.stream.name, "kind": RecordKind.REQUEST.value, "reason": reason,
                "field": field_name, "value": value, "raw": raw}

    @property
    def pipeline_id(self) -> str:
        """The id of this join's checkpoint: Spark's query id, kept in the checkpoint's ``metadata`` (a new
        checkpoint is a new id, so its batches never replace another's records)."""
        if self._pipeline_id is None:
            found = None
            try:
                found = json.loads((self.checkpoint / "metadata").read_text(encoding="utf-8").splitlines()[0])["id"]
            except (OSError, ValueError, KeyError, IndexError, TypeError):
                logger.warning("query %s: no query id in %s; its rejected requests are recorded under its name",
                               self.name, self.checkpoint)
            self._pipeline_id = f"query-{self.name}-{found or 'unknown'}"
        return self._pipeline_id
