"""Fixtures of the store tests: a hand-built trade app, its layout and a fresh store on every backend."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from tests.servers import fresh_database
from tiltframe.aggregates.layout import AggregationLayout
from tiltframe.model.aggregations import AggregateItem, AggregationSpec, ExpressionItem, KeyItem, SelectItem, StoreSpec
from tiltframe.model.app import AppSpec
from tiltframe.model.durations import Granularity, Unit
from tiltframe.model.expressions import Attr, Binary
from tiltframe.model.streams import Attribute, AttrType, StreamDef
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


BACKENDS = ("sqlite", "postgresql", "mysql")


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


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, db_path: Path, layout: AggregationLayout) -> Iterator[SqlStore]:
    """A fresh store on each backend; tests about SQLite itself narrow it with ``SQLITE_ONLY``."""
    with fresh_store(request.param, db_path, layout) as (s, _):
        yield s


#: Marks a test about the SQLite file itself (WAL, file paths, other processes opening the file).
SQLITE_ONLY = pytest.mark.parametrize("store", ["sqlite"], indirect=True)
