"""Writes to a SQL store: each batch merged in one transaction with its commit record (exactly once),
from the driver's rows or the staging table; compaction of shards' partial rows; purges."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tiltframe.aggregates.layout import AGG_TIMESTAMP, SHARD_ID, AggregationLayout
from tiltframe.errors import StoreError
from tiltframe.model.durations import Granularity
from tiltframe.store.base import (
    BatchWrite,
    PipelineState,
    StagedBatch,
    StoreChanged,
)
from tiltframe.store.lifecycle import state_formats
from tiltframe.store.reads.frames import fetch_all, typed_frame
from tiltframe.store.reads.merged_reads import out_of_range
from tiltframe.store.reads.pandas_merges import merge_rows
from tiltframe.store.retries import retried
from tiltframe.store.schema import (
    BATCHES,
    PURGES_TABLE,
)
from tiltframe.store.sql_schema import SqlSchema
from tiltframe.store.writes import appends, commits, staging
from tiltframe.store.writes.commits import now_ms
from tiltframe.store.writes.overflow import check_holdable, explain_overflow
from tiltframe.store.writes.recorded import insert_recorded
from tiltframe.store.writes.upserts import COMPACTED, after, merge_sketches, prepare_rows, upsert_rows

logger = logging.getLogger(__name__)

class SqlWrites(SqlSchema):
    """Batches merged exactly once, staged or through the driver; compaction and purges."""

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
        """The staging table executors copy ``pipeline_id``'s next batch into (``store.writes.staging``), emptied of
        that pipeline's uncommitted rows; None when ``layout``'s rows cannot be staged."""
        if not self.capabilities.staged_writes or not staging.qualifies(layout):
            return None
        if len(staging.staging_name(layout)) > self.capabilities.max_identifier_length:
            return None  # a name at the limit for its level tables: they take the driver's path
        self.ensure_schema(layout)
        key = (layout.name, layout.spec_hash)
        if key not in self._staging_ready:
            with self._errors("prepare the staging table of", layout), self._write(schema=True) as conn:
                if not self._loads_local_files(conn):
                    logger.info("%s takes no LOAD DATA LOCAL (local_infile is off): batches of %s go through "
                                "the driver", self.url, layout.name)
                    self.capabilities = dataclasses.replace(self.capabilities, staged_writes=False)
                    return None
                staging.ensure_staging(conn, layout)
            self._staging_ready.add(key)
        with self._errors("empty the staging table of", layout), self._write() as conn:
            self._check_still_registered(conn, layout)
            staging.clear_pipeline(conn, layout, pipeline_id)
            return staging.target(self.dialect.staging_conninfo(self._engine.url), conn, layout)

    def _check_still_registered(self, conn: Connection, layout: AggregationLayout) -> None:
        """Refuse a batch of a definition the aggregation was migrated away from while its pipeline ran (its
        rows would not fit the tables, or would land in another zone's buckets)."""
        row = self._registration(conn, layout)
        if row is None or row.spec_hash == layout.spec_hash:
            return
        try:
            self._check_same_spec(conn, layout, row)
        except StoreError as e:
            msg = (f"aggregation {layout.name} in {self.url} was migrated to another definition while this "
                   f"pipeline ran, so its batches no longer fit: start the app as it is now (its pipeline goes "
                   f"on from this one's checkpoint). {e}")
            raise StoreError(msg) from None

    @retried
    def write_batch(self, layout: AggregationLayout, batch: BatchWrite) -> bool:
        """Merge ``batch`` in one transaction; False (and nothing written) if it was committed before.

        A state the store cannot hold (``store.writes.overflow``) is a ``StoreError`` naming its row, and nothing
        of the batch is written.  A staged batch's rows are merged from the staging table by the server,
        and deleted from it (with any failed task attempt's) by the same transaction.
        """
        self.ensure_schema(layout)
        if self.is_committed(layout, batch.pipeline_id, batch.batch_id):
            return False  # cheap early exit for replays; checked again inside the write transaction
        tables = self._tables(layout)
        levels = [(tables[layout.spec.granularity(g)], prepare_rows(layout, data, batch.shard_id))
                  for g, data in batch.levels.items()]
        check_holdable(self.dialect, self.url, layout, batch.batch_id, levels)
        try:
            with self._errors("write a batch of", layout), self._write(layout) as conn:
                self._check_still_registered(conn, layout)
                if commits.is_committed(conn, layout, batch.pipeline_id, batch.batch_id):
                    return False
                purged = self._purged_before(conn, layout)
                rows = sum(self._merge_level(conn, layout, table, after(data, purged.get(table.name)))
                           for table, data in levels)
                if batch.staged is not None:
                    rows += self._merge_staged(conn, layout, batch.staged, purged)
                insert_recorded(conn, layout, batch)
                commits.record_commit(conn, layout, batch, rows)
                if batch.staged is not None:
                    staging.delete_batch(conn, layout, batch.pipeline_id, batch.batch_id)
        except StoreError as failed:  # rolled back; a sum out of range is named by its row
            raise self._explained(layout, batch.batch_id, levels, failed, batch.staged) from failed.__cause__
        return True

    def _merge_level(self, conn: Connection, layout: AggregationLayout, table: sa.Table, data: pa.Table) -> int:
        """Merge a level's rows from the driver: those of buckets newer than the table's by the server's bulk
        load (``store.writes.appends``), the others by upserts."""
        appended = 0
        if data.num_rows and appends.can_append(self.dialect, layout) and self._loads_local_files(conn):
            new, data = appends.split_new(conn, layout, table, data)
            appended = appends.append_rows(conn, self.dialect, layout, table, new)
        return appended + upsert_rows(conn, layout, table, merge_sketches(conn, layout, table, data))

    def _loads_local_files(self, conn: Connection) -> bool:
        """Whether the server takes bulk loads from this driver (MariaDB's and MySQL's ``local_infile``;
        asked once)."""
        if self._local_files is None:
            self._local_files = self.dialect.loads_local_files(conn)
        return self._local_files

    def _merge_staged(self, conn: Connection, layout: AggregationLayout, staged: StagedBatch,
                      purged: Mapping[str, int]) -> int:
        """Merge the staged rows of each level that holds any, by ``staging.merge_level``."""
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

    @retried
    def compact(self, layout: AggregationLayout, before_ms: int) -> int:
        """Merge, in every table of a partitioned ``layout``, the partial rows of each bucket (starting
        before ``before_ms``) and key into one row under ``SHARD_ID`` ``*``; returns the rows removed.

        One write transaction: readers see the partial rows or the merged ones, and the same answer from
        both.  A second run finds one row per bucket and key and changes nothing.  A worker that writes
        a compacted bucket again (a late row) adds a partial row beside the merged one.
        """
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
                upsert_rows(conn, layout, table, prepare_rows(layout, data, COMPACTED))
                removed += len(rows) - len(merged)
        return removed

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

    def commit_mark(self, layout: AggregationLayout) -> tuple[int, int | None]:
        """What ``layout``'s commit records are now (``commits.mark``); give it to :meth:`replace_buckets`."""
        with self._errors("read the commit records of", layout), self._engine.connect() as conn:
            return commits.mark(conn, layout) if self._has_table(conn, BATCHES) else (0, None)

    def replace_buckets(self, layout: AggregationLayout, levels: Mapping[Granularity, tuple[int, int, pa.Table]],
                        mark: tuple[int, int | None]) -> dict[Granularity, int]:
        """Replace, per level, the stored rows of the buckets in ``[start, end)`` by the partial rows given,
        in one write transaction (``tiltframe rebuild``); returns the rows written per level.  Buckets the
        level no longer keeps (purged) are not written.

        Raises:
            StoreChanged: a batch committed since ``mark`` was read: the rows given may lack its events, so
                nothing is written (recompute and try again).
        """
        self._require_writable()
        self.ensure_schema(layout)
        tables = self._tables(layout)
        written: dict[Granularity, int] = {}
        with self._errors("rebuild a range of", layout), self._write(layout) as conn:
            if commits.mark(conn, layout) != mark:
                msg = f"a batch of aggregation {layout.name} was committed while its range was recomputed"
                raise StoreChanged(msg)
            purged = self._purged_before(conn, layout)
            for g, (start, end, data) in levels.items():
                table = tables[g]
                at = table.c[AGG_TIMESTAMP]
                conn.execute(sa.delete(table).where(at >= start, at < end))
                rows = after(prepare_rows(layout, data), purged.get(table.name))
                written[g] = upsert_rows(conn, layout, table, merge_sketches(conn, layout, table, rows))
        return written

    def rewrite_older_states(self, layout: AggregationLayout) -> dict[str, int]:
        """Rewrite the sketch states ``layout``'s tables hold in an older format in the current one
        (``store.lifecycle.state_formats``); returns the rows rewritten per table (none on a second run).  Tables of
        another definition of the aggregation are left as they are (their pipeline refuses them)."""
        self._require_writable()
        if not state_formats.rewritable(layout) or not self._exists():
            return {}
        with self._errors("read the registry of", layout), self._engine.connect() as conn:
            row = self._registration(conn, layout)
            if row is None or row.spec_hash != layout.spec_hash:
                return {}
            tables = [t for t in self._tables(layout).values() if self._has_table(conn, t.name)]
        rewritten: dict[str, int] = {}
        for table in tables:
            after: int | None = None
            while True:
                with self._errors("rewrite the stored states of", layout), self._write(layout) as conn:
                    rows, after = state_formats.rewrite_chunk(conn, layout, table, after)
                if rows:
                    rewritten[table.name] = rewritten.get(table.name, 0) + rows
                if rows < state_formats.CHUNK_ROWS:
                    break
        return rewritten



def _plain(value: Any) -> Any:
    """A NumPy scalar as the Python value drivers bind."""
    return value.item() if isinstance(value, np.generic) else value
