"""Short-lived readers of one process share each SQLite store (opening one cost twice a small retrieval); a
shared store still sees every commit, and only the most recently used ones stay open."""

from __future__ import annotations

from pathlib import Path

import tiltframe.store.open_stores as registry
from tests.store.conftest import SEC, T0, batch, row
from tiltframe.store.open_stores import StoreRegistry


def test_readers_of_one_data_directory_share_its_store(tmp_path: Path, layout) -> None:
    data = tmp_path / "data"
    with StoreRegistry(data).for_spec(None) as writer:
        writer.write_batch(layout, batch(layout, 1, [row(T0, "A", T0, 1, 0, 1.0, 1)]))
        first = StoreRegistry(data, read_only=True, share_files=True)
        second = StoreRegistry(data, read_only=True, share_files=True)
        shared = first.for_aggregation(layout.spec)
        assert second.for_aggregation(layout.spec) is shared
        assert StoreRegistry(data, read_only=True).for_aggregation(layout.spec) is not shared  # not asked to share
        assert list(shared.read(layout, SEC)["total_SUM"]) == [1]
        first.close()  # a registry leaves a shared store open
        writer.write_batch(layout, batch(layout, 2, [row(T0 + 1000, "A", T0 + 1000, 2, 0, 1.0, 5)]))
        assert list(second.for_aggregation(layout.spec).read(layout, SEC)["total_SUM"]) == [1, 5]


def test_only_the_latest_shared_stores_stay_open(tmp_path: Path, layout, monkeypatch) -> None:
    monkeypatch.setattr(registry, "SHARED_FILES", 2)
    stores = [StoreRegistry(tmp_path / str(i), read_only=True, share_files=True).for_spec(None) for i in range(3)]
    assert stores[0] not in registry._SHARED_FILES.values()
    assert all(s in registry._SHARED_FILES.values() for s in stores[1:])
