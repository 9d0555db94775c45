"""One open store per database for a run, and the check of ``@store`` annotations before running."""

from __future__ import annotations

from pathlib import Path

from tiltframe.spec.model import AggregationSpec, StoreSpec
from tiltframe.store.base import Store


def check_store_spec(spec: StoreSpec) -> None:
    """Refuse stores this release cannot open, before any work starts (without opening anything)."""
    from tiltframe.store.urls import store_target

    store_target(spec)


class StoreRegistry:
    """Opens each store once per process and closes them together."""

    def __init__(self, data_dir: str | Path, *, read_only: bool = False) -> None:
        self.data_dir = Path(data_dir)
        self.read_only = read_only
        self._stores: dict[StoreSpec | None, Store] = {}

    def for_spec(self, spec: StoreSpec | None) -> Store:
        if spec not in self._stores:
            from tiltframe.store import connect_store

            self._stores[spec] = connect_store(spec, self.data_dir, read_only=self.read_only)
        return self._stores[spec]

    def for_aggregation(self, agg: AggregationSpec) -> Store:
        return self.for_spec(agg.store)

    def close(self) -> None:
        for store in self._stores.values():
            store.close()
        self._stores.clear()
