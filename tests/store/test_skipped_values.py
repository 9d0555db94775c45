"""The values each measure skipped (``TILTFRAME_SKIPPED_VALUES``), on every store: added by each batch's
commit exactly once, totalled per measure by ``info``, "unknown" for the batches of a store made before the
table (which readers open as it is and writers complete), and forgotten with the aggregation."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import sqlalchemy as sa

from tests.servers import STORES
from tests.store.conftest import T0, TRADES, batch, fresh_store, row
from tiltframe.aggregates.layout import AggregationLayout
from tiltframe.model.aggregations import AggregateItem
from tiltframe.model.app import AppSpec
from tiltframe.model.expressions import Attr
from tiltframe.store.base import BatchWrite, SkippedValues
from tiltframe.store.schema import SKIPPED_VALUES, SKIPPED_VALUES_TABLE
from tiltframe.store.sql import SqlStore

MEASURES = ("avgPrice", "total", "low", "high")


def counted(layout: AggregationLayout, batch_id: int, skipped: dict[str, int], events: int = 3) -> BatchWrite:
    """A batch of ``events`` trades whose arguments were missing ``skipped`` times per measure."""
    b = batch(layout, batch_id, [row(T0 + i * 1000, "A", T0 + i * 1000, batch_id, i, 1.0, 1) for i in range(events)])
    return dataclasses.replace(b, stats=dataclasses.replace(b.stats, values_skipped=skipped))


def totals(store: SqlStore, layout: AggregationLayout) -> dict[str, tuple[int | None, int, int, int]]:
    return {v.measure: (v.skipped, v.events, v.batches_counted, v.batches_not_counted)
            for v in store.info(layout).values_skipped}


@pytest.mark.parametrize("backend", STORES)
def test_each_batch_adds_its_counts_once(backend: str, db_path: Path, layout: AggregationLayout) -> None:
    with fresh_store(backend, db_path, layout) as (store, reader):
        assert totals(store, layout) == dict.fromkeys(MEASURES, (0, 0, 0, 0))  # nothing committed yet
        first = counted(layout, 1, {"avgPrice": 2, "total": 1, "low": 2, "high": 2})
        assert store.write_batch(layout, first)
        assert store.write_batch(layout, counted(layout, 2, {"avgPrice": 0, "total": 3, "low": 0, "high": 0}))
        assert not store.write_batch(layout, first)  # a replay: already committed, nothing added
        assert store.write_batch(layout, counted(layout, 3, {"avgPrice": 1, "total": 0, "low": 1, "high": 1}, 2))
        want = {"avgPrice": (3, 8, 3, 0), "total": (4, 8, 3, 0), "low": (3, 8, 3, 0), "high": (3, 8, 3, 0)}
        assert totals(store, layout) == want
        with reader() as r:
            info = r.info(layout)
        assert info.values_skipped[0] == SkippedValues("avgPrice", 3, 8, 3, 0)
        assert all(type(v.skipped) is int and type(v.events) is int for v in info.values_skipped)  # not Decimal
        other = dataclasses.replace(layout, spec=dataclasses.replace(layout.spec, name="Other"))
        store.ensure_schema(other)
        assert store.write_batch(other, counted(other, 1, dict.fromkeys(MEASURES, 1)))
        store.reset(layout)  # a rebuild forgets the aggregation's counts, not another's
        store.ensure_schema(layout)
        assert totals(store, layout) == dict.fromkeys(MEASURES, (0, 0, 0, 0))
        assert totals(store, other) == dict.fromkeys(MEASURES, (1, 3, 1, 0))


@pytest.mark.parametrize("backend", STORES)
def test_a_store_made_before_the_table_says_unknown_then_counts(backend: str, db_path: Path,
                                                                layout: AggregationLayout) -> None:
    with fresh_store(backend, db_path, layout) as (store, reader):
        assert store.write_batch(layout, counted(layout, 1, dict.fromkeys(MEASURES, 0)))
        assert store.write_batch(layout, batch(layout, 2, [row(T0, "B", T0, 2, 0, 2.0, 2)]))  # counted by nobody
        with store._engine.begin() as conn:  # what an earlier version left: no table at all
            conn.exec_driver_sql(f"DROP TABLE {conn.dialect.identifier_preparer.quote(SKIPPED_VALUES)}")
        with reader() as r:  # readers open it as it is, create nothing, and know nothing
            assert totals(r, layout) == dict.fromkeys(MEASURES, (None, 0, 0, 2))
            with r._engine.connect() as conn:
                assert not sa.inspect(conn).has_table(SKIPPED_VALUES)
        # A new process of this version writes: its store object has seen nothing of the database yet.
        again = SqlStore.sqlite(db_path) if backend == "sqlite" else SqlStore.server(store._engine.url)
        with again as writer:
            assert writer.write_batch(layout, counted(layout, 3, {"avgPrice": 1, "total": 2, "low": 1, "high": 1}, 1))
            got = totals(writer, layout)
        assert got == {"avgPrice": (1, 1, 1, 2), "total": (2, 1, 1, 2), "low": (1, 1, 1, 2), "high": (1, 1, 1, 2)}


@pytest.mark.parametrize("backend", STORES)
def test_a_migration_forgets_the_counts_of_the_measures_it_removes(backend: str, db_path: Path,
                                                                    layout: AggregationLayout) -> None:
    """``high`` (max of price) removed and ``most`` (max of quantity) added: ``high``'s counts go, ``most`` is
    unknown for the batches before it and counted after; the others keep theirs."""
    select = tuple(AggregateItem("max", Attr("quantity"), "most") if getattr(i, "alias", None) == "high" else i
                   for i in layout.spec.select)
    changed = AggregationLayout.of(AppSpec((TRADES,), (dataclasses.replace(layout.spec, select=select),)),
                                   layout.name)
    with fresh_store(backend, db_path, layout) as (store, _):
        for b in (1, 2):
            assert store.write_batch(layout, counted(layout, b, dict.fromkeys(MEASURES, 1)))
        assert store.change_definition(changed) is not None
        assert totals(store, changed) == {"avgPrice": (2, 6, 2, 0), "total": (2, 6, 2, 0), "low": (2, 6, 2, 0),
                                          "most": (None, 0, 0, 2)}
        assert store.write_batch(changed, counted(changed, 3, {"avgPrice": 0, "total": 0, "low": 0, "most": 1}))
        assert totals(store, changed)["most"] == (1, 3, 1, 2)
        with store._engine.connect() as conn:
            names = conn.execute(sa.select(SKIPPED_VALUES_TABLE.c.measure)).scalars().all()
        assert sorted(names) == ["avgPrice", "low", "most", "total"]
