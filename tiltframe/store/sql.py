"""``SqlStore``: the rollup tables in a SQL database, written with SQLAlchemy Core.

SQLite, PostgreSQL and MySQL/MariaDB share this class.  It is made of parts, one concern each: the engine
and its transactions (``sql_connections``), the tables (``sql_schema``), batch writes, compaction and
purges (``sql_writes``), reads (``sql_reads``).  Beside them: the table definitions (``schema``),
MySQL/MariaDB's text and keys (``mysql``), the multi-row upserts (``upserts``) and their merge expressions
(``upsert_merges``), commit records (``commits``), recorded events (``recorded``), values a state cannot hold
(``overflow``), query results as DataFrames (``frames``), the ``_FINAL`` views for BI tools (``views``).
"""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa

from tiltframe.store.dialects.lookup import dialect_of
from tiltframe.store.reads.sql_reads import SqlReads
from tiltframe.store.sql_connections import sqlite_engine
from tiltframe.store.writes.sql_writes import SqlWrites


class SqlStore(SqlWrites, SqlReads):
    """The :class:`~tiltframe.store.base.Store` on a SQL database: SQLite, PostgreSQL or MySQL/MariaDB."""

    @classmethod
    def sqlite(cls, path: str | Path, *, read_only: bool = False) -> SqlStore:
        """A store in one SQLite file; a writer creates the file and its directory if missing."""
        path = Path(path)
        if not read_only:
            path.parent.mkdir(parents=True, exist_ok=True)
        return cls(sqlite_engine(path, read_only=read_only), read_only=read_only, path=path)

    @classmethod
    def server(cls, url: sa.URL, *, read_only: bool = False) -> SqlStore:
        """A store in a PostgreSQL or MySQL/MariaDB database (which must exist).

        Positional parameters (``%s``) keep the multi-row upserts on the DBAPI cursor; REPEATABLE READ
        gives every read one snapshot, so a query never sees half of a batch.  MySQL connections speak
        utf8mb4 unless the URL says otherwise (``store.dialects.mysql``).
        """
        dialect = dialect_of(url.get_backend_name())
        args = dialect.connect_args(url)
        engine = sa.create_engine(url, paramstyle="format", pool_pre_ping=True, isolation_level="REPEATABLE READ",
                                  connect_args=args)
        return cls(engine, dialect=dialect, read_only=read_only)

