"""``SqlStore``: the rollup tables in a SQL database, written with SQLAlchemy Core.

SQLite, PostgreSQL and MySQL/MariaDB share this class; what differs per dialect (engine setup, the cursor
that runs the merge, identifier limits) is kept apart below, and in their own modules: the tables
(``schema``), MySQL/MariaDB's text and keys (``mysql``), the upsert's merge expressions (``merges``),
commit records (``commits``), recorded events (``recorded``), values a state cannot hold (``overflow``),
query results as DataFrames (``frames``), the ``_FINAL`` views for BI tools (``views``).

Merging a batch is the hot path (millions of partial rows per micro-batch at the finest level).  What
made it fast on SQLite: sort the rows by primary key first (the B-tree then fills and updates pages in
order), flatten the Arrow columns into one Python list by slice assignment, and upsert with one cached
multi-row ``INSERT ... VALUES (...), (...) ... ON CONFLICT DO UPDATE`` statement per 500 rows through the
raw DBAPI cursor.  That is about twice as fast as ``executemany`` into a staging table followed by one
``INSERT ... SELECT ... ON CONFLICT``, and keeps no temporary table around.
"""

from __future__ import annotations

import dataclasses
import logging
import sqlite3
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Connection, Engine

from tiltframe.errors import DefinitionError, StoreError
from tiltframe.spec.durations import Granularity
from tiltframe.spec.model import AttrType
from tiltframe.spec.tables import TableSpec
from tiltframe.store import commits, mysql, staging
from tiltframe.store.base import (
    REJECTED_COLUMNS,
    REJECTED_TIMES,
    AggregationInfo,
    BatchWrite,
    Capabilities,
    KeyTerm,
    PipelineState,
    PurgeInfo,
    RecordKind,
    StagedBatch,
    TableInfo,
)
from tiltframe.store.commits import now_ms
from tiltframe.store.frames import ARROW_TYPES, fetch_all, fetch_compiled, typed_frame
from tiltframe.store.layout import AGG_TIMESTAMP, SHARD_ID, AggregationLayout
from tiltframe.store.merged_reads import MergedRead, MergedReads, out_of_range
from tiltframe.store.merges import upsert_statement
from tiltframe.store.overflow import check_holdable, explain_overflow
from tiltframe.store.read_plans import RangeRead, ReadPlans
from tiltframe.store.recorded import insert_recorded
from tiltframe.store.retries import retried
from tiltframe.store.schema import (
    AGGREGATIONS,
    AGGREGATIONS_TABLE,
    BATCHES,
    BATCHES_TABLE,
    PURGES_TABLE,
    REJECTED,
    REJECTED_TABLE,
    SHARED,
    TABLES_TABLE,
    level_tables,
)
from tiltframe.store.sqlite_read import change_token, check_unchanged, kept, open_reader, stale
from tiltframe.store.views import VIEW_SUFFIX as VIEW_SUFFIX  # where it used to live
from tiltframe.store.views import replace_view, view_name

logger = logging.getLogger(__name__)

#: Rows per multi-row upsert statement, and rows turned into Python objects at a time (bounds memory).
ROWS_PER_STATEMENT = 500
#: SQLite's cap: its statements cost no round trip, so more rows per statement gain nothing, while the
#: text of a statement compiles in time linear in its rows (0.1 s per table at 500 rows, paid by the
#: first batch of every run).
SQLITE_ROWS_PER_STATEMENT = 100
CHUNK_ROWS = 50_000
#: Upsert SQL per (dialect, server version, spec, sharding, table, rows per statement), shared by every
#: store of the process: compiling a 100-row statement takes SQLAlchemy about 10 ms, which every run (every
#: new store) would pay again.
_STATEMENTS: dict[tuple[Any, ...], tuple[str, list[int] | None]] = {}
BUSY_TIMEOUT_MS = 30_000

# --- dialect-specific parts ------------------------------------------------------------------------------

MAX_IDENTIFIER_LENGTH = {"sqlite": 1024, "postgresql": 63, "mysql": 64, "mariadb": 64}


def max_parameters(dialect: sa.Dialect) -> int:
    """Bound parameters one statement may carry (SQLite before 3.32 allowed only 999)."""
    if dialect.name == "sqlite":
        return 32_766 if sqlite3.sqlite_version_info >= (3, 32) else 999
    return 30_000


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


# --- Arrow preparation -----------------------------------------------------------------------------------


def prepare_rows(layout: AggregationLayout, data: pa.Table, shard_id: str | None = None) -> pa.Table:
    """The table's columns in order and Arrow types, sorted by primary key (faster B-tree work).

    Partitioned rows carry their writer's ``SHARD_ID``: the rows' own column (the workers of a
    pre-aggregated table), else ``shard_id`` (the deployment's shard).
    """
    if layout.partitioned and SHARD_ID not in data.column_names:  # else each row names its writer (a worker)
        if shard_id is None:
            msg = f"aggregation {layout.name} is partitioned by shard, but the batch has no shard id"
            raise StoreError(msg)
        data = data.append_column(SHARD_ID, pa.array([shard_id] * data.num_rows, pa.string()))
    types = layout.stored_column_types
    missing = [c for c in types if c not in data.column_names]
    if missing:
        got = ", ".join(data.column_names)
        msg = f"rows for {layout.name} lack the columns {', '.join(missing)} (got {got})"
        raise StoreError(msg)
    data = data.select(list(types))
    for k in layout.stored_key_names:
        if data.column(k).null_count:
            msg = f"rows for {layout.name} hold NULL in key column {k}; keys are never NULL"
            raise StoreError(msg)
    target = pa.schema([pa.field(c, ARROW_TYPES[t]) for c, t in types.items()])
    if data.schema != target:
        data = data.cast(target)
    if data.num_rows < 2:
        return data
    sort_keys = [_sort_key(data.column(k)) for k in reversed(layout.stored_key_names)]
    return data.take(pa.array(np.lexsort(sort_keys))).combine_chunks()


def _sort_key(col: pa.ChunkedArray) -> np.ndarray:
    """A numeric array ordering like ``col``; strings become their rank among the distinct values."""
    if pa.types.is_string(col.type):
        encoded = pc.dictionary_encode(col.combine_chunks())
        rank = pc.rank(encoded.dictionary, sort_keys="ascending", tiebreaker="dense").to_numpy()
        return rank[encoded.indices.to_numpy(zero_copy_only=False)]
    return col.to_numpy()


def _flatten(data: pa.Table) -> list[Any]:
    """Row-major Python values of ``data`` (``[r0c0, r0c1, ..., r1c0, ...]``), built by slice assignment."""
    width = data.num_columns
    flat: list[Any] = [None] * (data.num_rows * width)
    for j, col in enumerate(data.columns):
        flat[j::width] = col.to_pylist()
    return flat


def _refuse_stale(dbapi_connection: Any, record: Any, proxy: Any) -> None:
    if stale(dbapi_connection):
        raise sa.exc.DisconnectionError  # the pool opens a new connection in its place


def _close_unless_valid(dbapi_connection: Any, record: Any) -> None:
    if dbapi_connection is not None and not kept(dbapi_connection):
        record.invalidate()


class SqlStore:
    """The :class:`~tiltframe.store.base.Store` on a SQL database: SQLite, PostgreSQL or MySQL/MariaDB."""

    def __init__(self, engine: Engine, *, read_only: bool = False, path: Path | None = None) -> None:
        self._engine = engine
        self._read_only = read_only
        self._path = path
        self.url = engine.url.render_as_string(hide_password=True)
        dialect = engine.dialect.name
        self.capabilities = Capabilities(max_identifier_length=MAX_IDENTIFIER_LENGTH.get(dialect, 63),
                                         staged_writes=(dialect == "postgresql" or mysql.is_mysql(dialect))
                                         and not read_only)
        self._tables_cache: dict[tuple[str, str, bool], dict[Granularity, sa.Table]] = {}
        self._ready: set[tuple[str, str, bool]] = set()
        self._plans = ReadPlans(engine.dialect)
        self._merged = MergedReads(self._plans)
        # Tables seen to exist, so that a read does not ask the catalog each time; forgotten by every write
        # transaction (which may drop one) and by a failed read (another process may have dropped one).
        self._present: set[str] = set()
        self._staging_ready: set[tuple[str, str]] = set()

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
        utf8mb4 unless the URL says otherwise (``store.mysql``).
        """
        args = {"charset": "utf8mb4"} if mysql.is_mysql(url.get_backend_name()) and "charset" not in url.query else {}
        engine = sa.create_engine(url, paramstyle="format", pool_pre_ping=True, isolation_level="REPEATABLE READ",
                                  connect_args=args)
        return cls(engine, read_only=read_only)

    def __repr__(self) -> str:
        return f"SqlStore({self.url!r}{', read_only=True' if self._read_only else ''})"

    def change_token(self) -> object | None:
        """A value that changes whenever anything is committed to the store, for readers that keep answers
        (``http.reader``): the embedded store's (``sqlite_read.change_token``); None for a server, whose
        answers are not kept."""
        return None if self._path is None else change_token(self._path)

    def __enter__(self) -> SqlStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._engine.dispose()

    # --- schema ---------------------------------------------------------------------------------------

    def _tables(self, layout: AggregationLayout) -> dict[Granularity, sa.Table]:
        key = (layout.name, layout.spec_hash, layout.partitioned)
        if key not in self._tables_cache:
            self._tables_cache[key] = level_tables(layout, self._engine.dialect.name)
        return self._tables_cache[key]

    def _check_identifiers(self, layout: AggregationLayout) -> None:
        limit = self.capabilities.max_identifier_length
        names = (*(n for g in layout.spec.granularities for n in (layout.table_name(g), view_name(layout, g))),
                 *layout.column_types)
        for name in names:
            if len(name) > limit:
                msg = (f"the name {name!r} of aggregation {layout.name} is {len(name)} characters long, "
                       f"but {self._engine.dialect.name} allows at most {limit}; use a shorter name")
                raise DefinitionError(msg)

    @retried
    def ensure_schema(self, layout: AggregationLayout) -> tuple[str, ...]:
        """Create the tables of ``layout`` and register it, or check that the stored ones match its spec.

        A pre-aggregated table whose definition changed is rebuilt to follow it
        (:mod:`tiltframe.store.table_changes`); returns what changed, in words (nothing otherwise).
        """
        key = (layout.name, layout.spec_hash, layout.partitioned)
        if key in self._ready:
            return ()
        self._require_writable()
        self._check_identifiers(layout)
        notes: tuple[str, ...] = ()
        with self._errors("prepare the tables of", layout), self._write(schema=True) as conn:
            SHARED.create_all(conn, checkfirst=True)
            self._check_shared_tables(conn)
            a = AGGREGATIONS_TABLE.c
            row = conn.execute(sa.select(AGGREGATIONS_TABLE).where(a.name == layout.name)).first()
            registration = {"spec_hash": layout.spec_hash, "zone": layout.zone,
                            "granularities": ",".join(g.table_suffix for g in layout.spec.granularities)}
            if row is None:
                conn.execute(sa.insert(AGGREGATIONS_TABLE).values(name=layout.name, created_at=now_ms(),
                                                                  **registration))
            elif row.spec_hash != layout.spec_hash and layout.table is not None:
                notes = self._follow_table_change(conn, layout, row)
                conn.execute(sa.update(AGGREGATIONS_TABLE).where(a.name == layout.name).values(**registration))
            else:
                self._check_same_spec(layout, row)
            if mysql.hashes_keys(layout, conn.dialect):  # tables made before AGG_KEY_HASH keep their keys
                earlier = mysql.earlier_keys(conn, layout.table_name(layout.spec.finest), layout)
                if earlier:
                    logger.warning("%s", earlier)
                self._tables_cache[key] = level_tables(layout, conn.dialect.name, hashed=None if earlier is None
                                                       else False)
            for g, table in self._tables(layout).items():
                table.create(conn, checkfirst=True)
                self._check_partitioning(conn, layout, table)
                replace_view(conn, layout, table, g)
            if layout.table is not None:
                self._record_definition(conn, layout.table)
        self._ready.add(key)
        return notes

    def _follow_table_change(self, conn: Connection, layout: AggregationLayout, row: sa.Row[Any]) -> tuple[str, ...]:
        from tiltframe.store.table_changes import follow_change  # it builds on this module

        text = conn.execute(sa.select(TABLES_TABLE.c.definition).where(TABLES_TABLE.c.name == layout.name)).scalar()
        if text is None:  # registered before definitions were recorded: nothing to compare with
            self._check_same_spec(layout, row, recorded=False)
        return follow_change(self, conn, layout, TableSpec.from_json(text), row.zone).notes

    @staticmethod
    def _record_definition(conn: Connection, table: TableSpec) -> None:
        t = TABLES_TABLE.c
        values = {"definition": table.to_json(), "updated_at": now_ms()}
        if conn.execute(sa.update(TABLES_TABLE).where(t.name == table.name).values(**values)).rowcount == 0:
            conn.execute(sa.insert(TABLES_TABLE).values(name=table.name, **values))

    def _check_partitioning(self, conn: Connection, layout: AggregationLayout, table: sa.Table) -> None:
        """Tables made before ``@PartitionById`` lack ``SHARD_ID``: point to ``tiltframe migrate``, never
        write rows that would merge with another shard's."""
        has_shards = SHARD_ID in _primary_key(conn, table.name)
        if has_shards == layout.partitioned:
            return
        if layout.partitioned:
            msg = (f"aggregation {layout.name} is partitioned by shard (@PartitionById), but its table "
                   f"{table.name} in {self.url} was created without a {SHARD_ID} column; upgrade the tables "
                   f"once with: tiltframe migrate APP --shard-id ID (ID: the shard that wrote the existing rows)")
        else:
            msg = (f"the tables of aggregation {layout.name} in {self.url} are partitioned by shard ({table.name} "
                   f"has a {SHARD_ID} column), but this deployment does not partition {layout.name}; add "
                   f"@PartitionById to the aggregation and give a shard id")
        raise StoreError(msg)

    def _check_shared_tables(self, conn: Connection) -> None:
        """A store made by an earlier tiltframe lacks columns; say so instead of failing mid-batch."""
        inspector = sa.inspect(conn)
        for table in SHARED.sorted_tables:
            have = {c["name"] for c in inspector.get_columns(table.name)}
            missing = [c.name for c in table.columns if c.name not in have]
            if missing:
                msg = (f"the store {self.url} was made by an earlier version of tiltframe: table {table.name} "
                       f"lacks the columns {', '.join(missing)}; use a new data directory or store")
                raise StoreError(msg)

    def _check_same_spec(self, layout: AggregationLayout, row: sa.Row[Any], *, recorded: bool = True) -> None:
        """Refuse stored tables of another definition; a table's recorded definition can be followed."""
        if row.spec_hash == layout.spec_hash:
            return
        if layout.table is not None and recorded:
            msg = (f"the stored table {layout.name} in {self.url} was made for a different definition of it; the "
                   f"change is applied by the next insert into it, or now by: tiltframe migrate APP")
            raise StoreError(msg)
        tables = ", ".join(f"{layout.name}_{s}" for s in row.granularities.split(",") if s)
        msg = (
            f"the stored tables of aggregation {layout.name} in {self.url} were made for a different "
            f"definition of {layout.name} (stored spec hash {row.spec_hash}, this definition "
            f"{layout.spec_hash}); a change to its stream, select list, group by, durations or time zone "
            f"changes what the tables hold. Use another data directory or store, or drop the tables "
            f"{tables} and delete the {layout.name} rows of {AGGREGATIONS}, {BATCHES} and {REJECTED}"
        )
        raise StoreError(msg)

    # --- writing --------------------------------------------------------------------------------------

    @retried
    def is_committed(self, layout: AggregationLayout, pipeline_id: str, batch_id: int) -> bool:
        if self._read_only and not self._exists():
            return False
        with self._errors("check a batch of", layout), self._engine.connect() as conn:
            if not sa.inspect(conn).has_table(BATCHES):
                return False
            return commits.is_committed(conn, layout, pipeline_id, batch_id)

    @retried
    def last_committed_batch(self, layout: AggregationLayout, pipeline_id: str) -> int | None:
        """The greatest batch id of ``pipeline_id`` whose commit record the store holds; None when it holds
        none, or no store or tables are there at all (nothing is created)."""
        if not self._exists():
            return None
        with self._errors("read the commit records of", layout), self._engine.connect() as conn:
            if not sa.inspect(conn).has_table(BATCHES):
                return None
            last = commits.last_record(conn, layout, pipeline_id)
        return None if last is None else int(last.batch_id)

    @retried
    def pipeline_state(
        self, layout: AggregationLayout, pipeline_id: str, shard_id: str | None = None
    ) -> PipelineState:
        """The state after the last committed batch of ``pipeline_id``, or, for a pipeline that has none,
        the recovery point: the latest bucket of the finest table (None when it is empty); with shards,
        of the rows of ``shard_id`` only, since other shards' events are not this pipeline's replays."""
        self.ensure_schema(layout)
        finest = self._tables(layout)[layout.spec.finest]
        with self._errors("read the pipeline state of", layout), self._engine.connect() as conn:
            last = commits.last_record(conn, layout, pipeline_id)
            if last is not None:
                return PipelineState(last.latest_event_ts, last.recovery_bucket)
            if layout.spec.workers is not None:  # rows inserted into a table are never replays of stored ones
                return PipelineState(None, None)
            latest = sa.select(sa.func.max(finest.c[AGG_TIMESTAMP]))
            if layout.partitioned:
                latest = latest.where(finest.c[SHARD_ID] == shard_id)
            stored = conn.execute(latest).scalar()
        return PipelineState(None, stored)

    @retried
    def prepare_staging(self, layout: AggregationLayout, pipeline_id: str) -> staging.StagingTarget | None:
        """The staging table executors copy ``pipeline_id``'s next batch into (``store.staging``), emptied of
        that pipeline's uncommitted rows; None when ``layout``'s rows cannot be staged."""
        if not self.capabilities.staged_writes or not staging.qualifies(layout):
            return None
        if len(staging.staging_name(layout)) > self.capabilities.max_identifier_length:
            return None  # a name at the limit for its level tables: they take the driver's path
        self.ensure_schema(layout)
        key = (layout.name, layout.spec_hash)
        if key not in self._staging_ready:
            with self._errors("prepare the staging table of", layout), self._write(schema=True) as conn:
                if not staging.loads_local_files(conn):
                    logger.info("%s takes no LOAD DATA LOCAL (local_infile is off): batches of %s go through "
                                "the driver", self.url, layout.name)
                    self.capabilities = dataclasses.replace(self.capabilities, staged_writes=False)
                    return None
                staging.ensure_staging(conn, layout)
            self._staging_ready.add(key)
        with self._errors("empty the staging table of", layout), self._write() as conn:
            staging.clear_pipeline(conn, layout, pipeline_id)
            url = self._engine.url
            if not mysql.is_mysql(conn.dialect):
                url = url.set(drivername="postgresql")  # psycopg's conninfo
            return staging.target(url.render_as_string(hide_password=False), conn, layout)

    @retried
    def write_batch(self, layout: AggregationLayout, batch: BatchWrite) -> bool:
        """Merge ``batch`` in one transaction; False (and nothing written) if it was committed before.

        A state the store cannot hold (``store.overflow``) is a ``StoreError`` naming its row, and nothing
        of the batch is written.  A staged batch's rows are merged from the staging table by the server,
        and deleted from it (with any failed task attempt's) by the same transaction.
        """
        self.ensure_schema(layout)
        if self.is_committed(layout, batch.pipeline_id, batch.batch_id):
            return False  # cheap early exit for replays; checked again inside the write transaction
        tables = self._tables(layout)
        levels = [(tables[layout.spec.granularity(g)], prepare_rows(layout, data, batch.shard_id))
                  for g, data in batch.levels.items()]
        check_holdable(self._engine.dialect.name, self.url, layout, batch.batch_id, levels)
        try:
            with self._errors("write a batch of", layout), self._write(layout) as conn:
                if commits.is_committed(conn, layout, batch.pipeline_id, batch.batch_id):
                    return False
                purged = self._purged_before(conn, layout)
                rows = sum(self._merge_rows(conn, layout, table, self._merge_sketches(
                    conn, layout, table, _after(data, purged.get(table.name)))) for table, data in levels)
                if batch.staged is not None:
                    rows += self._merge_staged(conn, layout, batch.staged, purged)
                insert_recorded(conn, layout, batch)
                commits.record_commit(conn, layout, batch, rows)
                if batch.staged is not None:
                    staging.delete_batch(conn, layout, batch.pipeline_id, batch.batch_id)
        except StoreError as failed:  # rolled back; a sum out of range is named by its row
            raise self._explained(layout, batch.batch_id, levels, failed, batch.staged) from failed.__cause__
        return True

    def _merge_staged(self, conn: Connection, layout: AggregationLayout, staged: StagedBatch,
                      purged: Mapping[str, int]) -> int:
        """Merge the staged rows of each level that holds any, one statement per level."""
        staging.check_present(conn, layout, staged.tags, staged.rows)
        rows = 0
        for i, table in enumerate(self._tables(layout).values()):
            if staged.tags and i < len(staged.rows) and staged.rows[i]:
                rows += staging.merge_level(conn, layout, table, i, staged.tags, purged.get(table.name))
        return rows

    def _explained(self, layout: AggregationLayout, batch_id: int, levels: list[tuple[sa.Table, pa.Table]],
                   failed: StoreError, staged: StagedBatch | None = None) -> StoreError:
        """``failed``, or the error naming the row whose merged sum left its state's range (a staged
        batch's rows are read back from the staging table, which its rolled-back transaction left full)."""
        try:
            with self._engine.connect() as conn, conn.begin():
                if staged is not None and out_of_range(failed.__cause__):
                    levels = [*levels, *((t, staging.read_level(conn, layout, i, staged.tags))
                                         for i, t in enumerate(self._tables(layout).values()))]
                return explain_overflow(conn, self.url, layout, batch_id, levels) or failed
        except Exception:  # the database is gone as well: its own failure says enough
            return failed

    def reset(self, layout: AggregationLayout, shard_id: str | None = None) -> None:
        """Drop everything the store holds of ``layout`` (a rebuild): its commit records, recorded events and
        purge marks first, then its tables and views, made anew by the next ``ensure_schema``.  The
        registration and a pre-aggregated table's recorded definition stay.

        A database that commits each DDL statement (MySQL) may stop in between; the records go first so that
        such a store holds no batch of any pipeline and the next start says so.  A partitioned aggregation
        whose tables hold another shard's rows is refused: those rows are not this pipeline's to drop.
        """
        self._require_writable()
        if not self._exists():
            return
        with self._errors("rebuild", layout), self._write(layout, schema=True) as conn:
            present = set(sa.inspect(conn).get_table_names())
            if BATCHES not in present:
                return
            tables = {g: t for g, t in self._tables(layout).items() if t.name in present}
            finest = tables.get(layout.spec.finest)
            if layout.partitioned and shard_id is not None and finest is not None:
                others = conn.execute(sa.select(finest.c[SHARD_ID]).where(finest.c[SHARD_ID] != shard_id)
                                      .limit(1)).scalar()
                if others is not None:
                    msg = (f"cannot rebuild aggregation {layout.name}: its tables in {self.url} also hold rows of "
                           f"shard {others!r}, which a rebuild of shard {shard_id!r} must not drop; stop every "
                           f"shard's pipeline, then rebuild them all (each with --rebuild)")
                    raise StoreError(msg)
            commits.forget(conn, layout)
            if conn.dialect.name == "postgresql":
                staging.drop_staging(conn, layout)
                self._staging_ready.discard((layout.name, layout.spec_hash))
            quote = conn.dialect.identifier_preparer.quote  # MySQL commits the deletes before its first DROP
            for g, table in tables.items():
                conn.exec_driver_sql(f"DROP VIEW IF EXISTS {quote(view_name(layout, g))}")
                table.drop(conn)
        self._ready.discard((layout.name, layout.spec_hash, layout.partitioned))
        self._tables_cache.pop((layout.name, layout.spec_hash, layout.partitioned), None)

    # --- migrating -----------------------------------------------------------------------------------

    def add_shards(self, layout: AggregationLayout, shard_id: str) -> list[str]:
        """Give the tables of a partitioned ``layout`` that were made without shards a ``SHARD_ID`` key
        column, their rows becoming ``shard_id``'s; returns the tables changed (none on a second run).

        SQLite cannot change a primary key, so its tables are copied into new ones in one transaction.
        PostgreSQL changes them in place in one transaction.  MySQL commits each DDL statement, so every
        step is checked before it is taken and an interrupted migration completes when run again.
        """
        if not layout.partitioned:
            msg = f"aggregation {layout.name} is not partitioned by shard; there is nothing to migrate"
            raise StoreError(msg)
        self._require_writable()
        if not self._exists():
            return []
        changed: list[str] = []
        with self._errors("migrate", layout), self._write(layout, schema=True) as conn:
            inspector = sa.inspect(conn)
            if not inspector.has_table(AGGREGATIONS):
                return []
            row = conn.execute(sa.select(AGGREGATIONS_TABLE).where(AGGREGATIONS_TABLE.c.name == layout.name)).first()
            if row is None:
                return []
            self._check_same_spec(layout, row)
            present = set(inspector.get_table_names())
            quote = conn.dialect.identifier_preparer.quote
            for g, table in self._tables(layout).items():
                if table.name not in present or SHARD_ID in _primary_key(conn, table.name):
                    continue
                conn.exec_driver_sql(f"DROP VIEW IF EXISTS {quote(view_name(layout, g))}")
                if conn.dialect.name == "sqlite":
                    _copy_with_shard(conn, layout, table, shard_id)
                else:
                    _alter_with_shard(conn, layout, table, shard_id)
                replace_view(conn, layout, table, g)
                changed.append(table.name)
        return changed

    # --- compacting ----------------------------------------------------------------------------------

    @retried
    def compact(self, layout: AggregationLayout, before_ms: int) -> int:
        """Merge, in every table of a partitioned ``layout``, the partial rows of each bucket (starting
        before ``before_ms``) and key into one row under ``SHARD_ID`` ``*``; returns the rows removed.

        One write transaction: readers see the partial rows or the merged ones, and the same answer from
        both.  A second run finds one row per bucket and key and changes nothing.  A worker that writes
        a compacted bucket again (a late row) adds a partial row beside the merged one.
        """
        from tiltframe.retrieval.merge import merge_rows  # the one pandas translation of the merges

        if not layout.partitioned:
            return 0
        self._require_writable()
        types = layout.stored_column_types
        removed = 0
        with self._errors("compact", layout), self._write(layout) as conn:
            for table in self._tables(layout).values():
                keys = [table.c[k] for k in layout.key_names]
                repeated = (sa.select(*keys).where(table.c[AGG_TIMESTAMP] < before_ms).group_by(*keys)
                            .having(sa.func.count() > 1).subquery())
                query = sa.select(*(table.c[c] for c in types)).join(
                    repeated, sa.and_(*(table.c[k] == repeated.c[k] for k in layout.key_names)))
                rows = typed_frame(fetch_all(conn, query), types)
                if rows.empty:
                    continue
                key = sa.and_(*(table.c[k] == sa.bindparam(f"k_{k}") for k in layout.stored_key_names))
                conn.execute(sa.delete(table).where(key),
                             [{f"k_{k}": _plain(r[k]) for k in layout.stored_key_names}
                              for r in rows[list(layout.stored_key_names)].to_dict("records")])
                merged = merge_rows(rows.drop(columns=[SHARD_ID]), layout)
                data = pa.Table.from_pandas(merged[list(layout.column_types)], preserve_index=False)
                self._merge_rows(conn, layout, table, prepare_rows(layout, data, COMPACTED))
                removed += len(rows) - len(merged)
        return removed

    # --- purging -------------------------------------------------------------------------------------

    @retried
    def latest_event_ts(self, layout: AggregationLayout) -> int | None:
        """The greatest event time aggregated by any pipeline of ``layout`` (what retention is measured
        against), or None before the first event."""
        b = BATCHES_TABLE.c
        with self._errors("read the latest event time of", layout), self._read(layout) as (conn, _):
            return conn.execute(sa.select(sa.func.max(b.max_event_ts)).where(b.aggregation == layout.name)).scalar()

    @retried
    def last_purged_at(self, layout: AggregationLayout) -> int:
        """Epoch ms of the last purge of ``layout``, or of its registration when it was never purged."""
        p = PURGES_TABLE.c
        with self._errors("read the purge time of", layout), self._read(layout) as (conn, registered):
            last = conn.execute(sa.select(sa.func.max(p.purged_at)).where(p.aggregation == layout.name)).scalar()
            return int(last if last is not None else registered.created_at)

    @retried
    def purge(
        self, layout: AggregationLayout, before: Mapping[Granularity, int], latest_event_ts: int
    ) -> dict[Granularity, int]:
        """Delete the buckets of each granularity starting before its instant in ``before``, in one
        transaction that excludes batch writes; returns the rows deleted per granularity.

        The instants never move back, and a batch never writes a bucket before them again, so a purged
        bucket cannot come back holding only the events that arrived after it was purged.
        """
        # Not ``ensure_schema``: deleting by bucket start is the same with or without shards, so whoever
        # purges need not know whether the tables are partitioned.
        self._require_writable()
        tables = self._tables(layout)
        deleted: dict[Granularity, int] = {}
        with self._errors("purge", layout), self._write(layout) as conn:
            stored = self._purged_before(conn, layout)
            now, p = now_ms(), PURGES_TABLE.c
            for g, instant in before.items():
                table = tables[layout.spec.granularity(g)]
                previous = stored.get(table.name)
                cut = instant if previous is None else max(instant, previous)
                count = conn.execute(sa.delete(table).where(table.c[AGG_TIMESTAMP] < cut)).rowcount
                deleted[g] = max(count, 0)
                values = {"purged_before": cut, "latest_event_ts": latest_event_ts, "purged_at": now}
                if previous is None:
                    conn.execute(sa.insert(PURGES_TABLE).values(aggregation=layout.name, granularity=g.table_suffix,
                                                           rows_purged=deleted[g], **values))
                else:
                    key = (p.aggregation == layout.name, p.granularity == g.table_suffix)
                    conn.execute(sa.update(PURGES_TABLE).where(*key).values(rows_purged=p.rows_purged + deleted[g],
                                                                       **values))
        return deleted

    def _purged_before(self, conn: Connection, layout: AggregationLayout) -> dict[str, int]:
        """Per table name of ``layout``: the start before which its buckets were purged."""
        p = PURGES_TABLE.c
        rows = conn.execute(sa.select(p.granularity, p.purged_before).where(p.aggregation == layout.name)).all()
        return {f"{layout.name}_{suffix}": int(before) for suffix, before in rows}

    @staticmethod
    def _merge_sketches(conn: Connection, layout: AggregationLayout, table: sa.Table, data: pa.Table) -> pa.Table:
        """``data`` with each sketch state already merged with the stored one of its bucket and key.

        No database can union DataSketches binaries, so the stored states of the batch's buckets are read
        and merged here (the upsert then writes the union).  The caller's write transaction excludes
        every other writer of the aggregation, so nothing changes between this read and the upsert.
        """
        sketches = [s for s in layout.states if s.merge.is_sketch]
        if not sketches or data.num_rows == 0:
            return data
        from tiltframe.functions.sketches import MERGE

        keys = list(layout.stored_key_names)
        ts = table.c[AGG_TIMESTAMP]
        bounds = pc.min_max(data.column(AGG_TIMESTAMP)).as_py()
        query = sa.select(*(table.c[k] for k in keys), *(table.c[s.name] for s in sketches)).where(
            ts >= bounds["min"], ts <= bounds["max"])
        types = layout.stored_column_types
        stored = typed_frame(fetch_all(conn, query), {c: types[c] for c in (*keys, *(s.name for s in sketches))})
        if stored.empty:
            return data
        batch = data.select(keys).to_pandas().reset_index(names="_row")
        matched = batch.merge(stored, on=keys, how="inner")
        if matched.empty:
            return data
        rows = matched["_row"].to_numpy()
        for s in sketches:
            column = data.column(s.name).to_pylist()
            merge = MERGE[s.merge]
            for row, old in zip(rows, matched[s.name], strict=True):
                column[row] = merge(old, column[row])
            data = data.set_column(data.column_names.index(s.name), s.name, pa.array(column, pa.binary()))
        return data

    def _merge_rows(
        self, conn: Connection, layout: AggregationLayout, table: sa.Table, data: pa.Table
    ) -> int:
        """Upsert prepared ``data`` into ``table`` in multi-row statements; returns the row count."""
        if mysql.KEY_HASH in table.c:
            data = data.append_column(mysql.KEY_HASH, mysql.key_hashes(layout, data))
        width = data.num_columns
        rows = ROWS_PER_STATEMENT
        if conn.dialect.name == "sqlite":
            rows = min(rows, SQLITE_ROWS_PER_STATEMENT)
        per_statement = max(1, min(rows, max_parameters(conn.dialect) // width))
        many_sql, many_order = self._statement(conn, layout, table, per_statement)
        one_sql, one_order = self._statement(conn, layout, table, 1)
        step = per_statement * width
        cursor, options = _merge_cursor(conn)
        try:
            for offset in range(0, data.num_rows, CHUNK_ROWS):
                flat = _flatten(data.slice(offset, CHUNK_ROWS))
                whole = len(flat) - len(flat) % step
                for i in range(0, whole, step):
                    cursor.execute(many_sql, _bind(flat[i : i + step], many_order), **options)
                if whole < len(flat):
                    rest = flat[whole:]
                    rows = [_bind(rest[i : i + width], one_order) for i in range(0, len(rest), width)]
                    cursor.executemany(one_sql, rows)
        finally:
            cursor.close()
        return data.num_rows

    def _statement(
        self, conn: Connection, layout: AggregationLayout, table: sa.Table, n: int
    ) -> tuple[str, list[int] | None]:
        """SQL text of the ``n``-row upsert into ``table`` and how to reorder row-major values for it."""
        dialect = conn.dialect
        key = (dialect.name, dialect.server_version_info, layout.spec_hash, layout.partitioned, table.name,
               len(table.columns), n)
        if key not in _STATEMENTS:
            columns = list(table.columns)
            names = [f"r{i}_{j}" for i in range(n) for j in range(len(columns))]
            rows = [{c.name: sa.bindparam(names[i * len(columns) + j]) for j, c in enumerate(columns)}
                    for i in range(n)]
            compiler = _SERVER_PLACEHOLDERS if dialect.name == "postgresql" else dialect
            compiled = upsert_statement(dialect.name, table, layout, rows).compile(dialect=compiler)
            if not compiled.positional:
                msg = f"the {dialect.name} driver uses named parameters; positional ones are needed"
                raise StoreError(msg)
            position = {name: i for i, name in enumerate(names)}
            constants = [p for p in compiled.positiontup or () if p not in position]
            if constants:  # PyMySQL's executemany binds parameters of the VALUES clause only
                msg = f"the merge of {table.name} holds constants ({', '.join(constants)}); combine must not"
                raise StoreError(msg)
            order = [position[p] for p in compiled.positiontup or ()]
            _STATEMENTS[key] = (str(compiled), None if order == list(range(len(names))) else order)
        return _STATEMENTS[key]

    # --- reading --------------------------------------------------------------------------------------

    def read(
        self,
        layout: AggregationLayout,
        granularity: Granularity,
        start_ms: int | None = None,
        end_ms: int | None = None,
        *,
        with_shards: bool = False,
        keys: Mapping[str, Sequence[Any]] | None = None,
    ) -> pd.DataFrame:
        """Stored partial rows with ``start_ms <= AGG_TIMESTAMP < end_ms`` (and, for each group-by key of
        ``keys``, one of its values), in primary-key order, without ``SHARD_ID`` (unless ``with_shards``,
        for a partitioned layout): shards' rows of one bucket and key follow each other, to be merged by
        the reader."""
        table = self._tables(layout)[layout.spec.granularity(granularity)]
        types = layout.stored_column_types if with_shards else layout.column_types
        read = RangeRead(table, tuple(types), layout.key_names, start_ms, end_ms, keys or {})
        assumed = {AGGREGATIONS, table.name} <= self._present
        try:
            return self._read_range(layout, read, types)
        except StoreError:
            if not assumed:
                raise
            return self._read_range(layout, read, types)  # a table seen before may be gone: look again

    def _read_range(self, layout: AggregationLayout, read: RangeRead, types: dict[str, AttrType]) -> pd.DataFrame:
        with self._errors("read", layout), self._read(layout) as (conn, _):
            if not self._has_table(conn, read.table.name):
                return typed_frame([], types)
            rows = fetch_compiled(conn, self._plans.compiled(read), read.params())
        return typed_frame(rows, types)

    def read_merged(
        self,
        layout: AggregationLayout,
        granularity: Granularity,
        by: Sequence[str],
        states: Sequence[str],
        start_ms: int | None = None,
        end_ms: int | None = None,
        *,
        by_interval: bool = True,
        where: Sequence[KeyTerm] = (),
    ) -> pd.DataFrame | None:
        """Partial rows merged in SQL by ``by`` (and the bucket), or None when they cannot be exactly what
        ``merge_rows`` makes (``store.merged_reads``)."""
        table = self._tables(layout)[layout.spec.granularity(granularity)]
        read = MergedRead.of(table, self._engine.dialect.name, layout, by, states, start_ms, end_ms, by_interval,
                             where)
        assumed = {AGGREGATIONS, table.name} <= self._present
        try:
            return self._read_merged(layout, read)
        except StoreError:
            if not assumed:
                raise
            return self._read_merged(layout, read)  # a table seen before may be gone: look again

    def _read_merged(self, layout: AggregationLayout, read: MergedRead) -> pd.DataFrame | None:
        if read.table.name not in self._present:  # made anew, maybe: its collations are looked up again
            self._merged.forget(read.table.name)
        try:
            with self._errors("read", layout), self._read(layout) as (conn, _):
                if not self._has_table(conn, read.table.name):
                    return read.empty()
                return self._merged.run(conn, read)
        except StoreError as failed:
            if out_of_range(failed.__cause__):  # a sum the database cannot hold: the caller merges in pandas
                return None
            raise

    def rejected(self, layout: AggregationLayout, limit: int = 100) -> pd.DataFrame:
        """The latest ``limit`` recorded events of ``layout`` (rejected or moved), newest first."""
        r = REJECTED_TABLE.c
        types = {"batch_id": AttrType.LONG, **dict.fromkeys(REJECTED_COLUMNS, AttrType.STRING),
                 **dict.fromkeys(REJECTED_TIMES, AttrType.LONG), "recorded_at": AttrType.LONG}
        query = (sa.select(*(r[c] for c in types)).where(r.aggregation == layout.name)
                 .order_by(r.id.desc()).limit(limit))
        with self._errors("read the rejected events of", layout), self._read(layout) as (conn, _):
            return typed_frame(fetch_all(conn, query), types)

    def info(self, layout: AggregationLayout) -> AggregationInfo:
        """Row counts and bucket ranges per table, batch totals and rejected counts by reason."""
        b, r = BATCHES_TABLE.c, REJECTED_TABLE.c
        with self._errors("inspect", layout), self._read(layout) as (conn, registered):
            present = set(sa.inspect(conn).get_table_names())
            tables = []
            for g, t in self._tables(layout).items():
                count, first, last = 0, None, None
                if t.name in present:
                    ts = t.c[AGG_TIMESTAMP]
                    count, first, last = conn.execute(
                        sa.select(sa.func.count(), sa.func.min(ts), sa.func.max(ts))).one()
                tables.append(TableInfo(t.name, str(g), int(count), _int(first), _int(last)))
            finest = self._tables(layout)[layout.spec.finest].name
            shards: list[str] = []
            if finest in present and SHARD_ID in _primary_key(conn, finest):
                shards = [str(v) for v in conn.execute(
                    sa.select(sa.column(SHARD_ID)).select_from(sa.table(finest)).distinct().order_by(
                        sa.column(SHARD_ID))).scalars()]
            counts = (b.events_read, b.events_aggregated, b.events_rejected, b.events_moved)
            totals = conn.execute(
                sa.select(sa.func.count(), *(sa.func.coalesce(sa.func.sum(c), 0) for c in counts),
                          sa.func.min(b.min_event_ts), sa.func.max(b.max_event_ts))
                .where(b.aggregation == layout.name)).one()
            p = PURGES_TABLE.c
            order = {g.table_suffix: i for i, g in enumerate(layout.spec.granularities)}
            purges = conn.execute(sa.select(p.granularity, p.purged_before, p.rows_purged, p.purged_at)
                                  .where(p.aggregation == layout.name)).all()
            reasons, kinds = (conn.execute(
                sa.select(c, sa.func.count()).where(r.aggregation == layout.name, *where)
                .group_by(c).order_by(sa.func.count().desc(), c)).all()
                for c, where in ((r.reason, (r.kind.is_distinct_from(RecordKind.MOVED.value),)), (r.kind, ())))
        batches, read, aggregated, rejected, moved, first_ts, last_ts = (_int(v) for v in totals)
        return AggregationInfo(  # plain ints: the servers' drivers give DECIMAL for a SUM
            name=layout.name, spec_hash=registered.spec_hash, zone=registered.zone, tables=tuple(tables),
            batches=batches or 0, events_read=read or 0, events_aggregated=aggregated or 0,
            events_rejected=rejected or 0, rejected_by_reason=tuple((str(x), int(n)) for x, n in reasons),
            min_event_ts=first_ts, max_event_ts=last_ts, events_moved=moved or 0,
            recorded_by_kind=tuple((str(x), int(n)) for x, n in kinds),
            purges=tuple(PurgeInfo(f"{layout.name}_{g}", int(b), int(n), int(at))
                         for g, b, n, at in sorted(purges, key=lambda p: order.get(p[0], len(order)))),
            shards=tuple(shards),
        )

    # --- connections ----------------------------------------------------------------------------------

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
            raise StoreError(f"could not {action} in {self.url}: {cause}") from e

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

        SQLite's ``BEGIN IMMEDIATE`` takes the database's one write lock at once.  A server connection
        writes in READ COMMITTED (so that once the lock is held, it reads what the transaction before
        it committed) and locks the aggregation's row of the registry table.
        """
        self._present.clear()  # a write may drop a table
        conn = self._engine.connect()
        if conn.dialect.name == "sqlite":
            conn = conn.execution_options(tiltframe_begin="BEGIN IMMEDIATE")
        else:
            conn = conn.execution_options(isolation_level="READ COMMITTED")
        with conn, _schema_lock(conn, held=schema), conn.begin():
            if layout is not None and conn.dialect.name != "sqlite":
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

    @contextmanager
    def _read(self, layout: AggregationLayout) -> Iterator[tuple[Connection, sa.Row[Any]]]:
        """One read transaction (one snapshot) of a store that holds ``layout``, and its registration."""
        no_data = f"no data for aggregation {layout.name} in {self.url}; run the app first"
        if not self._exists():
            raise StoreError(no_data)
        with self._engine.connect() as conn, conn.begin():
            if not self._has_table(conn, AGGREGATIONS):
                raise StoreError(no_data)
            row = conn.execute(sa.select(AGGREGATIONS_TABLE).where(AGGREGATIONS_TABLE.c.name == layout.name)).first()
            if row is None:
                raise StoreError(no_data)
            self._check_same_spec(layout, row)
            yield conn, row

    @contextmanager
    def _errors(self, action: str, layout: AggregationLayout) -> Iterator[None]:
        """Database failures become a ``StoreError`` naming the store and the aggregation."""
        with self._failures(f"{action} aggregation {layout.name}"):
            yield


_SCHEMA_LOCK = "CONCAT('tiltframe.schema.', MD5(DATABASE()))"  # MySQL's named locks span databases
_SCHEMA_LOCK_KEY = 0x7469_6C74  # PostgreSQL advisory locks take a number
_SCHEMA_LOCK_WAIT_S = 300


@contextmanager
def _schema_lock(conn: Connection, *, held: bool) -> Iterator[None]:
    """Hold the store-wide schema lock of a server database around one transaction of ``conn``.

    PostgreSQL takes a session-level advisory lock (released after the transaction, which the caller
    opens inside); MySQL's DDL commits by itself, so its named lock spans the whole sequence.  SQLite
    needs none: ``BEGIN IMMEDIATE`` already excludes every other writer.
    """
    dialect = conn.dialect.name
    if not held or dialect == "sqlite":
        yield
        return
    if dialect == "postgresql":
        conn.exec_driver_sql(f"SELECT pg_advisory_lock({_SCHEMA_LOCK_KEY})")
        conn.commit()
        release = f"SELECT pg_advisory_unlock({_SCHEMA_LOCK_KEY})"
    else:
        got = conn.exec_driver_sql(f"SELECT GET_LOCK({_SCHEMA_LOCK}, {_SCHEMA_LOCK_WAIT_S})").scalar()
        conn.commit()
        if got != 1:
            msg = f"another process held the schema lock of the store for {_SCHEMA_LOCK_WAIT_S} s"
            raise StoreError(msg)
        release = f"SELECT RELEASE_LOCK({_SCHEMA_LOCK})"
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


def _primary_key(conn: Connection, table: str) -> list[str]:
    return list(sa.inspect(conn).get_pk_constraint(table)["constrained_columns"])


def rebuild_table(conn: Connection, table: sa.Table, aside: str, fill: Callable[[str], None]) -> None:
    """Make ``table`` anew from its definition: its rows move to table ``aside``, ``fill(aside)`` puts them
    into the new table, and ``aside`` is dropped.

    A database that commits each DDL statement (MySQL) may have been interrupted mid-way: when ``aside``
    exists already it holds the rows, and a half-made ``table`` is dropped and made again.
    """
    quote = conn.dialect.identifier_preparer.quote
    if not sa.inspect(conn).has_table(aside):
        conn.exec_driver_sql(f"ALTER TABLE {quote(table.name)} RENAME TO {quote(aside)}")
    table.drop(conn, checkfirst=True)
    table.create(conn)
    fill(aside)
    conn.exec_driver_sql(f"DROP TABLE {quote(aside)}")


def _copy_with_shard(conn: Connection, layout: AggregationLayout, table: sa.Table, shard_id: str) -> None:
    """SQLite: the rows of ``table`` moved into a new table of the partitioned layout, as ``shard_id``'s."""
    names = list(layout.column_types)

    def fill(aside: str) -> None:
        old = sa.table(aside, *(sa.column(n) for n in names))
        conn.execute(sa.insert(table).from_select(
            [*names, SHARD_ID], sa.select(*old.c, sa.literal(shard_id, sa.String()).label(SHARD_ID))))

    rebuild_table(conn, table, f"{table.name}__before_shards", fill)


def _alter_with_shard(conn: Connection, layout: AggregationLayout, table: sa.Table, shard_id: str) -> None:
    """PostgreSQL and MySQL: add ``SHARD_ID``, fill it, and make it part of the key."""
    quote = conn.dialect.identifier_preparer.quote
    name, shard = quote(table.name), quote(SHARD_ID)
    on_mysql = mysql.is_mysql(conn.dialect)
    if SHARD_ID not in {c["name"] for c in sa.inspect(conn).get_columns(table.name)}:
        kind = mysql.shard_column_ddl(conn.dialect) if on_mysql else "VARCHAR(255)"
        conn.exec_driver_sql(f"ALTER TABLE {name} ADD COLUMN {shard} {kind} NULL")
    conn.execute(sa.update(table).where(table.c[SHARD_ID].is_(None)).values({SHARD_ID: shard_id}))
    if on_mysql:
        mysql.add_shard_to_key(conn, table.name, layout)
        return
    key = ", ".join(quote(k) for k in layout.stored_key_names)
    constraint = sa.inspect(conn).get_pk_constraint(table.name)["name"]
    conn.exec_driver_sql(f"ALTER TABLE {name} ALTER COLUMN {shard} SET NOT NULL")
    conn.exec_driver_sql(f"ALTER TABLE {name} DROP CONSTRAINT {quote(constraint)}, ADD PRIMARY KEY ({key})")


#: The ``SHARD_ID`` of a row that compaction merged from several writers' rows.
COMPACTED = "*"


def _int(value: Any) -> int | None:
    """A number from a driver (int, Decimal, NumPy) as a Python int; None stays None."""
    return None if value is None else int(value)


def _plain(value: Any) -> Any:
    """A NumPy scalar as the Python value drivers bind."""
    return value.item() if isinstance(value, np.generic) else value


#: PostgreSQL merges bind ``$1, $2, ...`` (see ``_merge_cursor``).
_SERVER_PLACEHOLDERS = postgresql.psycopg.dialect(paramstyle="numeric_dollar")


def _merge_cursor(conn: Connection) -> tuple[Any, dict[str, Any]]:
    """The DBAPI cursor that runs the merge statements, and the extra arguments of its ``execute``.

    On PostgreSQL, a psycopg ``RawCursor`` with prepared statements: the server parses each multi-row
    upsert once per connection, where psycopg's default cursor re-parses its text (thousands of ``%s``)
    on every execute, which took most of the merge time.
    """
    if conn.dialect.name == "postgresql":
        import psycopg

        return psycopg.RawCursor(conn.connection.dbapi_connection), {"prepare": True}
    return conn.connection.cursor(), {}


def _after(data: pa.Table, start: int | None) -> pa.Table:
    """The rows of ``data`` whose bucket starts at or after ``start`` (all of them without one)."""
    if start is None or data.num_rows == 0:
        return data
    return data.filter(pc.greater_equal(data.column(AGG_TIMESTAMP), start))


def _bind(values: list[Any], order: list[int] | None) -> list[Any]:
    return values if order is None else [values[i] for i in order]
