"""The staging table of a server store: where executors put a batch's partial rows, merged by the server.

Without it every partial row of a batch travels to the driver and back out to the database
(``SqlStore.write_batch``'s Arrow path), which bounds a cluster by its driver.  With it, each Spark task
writes its partition's rows into one table per aggregation (``COPY`` on PostgreSQL, ``LOAD DATA LOCAL`` on
MariaDB and MySQL: ``engine.rollup.staging_writers``), under a tag naming the task attempt, and the batch's write
transaction merges them into each level table with ``INSERT ... SELECT`` per level (``ON CONFLICT DO
UPDATE``, on PostgreSQL a plain insert for buckets newer than the table's; ``ON DUPLICATE KEY UPDATE``, with
the key digest of ``store.dialects.mysql`` computed by the server), then deletes them.

Exactly-once: only the tags of the attempts whose output the driver received are merged (an earlier,
failed attempt of a task may have copied its rows too), the merge and the commit record share one
transaction, and a pipeline's rows left by a run that never committed are deleted before it stages again.
UNLOGGED on PostgreSQL: a crash of the server loses the table's rows, which only ever hold uncommitted
batches, and skipping the WAL halves the cost of the copy.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tiltframe.aggregates.layout import AGG_TIMESTAMP, AggregationLayout
from tiltframe.errors import StoreError
from tiltframe.model.streams import AttrType
from tiltframe.store.base import StagingTarget
from tiltframe.store.dialects.base import StoreDialect
from tiltframe.store.dialects.lookup import dialect_of
from tiltframe.store.dialects.mysql import StoredText
from tiltframe.store.reads.frames import ARROW_TYPES, fetch_all, typed_frame
from tiltframe.store.schema import sql_type
from tiltframe.store.writes import bulk_formats

#: Suffix of the staging table's name (``TradeAggregation_STAGED``): no duration's table suffix.
STAGING_SUFFIX = "_STAGED"
STAGE_PIPELINE = "_tiltframe_pipeline"
STAGE_BATCH = "_tiltframe_batch"
#: Which task attempt copied the row: ``<job nonce>/<partition>/<task attempt id>``.
STAGE_TAG = "_tiltframe_tag"
STAGE_LEVEL = "_tiltframe_level"
_LEADING = (STAGE_PIPELINE, STAGE_BATCH, STAGE_TAG, STAGE_LEVEL)


class StagedRowsLost(StoreError):
    """The staging table lacks rows the executors copied (a crash of the server empties an UNLOGGED
    table): the batch must be computed again; nothing of it was written."""


def staging_name(layout: AggregationLayout) -> str:
    return layout.name + STAGING_SUFFIX


def qualifies(layout: AggregationLayout) -> bool:
    """Whether ``layout``'s batches can be staged: sketch states are merged with the stored ones on the
    driver (``upserts.merge_sketches``), shards' rows carry the deployment's shard id, added there, and
    the bulk formats carry no binary or list column (``store.writes.bulk_formats``)."""
    return (not layout.partitioned and not any(s.merge.is_sketch for s in layout.states)
            and bulk_formats.carries(layout.stored_column_types.values()))


#: A tag's column: short text, indexable on every server.
_TAG_TYPE = sa.Text().with_variant(sa.String(255), "mysql", "mariadb")


def staging_table(layout: AggregationLayout, dialect: StoreDialect) -> sa.Table:
    """The staging table of ``layout`` on ``dialect``: its columns here, its layout (index, clustering,
    logging) the dialect's (``StoreDialect.staging_table``)."""
    types = layout.stored_column_types
    columns = [sa.Column(STAGE_PIPELINE, StoredText(), nullable=False),
               sa.Column(STAGE_BATCH, sa.BigInteger(), nullable=False),
               sa.Column(STAGE_TAG, _TAG_TYPE, nullable=False), sa.Column(STAGE_LEVEL, sa.Integer(), nullable=False),
               *(sa.Column(c, StoredText() if t is AttrType.STRING else sql_type(t)) for c, t in types.items())]
    return dialect.staging_table(staging_name(layout), columns, STAGE_TAG, STAGE_LEVEL)


def _staged(conn: Connection, layout: AggregationLayout) -> sa.Table:
    return staging_table(layout, dialect_of(conn))


def ensure_staging(conn: Connection, layout: AggregationLayout) -> sa.Table:
    """Create the staging table, or make it anew when its columns are another definition's (it only ever
    holds rows of uncommitted batches)."""
    table = _staged(conn, layout)
    inspector = sa.inspect(conn)
    if inspector.has_table(table.name):
        have = [c["name"] for c in inspector.get_columns(table.name)]
        if have == [c.name for c in table.columns]:
            return table
        table.drop(conn)
    table.create(conn)
    return table


def drop_staging(conn: Connection, layout: AggregationLayout) -> None:
    _staged(conn, layout).drop(conn, checkfirst=True)


def target(conninfo: str, conn: Connection, layout: AggregationLayout) -> StagingTarget:
    """What executors need to write into the staging table of ``layout`` on ``conn``'s server."""
    quote = conn.dialect.identifier_preparer.quote
    types = layout.stored_column_types
    names = ", ".join(quote(c) for c in (*_LEADING, *types))
    columns, keys = tuple((c, ARROW_TYPES[t]) for c, t in types.items()), tuple(layout.stored_key_names)
    sql, kind = dialect_of(conn).staging_load(quote(staging_name(layout)), names)
    return StagingTarget(conninfo, sql, columns, keys, kind)


def clear_pipeline(conn: Connection, layout: AggregationLayout, pipeline_id: str) -> int:
    """Delete every staged row of ``pipeline_id``: before its next batch stages, any is stale (attempts of
    a batch that never committed; one pipeline runs one batch at a time)."""
    table = _staged(conn, layout)
    return conn.execute(sa.delete(table).where(table.c[STAGE_PIPELINE] == pipeline_id)).rowcount


def _of_tags(table: sa.Table, tags: Sequence[str]) -> sa.ColumnElement[bool]:
    return table.c[STAGE_TAG].in_(list(tags))


def _tagged(table: sa.Table, tags: Sequence[str], level: int) -> sa.ColumnElement[bool]:
    return sa.and_(_of_tags(table, tags), table.c[STAGE_LEVEL] == level)


def check_present(conn: Connection, layout: AggregationLayout, tags: Sequence[str], rows: Sequence[int]) -> None:
    """Refuse to merge unless the staging table holds every row the tags copied, level by level."""
    table = _staged(conn, layout)
    level = table.c[STAGE_LEVEL]
    found = dict(conn.execute(sa.select(level, sa.func.count()).where(_of_tags(table, tags)).group_by(level)).all())
    want = {i: n for i, n in enumerate(rows) if n}
    if {int(k): int(v) for k, v in found.items()} != want:
        msg = (f"the staging table {table.name} lost rows of this batch (found {found}, copied {want}): the "
               f"server restarted after a crash (which empties PostgreSQL's UNLOGGED tables), or they were deleted")
        raise StagedRowsLost(msg)


def merge_level(conn: Connection, layout: AggregationLayout, target_table: sa.Table, level: int,
                tags: Sequence[str], purged_before: int | None) -> int:
    """Merge the staged rows of ``level`` copied by ``tags`` into ``target_table``, skipping purged buckets,
    the dialect's way (``StoreDialect.merge_staged``); returns the rows merged."""
    staged = _staged(conn, layout)
    where = [_tagged(staged, tags, level)]
    if purged_before is not None:
        where.append(staged.c[AGG_TIMESTAMP] >= purged_before)
    return dialect_of(conn).merge_staged(conn, layout, staged, target_table, where)


def delete_batch(conn: Connection, layout: AggregationLayout, pipeline_id: str, batch_id: int) -> None:
    """Delete the rows the pipeline staged up to ``batch_id``: the merged attempts' and any failed one's."""
    table = _staged(conn, layout)
    conn.execute(sa.delete(table).where(table.c[STAGE_PIPELINE] == pipeline_id, table.c[STAGE_BATCH] <= batch_id))


def read_level(conn: Connection, layout: AggregationLayout, level: int, tags: Sequence[str]) -> pa.Table:
    """The staged rows of ``level`` copied by ``tags``, as the Arrow path would have merged them (to name a
    row whose sum overflowed)."""
    staged = _staged(conn, layout)
    types = layout.stored_column_types
    rows = fetch_all(conn, sa.select(*(staged.c[c] for c in types)).where(_tagged(staged, tags, level)))
    frame = typed_frame(rows, types)
    schema = pa.schema([pa.field(c, ARROW_TYPES[t]) for c, t in types.items()])
    return pa.Table.from_pandas(frame, schema=schema, preserve_index=False)
