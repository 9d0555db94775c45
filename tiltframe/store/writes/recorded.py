"""The recorded events of a batch (rejected or moved), written to ``TILTFRAME_REJECTED`` in its transaction.

A text too large to keep is cut, never refused: an event's raw line may be megabytes long, and refusing it
would stop the pipeline over the very event it meant to set aside.  Every store keeps the same at most
:data:`MAX_RECORDED_BYTES` bytes (UTF-8) of each text column (the size of a MySQL TEXT), cut at a
character and ending with a marker that says how long the text was, so a cut is always visible.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tiltframe.aggregates.layout import AggregationLayout
from tiltframe.store.base import REJECTED_COLUMNS, REJECTED_TIMES, BatchWrite
from tiltframe.store.schema import REJECTED_TABLE
from tiltframe.store.writes.commits import now_ms

MAX_RECORDED_BYTES = 65_535


def fit_text(text: str) -> str:
    """``text``, or, when its UTF-8 form is longer than :data:`MAX_RECORDED_BYTES`, its start followed by
    ``…[truncated, N bytes]`` (N: the whole text's length), together within that size."""
    if len(text) * 4 <= MAX_RECORDED_BYTES:  # a character is at most 4 bytes
        return text
    data = text.encode("utf-8", errors="surrogatepass")
    if len(data) <= MAX_RECORDED_BYTES:
        return text
    marker = f"…[truncated, {len(data)} bytes]"
    kept = data[: MAX_RECORDED_BYTES - len(marker.encode())].decode("utf-8", errors="ignore")
    return kept + marker


def insert_recorded(conn: Connection, layout: AggregationLayout, batch: BatchWrite) -> None:
    """Insert the batch's recorded events (text columns fitted); a missing column stays NULL."""
    if batch.rejected is not None:
        insert_recorded_rows(conn, layout.name, batch.pipeline_id, batch.batch_id, batch.rejected)


def insert_recorded_rows(conn: Connection, name: str, pipeline_id: str, batch_id: int, rejected: pa.Table) -> None:
    """Insert recorded events of aggregation or table ``name`` (text columns fitted)."""
    if rejected.num_rows == 0:
        return
    base = {"aggregation": name, "pipeline_id": pipeline_id, "batch_id": batch_id, "recorded_at": now_ms()}

    def row(r: dict[str, Any]) -> dict[str, Any]:
        text = {k: None if v is None else fit_text(str(v)) for k, v in r.items() if k in REJECTED_COLUMNS}
        return {**base, **text, **{k: r[k] for k in REJECTED_TIMES if k in r}}

    conn.execute(sa.insert(REJECTED_TABLE), [row(r) for r in rejected.to_pylist()])
