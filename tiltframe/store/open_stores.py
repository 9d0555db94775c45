"""One open store per database for a run, and the check of ``@store`` annotations before running."""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from pathlib import Path

from tiltframe.model.aggregations import AggregationSpec, StoreSpec
from tiltframe.store.base import Store


def default_data_dir() -> Path:
    """``$TILTFRAME_DATA_DIR``, else ``./tiltframe-data``: where the embedded store and checkpoints live."""
    return Path(os.environ.get("TILTFRAME_DATA_DIR", "tiltframe-data"))


def check_store_spec(spec: StoreSpec) -> None:
    """Refuse stores this release cannot open, before any work starts (without opening anything)."""
    from tiltframe.store.urls import store_target

    store_target(spec)


#: Read-only SQLite stores shared by the short-lived readers of a process (``tf.query``, ``tf.inspect``): opening
#: one cost twice a small retrieval, and each read checks that its file is unchanged (``store.reads.sqlite_read``).
#: A server store is not shared, so that no connection outlives the call that opened it.
#: The most recently used are kept; an older one is closed (a read it is serving finishes first).
_SHARED_FILES: OrderedDict[Path, Store] = OrderedDict()
SHARED_FILES = 8
_SHARED_LOCK = threading.Lock()


class StoreRegistry:
    """Opens each store once per registry and closes them together; with ``share_files``, a read-only registry
    takes SQLite stores from the process-wide set instead (and leaves them open)."""

    def __init__(self, data_dir: str | Path, *, read_only: bool = False, share_files: bool = False) -> None:
        self.data_dir = Path(data_dir)
        self.read_only = read_only
        self.share_files = share_files and read_only
        self._stores: dict[StoreSpec | None, Store] = {}

    def for_spec(self, spec: StoreSpec | None) -> Store:
        from tiltframe.store import DB_FILE_NAME, connect_store
        from tiltframe.store.urls import store_target

        if spec in self._stores:
            return self._stores[spec]
        if self.share_files:
            target = self.data_dir / DB_FILE_NAME if spec is None else store_target(spec)
            if isinstance(target, Path):
                with _SHARED_LOCK:
                    key = target.resolve()
                    if key in _SHARED_FILES:
                        _SHARED_FILES.move_to_end(key)
                        return _SHARED_FILES[key]
                    store = _SHARED_FILES[key] = connect_store(spec, self.data_dir, read_only=True)
                    while len(_SHARED_FILES) > SHARED_FILES:
                        _SHARED_FILES.popitem(last=False)[1].close()
                    return store
        self._stores[spec] = connect_store(spec, self.data_dir, read_only=self.read_only)
        return self._stores[spec]

    def for_aggregation(self, agg: AggregationSpec) -> Store:
        return self.for_spec(agg.store)

    def close(self) -> None:
        for store in self._stores.values():
            store.close()
        self._stores.clear()
