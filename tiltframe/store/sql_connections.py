"""The engine of a SQL store and its transactions: SQLite's file and pragmas, the servers' isolation, the
locks that keep writers of one aggregation (and schema changes) apart, and failures as ``StoreError``."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any, NamedTuple, Self

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from tiltframe.aggregates.layout import AggregationLayout
from tiltframe.errors import StoreError
from tiltframe.model.durations import Granularity
from tiltframe.store.base import Capabilities
from tiltframe.store.dialects.base import StoreDialect
from tiltframe.store.dialects.lookup import dialect_of
from tiltframe.store.lifecycle.definitions import Definition, DefinitionPlan, backfill_hint, plan
from tiltframe.store.reads.frames import fetch_compiled
from tiltframe.store.reads.merged_reads import MergedReads
from tiltframe.store.reads.read_plans import ReadPlans, RegistrationRead
from tiltframe.store.reads.sqlite_read import change_token, check_unchanged, kept, open_reader, stale
from tiltframe.store.schema import (
    AGGREGATIONS,
    AGGREGATIONS_TABLE,
    DEFINITIONS,
    DEFINITIONS_TABLE,
    PURGES_TABLE,
    level_tables,
)
from tiltframe.store.urls import hide_password


class Registration(NamedTuple):
    """An aggregation's row of the registry: its definition's digest, zone, levels and first registration."""

    name: str
    spec_hash: str
    zone: str
    granularities: str
    created_at: int


#: The registry's row of one aggregation, compiled once per store (``store.reads.read_plans``).
_REGISTRATION = RegistrationRead()

#: How long an SQLite connection waits for another writer's lock before it fails.
BUSY_TIMEOUT_MS = 30_000


def sqlite_engine(path: Path, *, read_only: bool) -> Engine:
    """Engine on one SQLite file: WAL so readers never block the writer and see committed batches only.

    A read-only engine opens the file with ``mode=ro`` and ``query_only``, creates no file (immutable
    while no writer is active: ``sqlite_read``) and never runs a pragma that writes.  pysqlite's implicit
    transactions are switched off (``isolation_level=None``); the ``begin`` hook emits ``BEGIN`` itself,
    ``BEGIN IMMEDIATE`` for writes so that the replay check and the merge see one state of the database.
    """

    def connect() -> sqlite3.Connection:
        timeout = BUSY_TIMEOUT_MS / 1000
        if read_only:  # creates no file, even on a read-only disk (sqlite_read)
            conn = open_reader(path, timeout)
            conn.execute("PRAGMA query_only = ON")
        else:
            conn = sqlite3.connect(path, timeout=timeout, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA page_size = 16384")  # takes effect only on a new file; faster merges
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        return conn

    # A reader decides at each transaction whether the file is read as immutable: a kept connection serves
    # it only while not stale, and one on the WAL path is closed when given back (sqlite_read).
    pool = {"pool_size": 4, "max_overflow": -1} if read_only else {}
    engine = sa.create_engine(f"sqlite:///{path.resolve()}", creator=connect, **pool)
    if read_only:
        sa.event.listen(engine, "commit", lambda conn: check_unchanged(conn.connection.dbapi_connection))
        sa.event.listen(engine, "checkout", _refuse_stale)
        sa.event.listen(engine, "checkin", _close_unless_valid)

    @sa.event.listens_for(engine, "begin")
    def _begin(conn: Connection) -> None:
        conn.exec_driver_sql(conn.get_execution_options().get("tiltframe_begin", "BEGIN"))

    return engine


def _refuse_stale(dbapi_connection: Any, record: Any, proxy: Any) -> None:
    if stale(dbapi_connection):
        raise sa.exc.DisconnectionError  # the pool opens a new connection in its place


def _close_unless_valid(dbapi_connection: Any, record: Any) -> None:
    if dbapi_connection is not None and not kept(dbapi_connection):
        record.invalidate()


class SqlConnections:
    """The store's engine and its transactions: what every part of :class:`~tiltframe.store.sql.SqlStore`
    reads and writes through."""

    def __init__(self, engine: Engine, *, dialect: StoreDialect | None = None, read_only: bool = False,
                 path: Path | None = None) -> None:
        self._engine = engine
        #: What differs on this store's database (``store.dialects``).
        self.dialect = dialect_of(engine) if dialect is None else dialect
        self._read_only = read_only
        self._path = path
        self.url = hide_password(engine.url)
        self.capabilities = Capabilities(max_identifier_length=self.dialect.max_identifier_length,
                                         staged_writes=self.dialect.bulk_loads and not read_only)
        self._tables_cache: dict[tuple[str, str, bool], dict[Granularity, sa.Table]] = {}
        self._ready: set[tuple[str, str, bool]] = set()
        self._plans = ReadPlans(engine.dialect)
        self._merged = MergedReads(self._plans)
        # Tables seen to exist, so that a read does not ask the catalog each time; forgotten by every write
        # transaction (which may drop one) and by a failed read (another process may have dropped one).
        self._present: set[str] = set()
        self._staging_ready: set[tuple[str, str]] = set()
        self._local_files: bool | None = None  # whether a MariaDB or MySQL server takes LOAD DATA LOCAL
        # Per aggregation, the measures' complete-from instants as of a change token (``SqlReads.complete_from``:
        # every retrieval asks, and reading them cost nearly what reading a small level does).
        self._complete_from: dict[str, tuple[object, dict[str, int]]] = {}

    def __repr__(self) -> str:
        return f"SqlStore({self.url!r}{', read_only=True' if self._read_only else ''})"

    def change_token(self) -> object | None:
        """A value that changes whenever anything is committed to the store, for readers that keep answers
        (``http.reader``): the embedded store's (``sqlite_read.change_token``); None for a server, whose
        answers are not kept."""
        return None if self._path is None else change_token(self._path)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._engine.dispose()

    def _tables(self, layout: AggregationLayout) -> dict[Granularity, sa.Table]:
        key = (layout.name, layout.spec_hash, layout.partitioned)
        if key not in self._tables_cache:
            self._tables_cache[key] = level_tables(layout, self.dialect)
        return self._tables_cache[key]

    def _check_same_spec(self, conn: Connection, layout: AggregationLayout, row: Registration, *,
                         recorded: bool = True, reading: bool = False) -> None:
        """Refuse stored tables of another definition, saying what changed and which command applies it; a
        pre-aggregated table's recorded definition can be followed, and an aggregation's changed only where
        nothing stored changes (an attribute no aggregate reads, retention) is served by the same tables.
        ``reading``: a definition whose measures and levels the tables all hold reads them (with fewer
        measures or levels, ``retrieval.stored_apps``)."""
        if row.spec_hash == layout.spec_hash:
            return
        change = None
        if layout.table is not None:
            if recorded:
                msg = (f"the stored table {layout.name} in {self.url} was made for a different definition of it; "
                       f"the change is applied by the next insert into it, or now by: tiltframe migrate APP")
                raise StoreError(msg)
        elif (stored := self._definition(conn, layout.name)) is not None:
            change = plan(stored, Definition.of(layout, layout.app_name))
            if change.shapes_nothing or (reading and change.reads_stored):
                return
        raise StoreError(self._changed_definition(layout, row, change))

    def _changed_definition(self, layout: AggregationLayout, row: Registration, change: DefinitionPlan | None) -> str:
        """Why the stored tables of ``layout`` are not its own (``change``: the plan from the recorded definition,
        None when none was recorded), and what to do about it."""
        if change is None:
            return (f"the stored tables of aggregation {layout.name} in {self.url} were made for a different "
                    f"definition of {layout.name} (stored spec hash {row.spec_hash}, this definition "
                    f"{layout.spec_hash}), by a tiltframe that did not record definitions, so the change cannot be "
                    f"planned; run the app that made them once (it records its definition), then: tiltframe "
                    f"migrate APP -d DIR")
        if change.other_app:
            return (f"aggregation {layout.name} in {self.url} belongs to app {change.stored.app!r}, not to app "
                    f"{change.new.app!r}; two apps cannot share an aggregation's tables: give this one another "
                    f"name, or use another data directory or store (the other app's tables are left as they are)")
        steps = "; ".join(change.steps()) or "nothing stored changes"
        added = f" ({backfill_hint([m.name for m in change.added], layout.input_stream)})" if change.added else ""
        return (f"the stored tables of aggregation {layout.name} in {self.url} were made for an earlier definition "
                f"of it ({steps}); see the plan with: tiltframe validate APP -d DIR, and apply it with: tiltframe "
                f"migrate APP -d DIR{added}")

    def _definition(self, conn: Connection, name: str) -> Definition | None:
        """The recorded definition of aggregation ``name`` (None: not recorded, or no such table yet)."""
        if not self._has_table(conn, DEFINITIONS):
            return None
        text = conn.execute(sa.select(DEFINITIONS_TABLE.c.definition)
                            .where(DEFINITIONS_TABLE.c.name == name)).scalar()
        return None if text is None else Definition.from_json(text)

    @contextmanager
    def write_transaction(self, action: str, *, schema: bool = False) -> Iterator[Connection]:
        """One write transaction for tables of other kinds (``store.raw_rows``), its failures a ``StoreError``
        naming ``action`` and the store; ``schema`` for one that changes the schema (excluding every other
        schema change)."""
        self._require_writable()
        with self._failures(action), self._write(schema=schema) as conn:
            yield conn

    @contextmanager
    def read_transaction(self, action: str) -> Iterator[Connection | None]:
        """One read transaction (None when the embedded store's file does not exist yet), its failures a
        ``StoreError`` naming ``action`` and the store."""
        with self._failures(action):
            if not self._exists():
                yield None
                return
            with self._engine.connect() as conn, conn.begin():
                yield conn

    @contextmanager
    def _failures(self, action: str) -> Iterator[None]:
        dbapi_error: type[Exception] = getattr(self._engine.dialect.loaded_dbapi, "Error", sqlite3.Error)
        try:
            yield
        except (sa.exc.SQLAlchemyError, dbapi_error) as e:
            self._present.clear()
            cause = getattr(e, "orig", None) or e
            raise StoreError(f"could not {action} in {self.url}: {hide_password(str(cause))}") from e

    def _require_writable(self) -> None:
        if self._read_only:
            msg = f"the store {self.url} was opened read-only"
            raise StoreError(msg)

    def _exists(self) -> bool:
        return self._path is None or self._path.exists()

    @contextmanager
    def _write(self, layout: AggregationLayout | None = None, *, schema: bool = False) -> Iterator[Connection]:
        """One write transaction that commits on success; with ``layout``, it also excludes every other
        write transaction of that aggregation (batch writes and purges) until it ends; with ``schema``,
        every other schema change of the store (pipelines of several shards start at once, and
        ``CREATE TABLE IF NOT EXISTS`` is no guard against a concurrent one on PostgreSQL).

        How is the dialect's (``StoreDialect.write_connection``, ``schema_lock``, ``locks_rows``): SQLite's
        ``BEGIN IMMEDIATE`` takes the database's one write lock at once; a server connection writes in READ
        COMMITTED and locks the aggregation's row of the registry table.
        """
        self._present.clear()  # a write may drop a table
        conn = self.dialect.write_connection(self._engine.connect())
        with conn, self.dialect.schema_lock(conn) if schema else nullcontext(), conn.begin():
            if layout is not None and self.dialect.locks_rows:
                a = AGGREGATIONS_TABLE.c
                conn.execute(sa.select(a.name).where(a.name == layout.name).with_for_update())
            yield conn

    def _has_table(self, conn: Connection, name: str) -> bool:
        """Whether table ``name`` exists, asking the catalog only until it has been seen."""
        if name in self._present:
            return True
        found = sa.inspect(conn).has_table(name)
        if found:
            self._present.add(name)
        return found

    def _registration(self, conn: Connection, layout: AggregationLayout) -> Registration | None:
        """The registry's row of ``layout`` (its definition's hash, zone and levels); None when the store
        has no registry or the aggregation is not in it.  Read through the raw cursor with a statement
        compiled once: building and running a SQLAlchemy select took a tenth of a small retrieval."""
        if not self._has_table(conn, AGGREGATIONS):
            return None
        rows = fetch_compiled(conn, self._plans.compiled(_REGISTRATION), {"name": layout.name})
        return Registration(*rows[0]) if rows else None

    @contextmanager
    def _read(self, layout: AggregationLayout) -> Iterator[tuple[Connection, Registration]]:
        """One read transaction (one snapshot) of a store that holds ``layout``, and its registration."""
        no_data = f"no data for aggregation {layout.name} in {self.url}; run the app first"
        if not self._exists():
            raise StoreError(no_data)
        with self._engine.connect() as conn, conn.begin():
            row = self._registration(conn, layout)
            if row is None:
                raise StoreError(no_data)
            self._check_same_spec(conn, layout, row, reading=True)
            yield conn, row

    def _purged_before(self, conn: Connection, layout: AggregationLayout) -> dict[str, int]:
        """Per table name of ``layout``: the start before which its buckets were purged."""
        p = PURGES_TABLE.c
        rows = conn.execute(sa.select(p.granularity, p.purged_before).where(p.aggregation == layout.name)).all()
        return {f"{layout.name}_{suffix}": int(before) for suffix, before in rows}

    @contextmanager
    def _errors(self, action: str, layout: AggregationLayout) -> Iterator[None]:
        """Database failures become a ``StoreError`` naming the store and the aggregation."""
        with self._failures(f"{action} aggregation {layout.name}"):
            yield
