"""Rejected requests of a retrieval join recorded on every store: beside the aggregation's rejected events
(kind ``request``, the stream named), listed by ``rejected`` and counted by ``info``; a batch recorded again
(Spark's replay) replaces its records, and another checkpoint's batch of the same id is kept."""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path

import pyarrow as pa
import pytest

import tiltframe as tf
from tests.servers import STORES, app_with_store, fresh_database
from tiltframe.aggregates.layout import AggregationLayout
from tiltframe.store.base import REJECTED_COLUMNS
from tiltframe.store.open_stores import StoreRegistry
from tiltframe.store.writes.rejected_requests import record_rejected_requests

APP = """define stream S (symbol string, price double, ts long);
define aggregation A from S select symbol, sum(price) as total group by symbol aggregate by ts every sec ... min;
"""


def _requests(*reasons: str) -> pa.Table:
    rows = [{"stream": "Req", "kind": "request", "reason": r, "field": "per", "value": r[-3:],
             "raw": f'{{"per": "{r[-3:]}"}}'} for r in reasons]
    return pa.Table.from_pylist(rows, schema=pa.schema([(c, pa.string()) for c in REJECTED_COLUMNS]))


@pytest.mark.parametrize("backend", STORES)
def test_requests_are_recorded_once_per_batch(backend: str, tmp_path: Path) -> None:
    with nullcontext(None) if backend == "sqlite" else fresh_database(backend) as url:
        app = tf.load_app(app_with_store(APP, url)[0])
        layout = AggregationLayout.of(app, "A")
        stores = StoreRegistry(tmp_path)
        try:
            store = stores.for_aggregation(layout.spec)
            store.ensure_schema(layout)
            long = "x" * 70_000  # cut as every recorded text is, never refused
            record_rejected_requests(store, "A", "query-q-1", 0, _requests("bad aaa", "bad bbb"))
            record_rejected_requests(store, "A", "query-q-1", 0, _requests("bad aaa", "bad bbb"))  # a replay
            record_rejected_requests(store, "A", "query-q-1", 1, _requests(long + "ccc"))
            record_rejected_requests(store, "A", "query-q-2", 0, _requests("bad ddd"))  # a new checkpoint
            listed = store.rejected(layout, 100)
            info = store.info(layout)
        finally:
            stores.close()
    assert sorted(listed["value"]) == ["aaa", "bbb", "ccc", "ddd"]
    assert set(listed["kind"]) == {"request"} and set(listed["stream"]) == {"Req"}
    assert set(listed["field"]) == {"per"}
    assert max(len(r.encode()) for r in listed["reason"]) <= 65_535
    assert dict(info.recorded_by_kind) == {"request": 4}
    assert info.events_rejected == 0  # the aggregation's own events: none rejected
