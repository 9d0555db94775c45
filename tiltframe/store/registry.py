"""One open store per database for a run, and the check of ``@store`` annotations before running."""

from __future__ import annotations

from pathlib import Path

from tiltframe.errors import DefinitionError, NotSupportedYet
from tiltframe.spec.model import AggregationSpec, StoreSpec
from tiltframe.store.base import Store

_SERVER_PREFIXES = ("jdbc:postgresql:", "jdbc:mysql:", "jdbc:mariadb:")


def check_store_spec(spec: StoreSpec) -> None:
    """Refuse stores this release cannot open, before any work starts."""
    kind = spec.type.lower()
    url = (spec.url or "").strip()
    if kind not in ("rdbms", "sqlite"):
        msg = f"@store(type='{spec.type}') is not a known store type (expected 'rdbms' with a jdbc.url)"
        raise DefinitionError(msg)
    if url.lower().startswith(_SERVER_PREFIXES):
        msg = (
            f"@store jdbc.url '{url}': PostgreSQL and MySQL/MariaDB stores are not supported yet; use the "
            f"embedded store (no @store) or jdbc:sqlite:PATH"
        )
        raise NotSupportedYet(msg)
    if not url.lower().startswith("jdbc:sqlite:") and not (kind == "sqlite" and url):
        msg = f"@store jdbc.url '{url}' is not a supported JDBC URL (expected jdbc:sqlite:PATH)"
        raise DefinitionError(msg)


class StoreRegistry:
    """Opens each store once per process and closes them together."""

    def __init__(self, data_dir: str | Path, *, read_only: bool = False) -> None:
        self.data_dir = Path(data_dir)
        self.read_only = read_only
        self._stores: dict[StoreSpec | None, Store] = {}

    def for_spec(self, spec: StoreSpec | None) -> Store:
        if spec not in self._stores:
            from tiltframe.store import connect_store

            if spec is not None:
                check_store_spec(spec)
            self._stores[spec] = connect_store(spec, self.data_dir, read_only=self.read_only)
        return self._stores[spec]

    def for_aggregation(self, agg: AggregationSpec) -> Store:
        return self.for_spec(agg.store)

    def close(self) -> None:
        for store in self._stores.values():
            store.close()
        self._stores.clear()
