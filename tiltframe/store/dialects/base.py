"""What a database must say for a SQL store to run on it: one :class:`StoreDialect` per database
(``sqlite``, ``postgresql``, ``mysql``), so that the store's modules ask the dialect instead of branching
on the database's name.

The base class holds what every server shares (row locks, READ COMMITTED writes, the portable ``CREATE
OR REPLACE VIEW``, ``ALTER TABLE ... RENAME``); a dialect overrides what its database does otherwise.
The capabilities it lacks are plain flags (``bulk_loads``, ``alters_primary_key``, ...), read where
the store chooses a way: a new store says what it does not support, as ibis's backends do.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, ClassVar

import pyarrow as pa
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tiltframe.aggregates.layout import AggregationLayout
from tiltframe.errors import StoreError

#: Doubles a database cannot hold, as (words for the error, Arrow predicate of the values it cannot).
Unholdable = tuple[str, Callable[[pa.Array], pa.Array]]


class StoreDialect:
    """One database's SQL and abilities, as the store uses them.  Instances are stateless singletons
    (``store.dialects.lookup.dialect_of``), so a dialect may key a cache."""

    #: SQLAlchemy's names of the database (``Dialect.name``); the first names it in messages.
    names: ClassVar[tuple[str, ...]]
    #: Longest table, view or column name.
    max_identifier_length: ClassVar[int] = 63
    #: Rows per multi-row upsert statement (``store.writes.upserts``).
    rows_per_statement: ClassVar[int] = 500
    #: Whether the database takes bulk loads and staged rows from Spark's executors
    #: (``store.writes.appends``, ``store.writes.staging``).
    bulk_loads: ClassVar[bool] = True
    #: Whether a merge's sums must fail the statement themselves where a state cannot hold them (the
    #: server fails an out-of-range BIGINT on its own).
    checks_sums: ClassVar[bool] = False
    #: The doubles it cannot hold; None: it holds NaN and both infinities.
    unholdable: ClassVar[Unholdable | None] = None
    #: Whether ``ALTER TABLE`` can change a primary key (else the table is copied into a new one).
    alters_primary_key: ClassVar[bool] = True
    #: Whether DDL joins the transaction (MySQL commits each statement by itself).
    transactional_ddl: ClassVar[bool] = True
    #: Whether a write transaction locks its aggregation's row of the registry (SQLite's one write lock,
    #: taken at ``BEGIN``, already excludes every other writer).
    locks_rows: ClassVar[bool] = True
    #: Whether a long sum reads back as DECIMAL (MySQL's ``SUM`` of BIGINT).
    decimal_long_sums: ClassVar[bool] = False
    #: Whether text compares byte for byte only in columns of a binary collation, which a merged read must
    #: check before it lets the server group or compare text (MySQL's default collations fold case).
    collated_text: ClassVar[bool] = False

    @property
    def name(self) -> str:
        return self.names[0]

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

    # --- connections -------------------------------------------------------------------------------

    def connect_args(self, url: sa.URL) -> dict[str, object]:
        """The DBAPI's connection arguments for a store at ``url``."""
        return {}

    def write_connection(self, conn: Connection) -> Connection:
        """``conn`` set up for a store's write transaction: READ COMMITTED, so that once a writer holds its
        aggregation's lock it reads what the transaction before it committed."""
        return conn.execution_options(isolation_level="READ COMMITTED")

    def exclusive(self, conn: Connection) -> Connection:
        """``conn`` whose transactions exclude other writers from their start, where the database needs
        telling (a server's row locks do it when taken)."""
        return conn

    @contextmanager
    def schema_lock(self, conn: Connection) -> Iterator[None]:
        """Hold the store-wide lock of schema changes around the caller's transaction on ``conn`` (several
        shards' pipelines start at once; ``CREATE TABLE IF NOT EXISTS`` is no guard against a concurrent
        one)."""
        release = self._take_schema_lock(conn)
        conn.commit()
        try:
            yield
        finally:
            try:
                if conn.in_transaction():
                    conn.rollback()
                conn.exec_driver_sql(release)
                conn.commit()
            except sa.exc.DBAPIError:
                conn.invalidate()  # a pooled session must not keep the lock; closing it releases it

    def _take_schema_lock(self, conn: Connection) -> str:
        """Take the schema lock on ``conn``; returns the statement that releases it."""
        raise NotImplementedError

    # --- statements ----------------------------------------------------------------------------------

    def max_parameters(self) -> int:
        """Bound parameters one statement may carry."""
        return 30_000

    def upsert(self, table: sa.Table, layout: AggregationLayout, rows: Any) -> sa.Executable:
        """Insert ``rows`` (a list of row dicts, or a select of the table's columns) into ``table``,
        merging each into the stored row of its key (``store.writes.upsert_merges``)."""
        raise NotImplementedError

    def placeholders(self, dialect: sa.Dialect) -> sa.Dialect:
        """The SQLAlchemy dialect that compiles the merge statements for the raw cursor."""
        return dialect

    def merge_cursor(self, conn: Connection) -> tuple[Any, dict[str, Any]]:
        """The DBAPI cursor that runs the merge statements, and the extra arguments of its ``execute``."""
        return conn.connection.cursor(), {}

    def agg_time(self, ms: sa.ColumnElement[int]) -> sa.ColumnElement[object]:
        """Epoch milliseconds ``ms`` as the database's time type, exactly and whatever the session's zone."""
        raise NotImplementedError

    def replace_view(self, conn: Connection, quoted: str, body: str) -> None:
        """Create view ``quoted`` as ``body``, replacing whatever view of that name was there."""
        conn.exec_driver_sql(f"CREATE OR REPLACE VIEW {quoted} AS {body}")

    @staticmethod
    def recreate_view(conn: Connection, quoted: str, body: str) -> None:
        """Drop view ``quoted`` if there and create it as ``body`` (where ``CREATE OR REPLACE`` cannot)."""
        conn.exec_driver_sql(f"DROP VIEW IF EXISTS {quoted}")
        conn.exec_driver_sql(f"CREATE VIEW {quoted} AS {body}")

    def rename_tables(self, conn: Connection, renames: Sequence[tuple[str, str]]) -> None:
        """Rename each (old, new) of ``renames``, in order, inside the caller's transaction."""
        quote = conn.dialect.identifier_preparer.quote
        for a, b in renames:
            conn.exec_driver_sql(f"ALTER TABLE {quote(a)} RENAME TO {quote(b)}")

    # --- a read's columns ----------------------------------------------------------------------------

    def stored_double(self, column: sa.ColumnElement[Any]) -> sa.ColumnElement[Any]:
        """A stored double as aggregates should see it (NaN a NULL where the database keeps NaN apart)."""
        return column

    def long_sum(self, merged: sa.ColumnElement[Any]) -> sa.ColumnElement[Any]:
        """``SUM`` of a BIGINT column, read back as one (or failing beyond it)."""
        return merged

    def ordered_text(self, column: sa.ColumnElement[Any]) -> sa.ColumnElement[Any]:
        """A text column that ``<``/``>`` compare by code point, as Python and Spark do."""
        return column

    # --- keys and tables -----------------------------------------------------------------------------

    def hashes_keys(self, layout: AggregationLayout) -> bool:
        """Whether ``layout``'s tables are keyed by a digest of their string keys."""
        return False

    def short_text_keys(self, hashed: bool) -> bool:
        """Whether the string key columns of a table are VARCHAR(255) (a key the database cannot index
        whole, in a table keyed by its text)."""
        return False

    def shard_column_type(self, conn: Connection) -> str:
        """The type of a ``SHARD_ID`` column added to an existing table."""
        return "VARCHAR(255)"

    def add_shard_key(self, conn: Connection, layout: AggregationLayout, table: sa.Table) -> None:
        """Make the added and filled ``SHARD_ID`` column of ``table`` NOT NULL and part of its primary key
        (``store.lifecycle.table_rebuilds.alter_with_shard``)."""
        raise self._unsupported("changing a primary key in place")

    # --- bulk loads and staging ----------------------------------------------------------------------

    def loads_local_files(self, conn: Connection) -> bool:
        """Whether the server takes this client's bulk loads."""
        return self.bulk_loads

    def bulk_append(self, conn: Connection, layout: AggregationLayout, table: sa.Table, data: pa.Table) -> int:
        """Insert ``data``, whose keys ``table`` does not hold, by the server's bulk load; the rows it took."""
        raise self._unsupported("bulk loads")

    def staging_table(self, name: str, columns: Sequence[sa.Column[Any]], tag: str, level: str) -> sa.Table:
        """The staging table ``name`` of ``columns``, laid out for reading one level's rows of some tags."""
        raise self._unsupported("staged writes")

    def staging_load(self, quoted_table: str, names: str) -> tuple[str, str]:
        """The statement executors load the staging table with, and its kind (``copy`` or ``load``)."""
        raise self._unsupported("staged writes")

    def staging_conninfo(self, url: sa.URL) -> str:
        """What an executor connects with (its driver's URL, password included)."""
        return url.render_as_string(hide_password=False)

    def merge_staged(self, conn: Connection, layout: AggregationLayout, staged: sa.Table, target: sa.Table,
                     where: Sequence[sa.ColumnElement[bool]]) -> int:
        """Merge the rows of ``staged`` matching ``where`` into ``target``; returns the rows merged."""
        raise self._unsupported("staged writes")

    def _unsupported(self, what: str) -> StoreError:
        return StoreError(f"a {self.name} store has no {what}")

