"""Where rollups are kept: :func:`connect_store` opens the store an app's ``@store`` annotation asks for.

Without ``@store`` the rollups go to an embedded SQLite file in the data directory.  ``@store(type='rdbms',
jdbc.url=...)`` names a PostgreSQL, MySQL/MariaDB or SQLite database (see ``urls``); all of them are
``SqlStore``, with the same tables, keys and results.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from tiltframe import lazy

if TYPE_CHECKING:
    from tiltframe.model.aggregations import StoreSpec
    from tiltframe.store.base import Store
    from tiltframe.store.sql import SqlStore

__all__ = ["DB_FILE_NAME", "SqlStore", "Store", "connect_store", "store_location"]

#: File name of the embedded store inside the data directory.
DB_FILE_NAME = "tiltframe.db"


def connect_store(spec: StoreSpec | None, data_dir: str | Path, *, read_only: bool = False) -> Store:
    """Open the store of an app: the embedded SQLite file, or the database ``spec`` names.

    A reader (``read_only=True``) never creates files, directories or tables and never writes.
    """
    from tiltframe.store.sql import SqlStore
    from tiltframe.store.urls import store_target

    target = Path(data_dir) / DB_FILE_NAME if spec is None else store_target(spec)
    if isinstance(target, Path):
        return SqlStore.sqlite(target, read_only=read_only)
    return SqlStore.server(target, read_only=read_only)


def store_location(spec: StoreSpec | None, data_dir: str | Path) -> Path | str:
    """Where a store is, as shown to users: the SQLite file, or the server URL without its password."""
    from tiltframe.store.urls import hide_password, store_target

    target = Path(data_dir) / DB_FILE_NAME if spec is None else store_target(spec)
    return target if isinstance(target, Path) else hide_password(target)


# SQLAlchemy and the store's modules are imported when first used: a Spark worker that imports one of the
# store's light modules (merges, layout) does not load them (tiltframe.lazy).
__getattr__, __dir__ = lazy.exports(__name__, {"SqlStore": "tiltframe.store.sql", "Store": "tiltframe.store.base"})
