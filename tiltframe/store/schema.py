"""The tables of a store: the shared bookkeeping tables, and the per-granularity tables of an aggregation.

Every ``*_at`` column is epoch milliseconds (UTC), like every other time in tiltframe.  Text columns are
:class:`~tiltframe.store.dialects.mysql.StoredText`, which compares byte for byte on MySQL/MariaDB as it does
on SQLite and PostgreSQL.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from tiltframe.aggregates.layout import SHARD_ID, AggregationLayout
from tiltframe.model.durations import Granularity
from tiltframe.model.streams import AttrType
from tiltframe.store.base import REJECTED_COLUMNS, REJECTED_TIMES
from tiltframe.store.dialects.base import StoreDialect
from tiltframe.store.dialects.mysql import KEY_HASH, StoredText, primary_key, sa_mysql

AGGREGATIONS = "TILTFRAME_AGGREGATIONS"
BATCHES = "TILTFRAME_BATCHES"
REJECTED = "TILTFRAME_REJECTED"
PURGES = "TILTFRAME_PURGES"
TABLES = "TILTFRAME_TABLES"
DEFINITIONS = "TILTFRAME_DEFINITIONS"
SKIPPED_VALUES = "TILTFRAME_SKIPPED_VALUES"

SHARED = sa.MetaData()
_NAME, _LONG = StoredText(255), sa.BigInteger
AGGREGATIONS_TABLE = sa.Table(
    AGGREGATIONS, SHARED, sa.Column("name", _NAME, primary_key=True),
    *(sa.Column(c, t, nullable=False) for c, t in (("spec_hash", StoredText(64)), ("zone", StoredText(64)),
                                                   ("granularities", StoredText()), ("created_at", _LONG))),
)
#: One commit record per micro-batch of a pipeline: what makes a replay a no-op, and the store's
#: record of which batches of which pipeline (checkpoint) it holds.
BATCHES_TABLE = sa.Table(
    BATCHES, SHARED, sa.Column("aggregation", _NAME, primary_key=True),
    sa.Column("pipeline_id", _NAME, primary_key=True),
    sa.Column("batch_id", _LONG, primary_key=True, autoincrement=False),
    *(sa.Column(c, _LONG, nullable=False)
      for c in ("events_read", "events_aggregated", "events_moved", "events_rejected")),
    sa.Column("min_event_ts", _LONG), sa.Column("max_event_ts", _LONG),
    sa.Column("rows_written", _LONG, nullable=False), sa.Column("committed_at", _LONG, nullable=False),
    # The pipeline's state after the batch (``PipelineState``), read by its next batch.
    sa.Column("latest_event_ts", _LONG), sa.Column("recovery_bucket", _LONG),
)
#: Per aggregation and measure that takes an argument: the events whose argument was null or NaN, which the
#: measure skipped, in the batches that counted them (``batches``, holding ``events`` aggregated events).
#: Each batch's commit adds its counts in its own transaction, so a replayed batch never adds twice; a store
#: made before this table holds no row of its earlier batches, which count as not counted.
SKIPPED_VALUES_TABLE = sa.Table(
    SKIPPED_VALUES, SHARED, sa.Column("aggregation", _NAME, primary_key=True),
    sa.Column("measure", _NAME, primary_key=True),
    *(sa.Column(c, _LONG, nullable=False) for c in ("values_skipped", "events", "batches", "updated_at")),
)
REJECTED_TABLE = sa.Table(
    REJECTED, SHARED, sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("aggregation", _NAME, nullable=False, index=True),
    sa.Column("pipeline_id", _NAME, nullable=False),
    sa.Column("batch_id", _LONG, nullable=False), *(sa.Column(c, StoredText()) for c in REJECTED_COLUMNS),
    *(sa.Column(c, _LONG) for c in REJECTED_TIMES), sa.Column("recorded_at", _LONG, nullable=False),
)
PURGES_TABLE = sa.Table(
    PURGES, SHARED, sa.Column("aggregation", _NAME, primary_key=True),
    sa.Column("granularity", StoredText(32), primary_key=True),
    # Buckets starting before ``purged_before`` were deleted and are never written again.
    sa.Column("purged_before", _LONG, nullable=False), sa.Column("latest_event_ts", _LONG, nullable=False),
    sa.Column("rows_purged", _LONG, nullable=False), sa.Column("purged_at", _LONG, nullable=False),
)
# The definition of each pre-aggregated table (``TableSpec.to_json``), which a changed one is compared with.
TABLES_TABLE = sa.Table(
    TABLES, SHARED, sa.Column("name", _NAME, primary_key=True),
    sa.Column("definition", StoredText(), nullable=False), sa.Column("updated_at", _LONG, nullable=False),
)

# The definition of each aggregation (``store.lifecycle.definitions.Definition``), which a changed one is compared with
# (``tiltframe migrate``), and the app that defined it.
DEFINITIONS_TABLE = sa.Table(
    DEFINITIONS, SHARED, sa.Column("name", _NAME, primary_key=True), sa.Column("app", StoredText(255)),
    sa.Column("definition", StoredText(), nullable=False), sa.Column("updated_at", _LONG, nullable=False),
)


def sql_type(t: AttrType) -> sa.types.TypeEngine[Any]:
    """Column type of an attribute."""
    if t is AttrType.STRING:
        return StoredText()
    if t.is_integral:
        return sa.BigInteger()
    if t.is_numeric:
        return sa.Double()
    if t is AttrType.BINARY:  # sketches; MySQL's BLOB stops at 64 KiB
        return sa.LargeBinary().with_variant(sa_mysql().LONGBLOB(), "mysql", "mariadb")
    return sa.Boolean()


def level_tables(
    layout: AggregationLayout, dialect: StoreDialect, *, hashed: bool | None = None
) -> dict[Granularity, sa.Table]:
    """The table of each granularity of ``layout`` on ``dialect``: its columns in order, keyed by
    ``stored_key_names``, or on MySQL/MariaDB with string keys by ``AGG_KEY_HASH`` in their place
    (``store.dialects.mysql``; ``hashed=False``: a table made before, keyed by its VARCHAR(255) keys)."""
    hashed = dialect.hashes_keys(layout) if hashed is None else hashed
    key = primary_key(layout) if hashed else list(layout.stored_key_names)
    md = sa.MetaData()

    def columns() -> list[Any]:
        cols: list[Any] = [sa.Column(c, _text(layout, dialect, hashed, c) if t is AttrType.STRING else sql_type(t),
                                     nullable=c not in layout.stored_key_names, autoincrement=False)
                           for c, t in layout.stored_column_types.items()]
        if hashed:
            cols.append(sa.Column(KEY_HASH, sa_mysql().BINARY(32), nullable=False))
        return [*cols, sa.PrimaryKeyConstraint(*key)]

    return {g: sa.Table(layout.table_name(g), md, *columns(), sqlite_with_rowid=False)
            for g in layout.spec.granularities}


def _text(layout: AggregationLayout, dialect: StoreDialect, hashed: bool, column: str) -> StoredText:
    """A text column: a shard id is short; so is a key of a MySQL table keyed by its text (one made before
    ``AGG_KEY_HASH``), since MySQL cannot key a LONGTEXT column."""
    short = column == SHARD_ID or (dialect.short_text_keys(hashed) and column in layout.stored_key_names)
    return StoredText(255) if short else StoredText()
