"""The requests of a retrieval join that cannot be answered, recorded in ``TILTFRAME_REJECTED`` under the
aggregation they ask (kind ``request``, the request stream named), beside its rejected events.

A micro-batch of requests that Spark replays (the process stopped before Spark committed it) records its
requests again: the batch's earlier records are replaced in the same transaction, so each rejected request
is recorded once, whatever the replays.
"""

from __future__ import annotations

import pyarrow as pa
import sqlalchemy as sa

from tiltframe.errors import StoreError
from tiltframe.store.base import RecordKind, Store
from tiltframe.store.retries import retried
from tiltframe.store.schema import REJECTED_TABLE, SHARED
from tiltframe.store.sql import SqlStore
from tiltframe.store.writes.recorded import insert_recorded_rows

__all__ = ["record_rejected_requests"]


@retried
def record_rejected_requests(store: Store, aggregation: str, pipeline_id: str, batch_id: int,
                             rejected: pa.Table) -> None:
    """Record ``rejected`` (columns of ``REJECTED_COLUMNS``, kind ``request``) as batch ``batch_id`` of the
    join ``pipeline_id`` over ``aggregation``, replacing what a replay of that batch recorded before."""
    if not isinstance(store, SqlStore):  # pragma: no cover - every store is an SQL store today
        raise StoreError(f"aggregation {aggregation}: rejected requests need an SQL store, not {store!r}")
    action = f"record the rejected requests of aggregation {aggregation}"
    with store.write_transaction(action, schema=True) as conn:
        SHARED.create_all(conn, checkfirst=True)
    r = REJECTED_TABLE.c
    with store.write_transaction(action) as conn:
        conn.execute(sa.delete(REJECTED_TABLE).where(
            r.aggregation == aggregation, r.pipeline_id == pipeline_id, r.batch_id == batch_id,
            r.kind == RecordKind.REQUEST.value))
        insert_recorded_rows(conn, aggregation, pipeline_id, batch_id, rejected)
