"""The level tables of an aggregation in a SQL store: made and registered, checked against the definition
that made them, followed when a pre-aggregated table's definition changes, given shards, dropped."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence

import pyarrow as pa
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tiltframe.aggregates.layout import SHARD_ID, AggregationLayout
from tiltframe.errors import DefinitionError, StoreError
from tiltframe.model.durations import Granularity
from tiltframe.model.tables import TableSpec
from tiltframe.store.base import StoreChanged
from tiltframe.store.dialects import mysql
from tiltframe.store.lifecycle import rollup_swaps
from tiltframe.store.lifecycle.definition_changes import apply_plan, complete_from
from tiltframe.store.lifecycle.definitions import Definition, DefinitionPlan, plan
from tiltframe.store.lifecycle.level_fills import fill_level
from tiltframe.store.lifecycle.table_migrations import follow_change
from tiltframe.store.lifecycle.table_rebuilds import alter_with_shard, copy_with_shard, primary_key
from tiltframe.store.retries import retried
from tiltframe.store.schema import (
    AGGREGATIONS_TABLE,
    BATCHES,
    DEFINITIONS_TABLE,
    SHARED,
    TABLES_TABLE,
    level_tables,
)
from tiltframe.store.sql_connections import Registration, SqlConnections
from tiltframe.store.views import replace_view, view_name
from tiltframe.store.writes import commits, staging
from tiltframe.store.writes.commits import now_ms

logger = logging.getLogger(__name__)

class SqlSchema(SqlConnections):
    """The tables of an aggregation: made, checked against its definition, changed, dropped."""

    def _check_identifiers(self, layout: AggregationLayout) -> None:
        limit = self.capabilities.max_identifier_length
        names = (*(n for g in layout.spec.granularities for n in (layout.table_name(g), view_name(layout, g))),
                 *layout.column_types)
        for name in names:
            if len(name) > limit:
                msg = (f"the name {name!r} of aggregation {layout.name} is {len(name)} characters long, "
                       f"but {self.dialect.name} allows at most {limit}; use a shorter name")
                raise DefinitionError(msg)

    @retried
    def ensure_schema(self, layout: AggregationLayout) -> tuple[str, ...]:
        """Create the tables of ``layout`` and register it, or check that the stored ones match its spec.

        A pre-aggregated table whose definition changed is rebuilt to follow it
        (:mod:`tiltframe.store.lifecycle.table_migrations`); returns what changed, in words (nothing otherwise).
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
            row = self._registration(conn, layout)
            registration = {"spec_hash": layout.spec_hash, "zone": layout.zone,
                            "granularities": ",".join(g.table_suffix for g in layout.spec.granularities)}
            if row is None:
                conn.execute(sa.insert(AGGREGATIONS_TABLE).values(name=layout.name, created_at=now_ms(),
                                                                  **registration))
            elif row.spec_hash != layout.spec_hash and layout.table is not None:
                notes = self._follow_table_change(conn, layout, row)
                conn.execute(sa.update(AGGREGATIONS_TABLE).where(a.name == layout.name).values(**registration))
            else:
                self._check_same_spec(conn, layout, row)
            complete = self._record_aggregation(conn, layout)
            if self.dialect.hashes_keys(layout):  # tables made before AGG_KEY_HASH keep their keys
                earlier = mysql.earlier_keys(conn, layout.table_name(layout.spec.finest), layout)
                if earlier:
                    logger.warning("%s", earlier)
                self._tables_cache[key] = level_tables(layout, self.dialect, hashed=None if earlier is None
                                                       else False)
            for g, table in self._tables(layout).items():
                table.create(conn, checkfirst=True)
                self._check_partitioning(conn, layout, table)
                replace_view(conn, layout, table, g, complete)
            if layout.table is not None:
                self._record_definition(conn, layout.table)
        self._ready.add(key)
        return notes

    def _record_aggregation(self, conn: Connection, layout: AggregationLayout) -> dict[str, int]:
        """Record the definition of ``layout`` (registered with its digest) if the store has none yet (a
        new aggregation, or one made before definitions were recorded); returns, per measure, the instant
        from which it is complete (``store.lifecycle.definitions``).  A pre-aggregated table records its own."""
        if layout.table is not None:
            return {}
        stored = self._definition(conn, layout.name)
        if stored is not None and stored.spec_hash == layout.spec_hash:
            return stored.complete_from
        new = Definition.of(layout, layout.app_name)
        if stored is not None:  # a change that shapes nothing stored (``_check_same_spec`` let it through)
            a = AGGREGATIONS_TABLE.c
            conn.execute(sa.update(AGGREGATIONS_TABLE).where(a.name == layout.name).values(spec_hash=layout.spec_hash))
            new = dataclasses.replace(new, complete_from=stored.complete_from,
                                      earlier=(*stored.earlier, stored.spec_hash))
            logger.info("aggregation %s: %s", layout.name, "; ".join(plan(stored, new).steps()))
        self._write_definition(conn, new)
        return new.complete_from

    @staticmethod
    def _write_definition(conn: Connection, definition: Definition) -> None:
        d = DEFINITIONS_TABLE.c
        values = {"app": definition.app, "definition": definition.to_json(), "updated_at": now_ms()}
        if conn.execute(sa.update(DEFINITIONS_TABLE).where(d.name == definition.name).values(**values)).rowcount == 0:
            conn.execute(sa.insert(DEFINITIONS_TABLE).values(name=definition.name, **values))

    def definition_plan(self, layout: AggregationLayout) -> DefinitionPlan | None:
        """The plan that takes the stored tables of ``layout``'s aggregation to ``layout`` (``validate -d``);
        None when the store does not hold the aggregation.

        Raises:
            StoreError: the tables are of another definition that the store did not record.
        """
        if not self._exists():
            return None
        with self._errors("read the definition of", layout), self._engine.connect() as conn:
            row = self._registration(conn, layout)
            if row is None:
                return None
            stored = self._definition(conn, layout.name)
            if stored is None and row.spec_hash != layout.spec_hash:
                raise StoreError(self._changed_definition(layout, row, None))
        new = Definition.of(layout, layout.app_name)
        return plan(stored or new, new)

    @retried
    def change_definition(self, layout: AggregationLayout) -> DefinitionPlan | None:
        """Take the stored tables of ``layout``'s aggregation to ``layout`` (``tiltframe migrate``): measures
        and levels removed lose their columns and tables, measures added gain theirs (reading NULL for the
        buckets that start before they are complete), levels added are built from a finer kept level
        (``store.lifecycle.level_fills``); the registration, the recorded definition and the views follow, in one schema
        transaction.  Returns the plan carried out (None: the store does not hold the aggregation, or holds
        this definition); for another app's aggregation of that name, its plan, of which nothing is done.

        Raises:
            StoreError: a change the plan cannot carry out without rebuilding from the inputs, or a definition
                the store did not record.
        """
        self._require_writable()
        if not self._exists() or layout.table is not None:
            return None
        with self._errors("migrate", layout), self._write(layout, schema=True) as conn:
            row = self._registration(conn, layout)
            if row is None:
                return None
            if row.spec_hash == layout.spec_hash:
                return None
            stored = self._definition(conn, layout.name)
            if stored is None:
                raise StoreError(self._changed_definition(layout, row, None))
            new = Definition.of(layout, layout.app_name)
            change = plan(stored, new)
            if change.other_app:
                return change
            if change.rebuild:
                raise StoreError(_not_in_place(layout, change))
            tables = self._tables(layout)
            apply_plan(conn, layout, change, tables)
            commits.forget_skipped(conn, layout, {m.name for m in (*change.added, *change.removed)})
            since = complete_from(conn, layout)
            levels = [g for g in layout.spec.granularities if g.table_suffix in change.stored.levels]
            purged = self._purged_before(conn, layout)
            built = []
            for g in layout.spec.granularities:
                if g.table_suffix in change.added_levels:
                    tables[g].create(conn, checkfirst=True)
                    built.append(fill_level(conn, layout, g, tables, levels, purged, since))
            change = dataclasses.replace(change, notes=(*change.notes, *built))
            kept = {m: t for m, t in change.stored.complete_from.items() if new.measure(m) is not None
                    and m not in {a.name for a in change.added}}
            added = {m.name: since for m in change.added if since is not None}
            conn.execute(sa.update(AGGREGATIONS_TABLE).where(AGGREGATIONS_TABLE.c.name == layout.name).values(
                spec_hash=layout.spec_hash, granularities=",".join(g.table_suffix for g in layout.spec.granularities)))
            self._write_definition(conn, dataclasses.replace(
                new, complete_from={**kept, **added}, earlier=(*change.stored.earlier, change.stored.spec_hash)))
        self.ensure_schema(layout)  # the tables of levels added, and every view
        return change

    def swap_rollup(self, layout: AggregationLayout, levels: Mapping[Granularity, pa.Table], events: int,
                    mark: tuple[int, int | None]) -> tuple[DefinitionPlan, dict[Granularity, int]]:
        """Put ``levels`` (every level of ``layout``, rebuilt from ``events`` of the inputs) in place of the
        stored rollup of an earlier definition (one that differs in what every row depends on, or lacks a
        finer level), unless the store aggregated more events than that (inputs gone):
        written beside it first, then swapped in by one write transaction that also moves the registration
        and the recorded definition on (``store.lifecycle.rollup_swaps``).  Commit records stay (the pipeline goes on
        from the earlier definition's checkpoint); purge records and the events recorded as late or moved
        go (the rebuilt rows hold every event in its own bucket).  Returns the plan carried out and the rows
        written per level.

        Raises:
            StoreChanged: a batch committed since ``mark`` was read; nothing changed.
            StoreError: the stored definition is not one this plan applies to (any more), or the store holds
                more events than the rebuilt levels.
        """
        self._require_writable()
        tables = self._tables(layout)
        with self._errors("rebuild", layout), self._write(schema=True) as conn:
            written = rollup_swaps.build(conn, layout, tables, levels)
        try:
            with self._errors("swap in the rebuilt rollup of", layout), self._write(layout, schema=True) as conn:
                if commits.mark(conn, layout) != mark:
                    msg = f"a batch of aggregation {layout.name} was committed while it was rebuilt"
                    raise StoreChanged(msg)
                stored = self._definition(conn, layout.name)
                change = None if stored is None else plan(stored, Definition.of(layout, layout.app_name))
                if change is None or not change.changed or change.other_app:
                    msg = f"aggregation {layout.name} changed while it was rebuilt: run migrate again"
                    raise StoreError(msg)
                held = commits.events_aggregated(conn, layout)
                if events < held:
                    msg = (f"aggregation {layout.name} cannot be rebuilt from its inputs: they hold {events:,} "
                           f"events it can use, while the store holds {held:,}; an input went away or changed, "
                           f"and the rebuilt rollup would lose history. Nothing changed; restore the inputs, or "
                           f"define the new rollup under another name")
                    raise StoreError(msg)
                commits.forget_late_and_purged(conn, layout)
                commits.forget_skipped(conn, layout, {m.name for m in (*change.added, *change.removed)})
                conn.execute(sa.update(AGGREGATIONS_TABLE).where(AGGREGATIONS_TABLE.c.name == layout.name).values(
                    spec_hash=layout.spec_hash, zone=layout.zone,
                    granularities=",".join(g.table_suffix for g in layout.spec.granularities)))
                self._write_definition(conn, dataclasses.replace(
                    change.new, earlier=(*change.stored.earlier, change.stored.spec_hash)))
                # Last: MySQL commits the statements above when it meets this DDL, and an old pipeline's
                # next batch then finds the new definition registered and stops.
                rollup_swaps.swap(conn, layout, tables, change.stored.levels)
        except StoreError:
            with self._errors("drop the rebuilt tables of", layout), self._write(schema=True) as conn:
                rollup_swaps.drop_built(conn, layout, tables)
            raise
        self.ensure_schema(layout)  # the views (the staging table is remade by the next pipeline if it must)
        return change, written

    def mark_complete(self, layout: AggregationLayout, measures: Sequence[str]) -> None:
        """Record that ``measures`` (added by a migration) now hold their whole history (backfilled), and
        make the views show it."""
        self._require_writable()
        with self._errors("record the measures backfilled of", layout), self._write(layout, schema=True) as conn:
            stored = self._definition(conn, layout.name)
            if stored is None or stored.spec_hash != layout.spec_hash:
                return
            complete = {m: at for m, at in stored.complete_from.items() if m not in measures}
            self._write_definition(conn, dataclasses.replace(stored, complete_from=complete))
            for g, table in self._tables(layout).items():
                replace_view(conn, layout, table, g, complete)

    def _follow_table_change(self, conn: Connection, layout: AggregationLayout, row: Registration) -> tuple[str, ...]:
        text = conn.execute(sa.select(TABLES_TABLE.c.definition).where(TABLES_TABLE.c.name == layout.name)).scalar()
        if text is None:  # registered before definitions were recorded: nothing to compare with
            self._check_same_spec(conn, layout, row, recorded=False)
        return follow_change(conn, layout, self._tables(layout), TableSpec.from_json(text), row.zone).notes

    @staticmethod
    def _record_definition(conn: Connection, table: TableSpec) -> None:
        t = TABLES_TABLE.c
        values = {"definition": table.to_json(), "updated_at": now_ms()}
        if conn.execute(sa.update(TABLES_TABLE).where(t.name == table.name).values(**values)).rowcount == 0:
            conn.execute(sa.insert(TABLES_TABLE).values(name=table.name, **values))

    def _check_partitioning(self, conn: Connection, layout: AggregationLayout, table: sa.Table) -> None:
        """Tables made before ``@PartitionById`` lack ``SHARD_ID``: point to ``tiltframe migrate``, never
        write rows that would merge with another shard's."""
        has_shards = SHARD_ID in primary_key(conn, table.name)
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
            if self.dialect.bulk_loads and self.dialect.transactional_ddl:  # MySQL's DROP would commit
                staging.drop_staging(conn, layout)
                self._staging_ready.discard((layout.name, layout.spec_hash))
            quote = conn.dialect.identifier_preparer.quote  # MySQL commits the deletes before its first DROP
            for g, table in tables.items():
                conn.exec_driver_sql(f"DROP VIEW IF EXISTS {quote(view_name(layout, g))}")
                table.drop(conn)
        self._ready.discard((layout.name, layout.spec_hash, layout.partitioned))
        self._tables_cache.pop((layout.name, layout.spec_hash, layout.partitioned), None)

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
            row = self._registration(conn, layout)
            if row is None:
                return []
            self._check_same_spec(conn, layout, row)
            present = set(sa.inspect(conn).get_table_names())
            quote = conn.dialect.identifier_preparer.quote
            for g, table in self._tables(layout).items():
                if table.name not in present or SHARD_ID in primary_key(conn, table.name):
                    continue
                conn.exec_driver_sql(f"DROP VIEW IF EXISTS {quote(view_name(layout, g))}")
                if self.dialect.alters_primary_key:
                    alter_with_shard(conn, self.dialect, layout, table, shard_id)
                else:
                    copy_with_shard(conn, layout, table, shard_id)
                definition = self._definition(conn, layout.name)
                replace_view(conn, layout, table, g, definition.complete_from if definition else None)
                changed.append(table.name)
        return changed


def _not_in_place(layout: AggregationLayout, change: DefinitionPlan) -> str:
    """Why ``change`` cannot be carried out on the stored rows alone, and the ways on."""
    parts = "; ".join(f"its {part} changed ({old} -> {now})" for part, old, now in change.rebuild)
    return (f"aggregation {layout.name} cannot follow its new definition in place: {parts}, so every level must "
            f"be built again from the inputs: give them to migrate (tiltframe migrate APP -d DIR --input "
            f"STREAM=PATH), which builds the new rollup beside the old one and swaps it in")
