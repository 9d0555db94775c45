"""Fixtures of the store tests: a hand-built trade app, its layout and a fresh store on every backend."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pytest

from tests.servers import STORES, fresh_database
from tiltframe.aggregates.layout import AggregationLayout
from tiltframe.model.aggregations import AggregateItem, AggregationSpec, ExpressionItem, KeyItem, SelectItem, StoreSpec
from tiltframe.model.app import AppSpec
from tiltframe.model.durations import Granularity, Unit
from tiltframe.model.expressions import Attr, Binary
from tiltframe.model.streams import Attribute, AttrType, StreamDef
from tiltframe.store.base import BatchStats, BatchWrite
from tiltframe.store.sql import SqlStore
from tiltframe.store.urls import store_target

SEC = Granularity(Unit.SECONDS)
MIN = Granularity(Unit.MINUTES)

TRADES = StreamDef(
    "TradeStream",
    (
        Attribute("symbol", AttrType.STRING),
        Attribute("price", AttrType.DOUBLE),
        Attribute("quantity", AttrType.LONG),
        Attribute("timestamp", AttrType.LONG),
    ),
)

AGGREGATES: tuple[SelectItem, ...] = (
    KeyItem("symbol"),
    AggregateItem("avg", Attr("price"), "avgPrice"),
    AggregateItem("sum", Attr("quantity"), "total"),
    AggregateItem("min", Attr("price"), "low"),
    AggregateItem("max", Attr("price"), "high"),
)
LATEST = ExpressionItem(Binary("*", Attr("price"), Attr("quantity")), "value")


def make_layout(
    *,
    with_latest: bool = True,
    granularities: tuple[Granularity, ...] = (SEC, MIN),
    name: str = "TradeAggregation",
) -> AggregationLayout:
    select = (*AGGREGATES, LATEST) if with_latest else AGGREGATES
    agg = AggregationSpec(name, "TradeStream", select, granularities, ("symbol",), "timestamp")
    return AggregationLayout.of(AppSpec((TRADES,), (agg,)), name)


def rows_table(layout: AggregationLayout, rows: list[dict[str, Any]]) -> pa.Table:
    """An Arrow table with the layout's columns; missing values are NULL."""
    types = {AttrType.STRING: pa.string(), AttrType.LONG: pa.int64(), AttrType.DOUBLE: pa.float64()}
    return pa.table(
        {c: pa.array([r.get(c) for r in rows], types[t]) for c, t in layout.column_types.items()}
    )


@pytest.fixture
def layout() -> AggregationLayout:
    return make_layout()


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "data" / "tiltframe.db"


@contextmanager
def fresh_store(
    backend: str, db_path: Path, layout: AggregationLayout
) -> Iterator[tuple[SqlStore, Callable[[], SqlStore]]]:
    """A new store on ``backend`` with the tables of ``layout``, and a way to open read-only stores on the
    same database."""
    if backend == "sqlite":
        with SqlStore.sqlite(db_path) as s:
            s.ensure_schema(layout)
            yield s, lambda: SqlStore.sqlite(db_path, read_only=True)
        return
    with fresh_database(backend) as url:
        target = store_target(StoreSpec("rdbms", url))
        with SqlStore.server(target) as s:
            s.ensure_schema(layout)
            yield s, lambda: SqlStore.server(target, read_only=True)


@pytest.fixture(scope="session", params=STORES)
def store_kind(request: pytest.FixtureRequest) -> str:
    """Each store a store test runs on: the one parametrisation of the store tests (tests/store/contract/)."""
    return request.param


@pytest.fixture
def store(store_kind: str, db_path: Path, layout: AggregationLayout) -> Iterator[SqlStore]:
    """A fresh store of each kind; tests about SQLite itself narrow it with ``SQLITE_ONLY``."""
    with fresh_store(store_kind, db_path, layout) as (s, _):
        yield s


@pytest.fixture
def partitioned() -> AggregationLayout:
    """The trade layout partitioned by shard."""
    return dataclasses.replace(make_layout(), partitioned=True)


@pytest.fixture
def sharded(store_kind: str, db_path: Path, partitioned: AggregationLayout) -> Iterator[SqlStore]:
    """A fresh store of each kind with the partitioned layout's tables."""
    with fresh_store(store_kind, db_path, partitioned) as (s, _):
        yield s


#: Marks a test about the SQLite file itself (WAL, file paths, other processes opening the file).
SQLITE_ONLY = pytest.mark.parametrize("store_kind", ["sqlite"])


T0 = 1_700_000_000_000


def row(ts: int, sym: str, ev: int, batch: int, seq: int, price: float, qty: int, **extra: Any) -> dict:
    """The partial row of one trade (as the engine would produce it for a single event)."""
    r = {"AGG_TIMESTAMP": ts, "symbol": sym, "AGG_EVENT_TIMESTAMP": ev, "AGG_ARRIVAL_BATCH": batch,
         "AGG_ARRIVAL_SEQ": seq, "AGG_COUNT": 1, "avgPrice_SUM": price, "avgPrice_COUNT": 1, "total_SUM": qty,
         "low_MIN": price, "high_MAX": price, "value": price * qty}
    r.update(extra)
    return r


def batch(layout: AggregationLayout, batch_id: int, sec_rows: list[dict], *, rejected: pa.Table | None = None,
          pipeline: str = "p1", min_rows: list[dict] | None = None) -> BatchWrite:
    levels = {SEC: rows_table(layout, sec_rows)}
    if min_rows is not None:
        levels[MIN] = rows_table(layout, min_rows)
    n_rej = 0 if rejected is None else rejected.num_rows
    n_moved = 0 if rejected is None or "kind" not in rejected.column_names else rejected["kind"].to_pylist().count(
        "moved")
    stats = BatchStats(len(sec_rows) + n_rej, len(sec_rows), n_rej - n_moved,
                       min((r["AGG_EVENT_TIMESTAMP"] for r in sec_rows), default=None),
                       max((r["AGG_EVENT_TIMESTAMP"] for r in sec_rows), default=None), n_moved)
    return BatchWrite(pipeline, batch_id, stats, levels, rejected)


def by_symbol(df: pd.DataFrame) -> dict[tuple[int, str], dict]:
    return {(r["AGG_TIMESTAMP"], r["symbol"]): r for r in df.to_dict("records")}
