"""The dialect of a store's database, found by SQLAlchemy's name of it."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from tiltframe.errors import StoreError
from tiltframe.store.dialects.base import StoreDialect
from tiltframe.store.dialects.mysql import MysqlDialect
from tiltframe.store.dialects.postgresql import PostgresqlDialect
from tiltframe.store.dialects.sqlite import SqliteDialect

_BY_NAME = {name: d for d in (SqliteDialect(), PostgresqlDialect(), MysqlDialect()) for name in d.names}


def dialect_of(source: Connection | Engine | sa.Dialect | str) -> StoreDialect:
    """The dialect of ``source``'s database (a connection, an engine, SQLAlchemy's dialect or its name)."""
    name = source if isinstance(source, str) else source.name if isinstance(source, sa.Dialect) \
        else source.dialect.name
    found = _BY_NAME.get(name)
    if found is None:
        msg = f"no store for SQL database {name!r} (tiltframe stores: SQLite, PostgreSQL, MySQL/MariaDB)"
        raise StoreError(msg)
    return found
