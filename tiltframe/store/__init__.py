"""Where rollups are kept: :func:`connect_store` picks the store an app's ``@store`` annotation asks for.

Without ``@store`` the rollups go to an embedded SQLite file in the data directory; ``jdbc:sqlite:PATH``
names another SQLite file.  Server databases (PostgreSQL, MySQL/MariaDB) share ``SqlStore`` and arrive
with server-store support.
"""

from __future__ import annotations

from pathlib import Path

from tiltframe.errors import DefinitionError, NotSupportedYet
from tiltframe.spec.model import StoreSpec
from tiltframe.store.base import Store
from tiltframe.store.sql import SqlStore

__all__ = ["DB_FILE_NAME", "SqlStore", "Store", "connect_store", "sqlite_path"]

#: File name of the embedded store inside the data directory.
DB_FILE_NAME = "tiltframe.db"

_SERVER_PREFIXES = ("jdbc:postgresql:", "jdbc:mysql:", "jdbc:mariadb:", "postgresql", "mysql", "mariadb")
_LATER = (
    "the PostgreSQL/MySQL store arrives with server-store support; use the embedded store (no @store) "
    "or jdbc:sqlite:PATH for now"
)


def connect_store(spec: StoreSpec | None, data_dir: str | Path, *, read_only: bool = False) -> Store:
    """Open the store of an app: the embedded SQLite file, or the SQLite file ``spec`` names.

    A reader (``read_only=True``) never creates files or directories and never writes.
    """
    if spec is None:
        return SqlStore.sqlite(Path(data_dir) / DB_FILE_NAME, read_only=read_only)
    return SqlStore.sqlite(sqlite_path(spec), read_only=read_only)


def sqlite_path(spec: StoreSpec) -> Path:
    """The SQLite file of a ``@store`` annotation; anything else is refused with what to use instead."""
    kind = spec.type.strip().lower()
    url = (spec.url or "").strip()
    if kind not in ("rdbms", "sqlite"):
        msg = f"@store(type='{spec.type}') is not supported yet; {_LATER}"
        raise NotSupportedYet(msg)
    if not url:
        msg = f"@store(type='{spec.type}') needs jdbc.url, e.g. jdbc.url='jdbc:sqlite:rollups.db'"
        raise DefinitionError(msg)
    lowered = url.lower()
    if lowered.startswith(_SERVER_PREFIXES):
        msg = f"@store(jdbc.url='{url}'): {_LATER}"
        raise NotSupportedYet(msg)
    for prefix in ("jdbc:sqlite:", "sqlite:///"):
        if lowered.startswith(prefix):
            return _plain_path(url[len(prefix):], url)
    if kind == "sqlite" and ":" not in url.split("/", 1)[0]:
        return _plain_path(url, url)
    msg = f"@store(jdbc.url='{url}') is not a SQLite URL; {_LATER}"
    raise NotSupportedYet(msg)


def _plain_path(rest: str, url: str) -> Path:
    """``PATH`` of ``jdbc:sqlite:PATH`` (relative to the current directory), without URL options."""
    rest = rest.split("?", 1)[0]
    if rest.lower().startswith("file:"):
        rest = rest[len("file:"):]
    if not rest or rest == ":memory:":
        msg = f"@store(jdbc.url='{url}') must name a database file (an in-memory database would be lost)"
        raise DefinitionError(msg)
    return Path(rest)
