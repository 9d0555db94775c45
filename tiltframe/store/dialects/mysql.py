"""What MySQL and MariaDB need beyond portable SQL, so that they keep the same rows as SQLite and PostgreSQL.

Text compares byte for byte.  The servers' default collations fold case and accents (``IBM`` = ``ibm``,
``é`` = ``e``), treat many emoji as one, and PAD SPACE collations ignore trailing spaces (``IBM`` =
``IBM ``, even with ``utf8mb4_bin``).  Every text column tiltframe creates there is utf8mb4 with a binary
NO PAD collation: ``utf8mb4_nopad_bin`` on MariaDB, ``utf8mb4_0900_bin`` on MySQL 8.0.17 and later.

Keys of any length.  InnoDB indexes at most 3072 bytes of a key, so a string key column is LONGTEXT and
the primary key holds ``AGG_KEY_HASH`` in its place: the SHA-256 of the string keys (several each prefixed
with their length in bytes, so that ``("ab", "c")`` and ``("a", "bc")`` differ), computed from the rows
before they are written (:func:`key_hashes`; :func:`key_hash_sql` is the same digest in SQL, for rows
copied within the database).  The primary key is (``AGG_TIMESTAMP``, the other keys, ``AGG_KEY_HASH``,
``SHARD_ID``), which the upsert's ``ON DUPLICATE KEY UPDATE`` finds rows by.  A plain column, not a
generated one: MariaDB refuses a primary key on a generated column, and a unique key beside InnoDB's
hidden primary key made merges twice as slow.  Tables whose keys are all numbers keep their keys as
they are.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping, Sequence
from hashlib import sha256
from types import ModuleType
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tiltframe.aggregates.layout import SHARD_ID, AggregationLayout
from tiltframe.errors import StoreError
from tiltframe.model.streams import AttrType
from tiltframe.store.dialects.base import StoreDialect
from tiltframe.store.writes.appends import ahead, tsv_files
from tiltframe.store.writes.bulk_formats import FILE_MARK, LOAD_FORMAT, NON_FINITE, check_no_warnings, file_literal
from tiltframe.store.writes.upsert_merges import merge_assignments

MYSQL_DIALECTS = frozenset({"mysql", "mariadb"})
#: The column of the string keys' digest, in the primary key in their place.
KEY_HASH = "AGG_KEY_HASH"


def sa_mysql() -> ModuleType:
    """SQLAlchemy's MySQL dialect (its types, its INSERT ... ON DUPLICATE KEY UPDATE), imported on first use:
    its package imports every MySQL driver's dialect, 10-50 ms of each command, a read of SQLite included."""
    from sqlalchemy.dialects import mysql

    return mysql


def is_mysql(dialect: sa.Dialect | str) -> bool:
    return (dialect if isinstance(dialect, str) else dialect.name) in MYSQL_DIALECTS


def binary_collation(dialect: sa.Dialect) -> str:
    """The binary NO PAD collation of utf8mb4 on this server (``utf8mb4_bin`` on MySQL before 8.0.17, which
    has none and ignores trailing spaces)."""
    version = dialect.server_version_info or ()
    if getattr(dialect, "is_mariadb", False):
        return "utf8mb4_nopad_bin"
    return "utf8mb4_0900_bin" if tuple(version[:3]) >= (8, 0, 17) else "utf8mb4_bin"


class StoredText(sa.types.TypeDecorator[str]):
    """A text column: TEXT (or VARCHAR(length)) on SQLite and PostgreSQL; on MySQL/MariaDB utf8mb4 with
    the binary NO PAD collation, LONGTEXT when unbounded.  The collation is picked when the table is
    created, on a connection that knows the server."""

    impl = sa.Text
    cache_ok = True

    def __init__(self, length: int | None = None) -> None:
        super().__init__()
        self.length = length

    def load_dialect_impl(self, dialect: sa.Dialect) -> sa.types.TypeEngine[Any]:
        if not is_mysql(dialect):
            return dialect.type_descriptor(sa.String(self.length) if self.length else sa.Text())
        collation = binary_collation(dialect)
        if self.length:
            return dialect.type_descriptor(sa_mysql().VARCHAR(self.length, charset="utf8mb4", collation=collation))
        return dialect.type_descriptor(sa_mysql().LONGTEXT(charset="utf8mb4", collation=collation))


def string_keys(layout: AggregationLayout) -> list[str]:
    """The group-by keys stored as text, which MySQL cannot index whole."""
    return [k.name for k in layout.keys if k.type is AttrType.STRING]


def hashes_keys(layout: AggregationLayout, dialect: sa.Dialect | str) -> bool:
    """Whether the tables of ``layout`` on ``dialect`` are keyed by ``AGG_KEY_HASH``."""
    return is_mysql(dialect) and bool(string_keys(layout))


def primary_key(layout: AggregationLayout) -> list[str]:
    """The primary key of a hashed table: the stored key with the string keys replaced by their digest."""
    text = set(string_keys(layout))
    kept = [k for k in layout.stored_key_names if k not in text and k != SHARD_ID]
    return [*kept, KEY_HASH, *([SHARD_ID] if layout.partitioned else [])]


def key_hashes(layout: AggregationLayout, data: pa.Table) -> pa.Array:
    """``AGG_KEY_HASH`` of each row of ``data`` (its string keys never NULL); with one string key, each
    distinct key is hashed once (a batch's rows repeat a few keys over many buckets)."""
    keys = string_keys(layout)
    if len(keys) == 1:
        encoded = pc.dictionary_encode(data.column(keys[0]).combine_chunks())
        digests = pa.array([sha256(k.encode()).digest() for k in encoded.dictionary.to_pylist()], pa.binary(32))
        return pc.take(digests, encoded.indices)
    columns = [data.column(k).to_pylist() for k in keys]
    out = []
    for row in zip(*columns, strict=True):
        parts = [k.encode() for k in row]
        out.append(sha256(b"".join(b"%d:%s" % (len(b), b) for b in parts)).digest())
    return pa.array(out, pa.binary(32))


def key_hash_sql(layout: AggregationLayout, columns: Mapping[str, Any]) -> Any:
    """:func:`key_hashes` as an SQL expression over ``columns`` (name to column) of the string keys."""
    keys = [columns[k] for k in string_keys(layout)]
    text = keys[0] if len(keys) == 1 else sa.func.concat(
        *(part for k in keys for part in (sa.func.length(k), sa.literal_column("':'"), k)))
    return sa.func.unhex(sa.func.sha2(text, sa.literal_column("256")))


def add_shard_to_key(conn: Connection, table: str, layout: AggregationLayout) -> None:
    """Make the filled ``SHARD_ID`` column NOT NULL and part of the primary key of ``table`` (a partitioned
    ``layout``), keyed by ``AGG_KEY_HASH`` or (keys all numbers, or made by an earlier tiltframe) not."""
    quote = conn.dialect.identifier_preparer.quote
    shard = f"{quote(SHARD_ID)} {shard_column_ddl(conn.dialect)} NOT NULL"
    hashed = KEY_HASH in {c["name"] for c in sa.inspect(conn).get_columns(table)}
    key = ", ".join(quote(k) for k in (primary_key(layout) if hashed else layout.stored_key_names))
    conn.exec_driver_sql(f"ALTER TABLE {quote(table)} MODIFY {shard}, DROP PRIMARY KEY, ADD PRIMARY KEY ({key})")


def shard_column_ddl(dialect: sa.Dialect) -> str:
    """The type of a ``SHARD_ID`` column added to an existing table."""
    return f"VARCHAR(255) CHARACTER SET utf8mb4 COLLATE {binary_collation(dialect)}"


def earlier_keys(conn: Connection, table: str, layout: AggregationLayout) -> str | None:
    """Why an existing table made by an earlier tiltframe may merge distinct keys (its string keys in the
    primary key, in the server's default collation), or None."""
    inspector = sa.inspect(conn)
    if not string_keys(layout) or not inspector.has_table(table):
        return None
    if KEY_HASH in {c["name"] for c in inspector.get_columns(table)}:
        return None
    return (f"table {table} was made by an earlier tiltframe: its string keys are limited to 255 characters and "
            f"compare in the database's collation, which may take keys differing only in case, accents or "
            f"trailing spaces for one; rebuild it (tiltframe run ... --rebuild) to keep them apart")


#: Named locks span databases: the schema lock is named after this one.
_SCHEMA_LOCK = "CONCAT('tiltframe.schema.', MD5(DATABASE()))"
_SCHEMA_LOCK_WAIT_S = 300
#: The staging table's row number, filled by the server.
_STAGE_SEQ = "_tiltframe_seq"


class MysqlDialect(StoreDialect):
    """MySQL and MariaDB (see the module's docstring for their text and keys).  DDL commits by itself, so
    the schema lock is a named lock held across the whole sequence; long sums read back as DECIMAL; there
    is no NaN or infinity; executors and the driver bulk-load by ``LOAD DATA LOCAL`` where the server allows
    it (``local_infile``)."""

    names = ("mysql", "mariadb")
    max_identifier_length = 64
    unholdable = NON_FINITE
    transactional_ddl = False
    decimal_long_sums = True
    collated_text = True

    def connect_args(self, url: sa.URL) -> dict[str, object]:
        """``LOAD DATA LOCAL`` appends new buckets (``store.writes.appends``); utf8mb4 unless the URL says."""
        return {"local_infile": True, **({} if "charset" in url.query else {"charset": "utf8mb4"})}

    def _take_schema_lock(self, conn: Connection) -> str:
        got = conn.exec_driver_sql(f"SELECT GET_LOCK({_SCHEMA_LOCK}, {_SCHEMA_LOCK_WAIT_S})").scalar()
        if got != 1:
            conn.commit()
            msg = f"another process held the schema lock of the store for {_SCHEMA_LOCK_WAIT_S} s"
            raise StoreError(msg)
        return f"SELECT RELEASE_LOCK({_SCHEMA_LOCK})"

    def upsert(self, table: sa.Table, layout: AggregationLayout, rows: Any) -> sa.Executable:
        my = sa_mysql().insert(table)
        my = my.from_select(list(rows.selected_columns.keys()), rows) if isinstance(rows, sa.Select) \
            else my.values(rows)
        return my.on_duplicate_key_update(list(merge_assignments(layout, table, my.inserted).items()))

    def agg_time(self, ms: sa.ColumnElement[int]) -> sa.ColumnElement[object]:
        epoch = sa.cast(sa.literal("1970-01-01 00:00:00"), sa_mysql().DATETIME(fsp=3))
        added = sa.func.timestampadd(sa.literal_column("MICROSECOND"), ms.op("*")(sa.literal_column("1000")), epoch)
        return sa.cast(added, sa_mysql().DATETIME(fsp=3))

    def rename_tables(self, conn: Connection, renames: Sequence[tuple[str, str]]) -> None:
        quote = conn.dialect.identifier_preparer.quote  # one statement: all of them or none
        conn.exec_driver_sql("RENAME TABLE " + ", ".join(f"{quote(a)} TO {quote(b)}" for a, b in renames))

    def hashes_keys(self, layout: AggregationLayout) -> bool:
        return bool(string_keys(layout))

    def short_text_keys(self, hashed: bool) -> bool:
        return not hashed  # a table made before AGG_KEY_HASH: InnoDB cannot key a LONGTEXT column

    def shard_column_type(self, conn: Connection) -> str:
        return shard_column_ddl(conn.dialect)

    def add_shard_key(self, conn: Connection, layout: AggregationLayout, table: sa.Table) -> None:
        add_shard_to_key(conn, table.name, layout)

    def loads_local_files(self, conn: Connection) -> bool:
        """Only with ``local_infile`` on (MariaDB's default; MySQL 8's is off)."""
        return bool(int(conn.exec_driver_sql("SELECT @@GLOBAL.local_infile").scalar() or 0))

    def bulk_append(self, conn: Connection, layout: AggregationLayout, table: sa.Table, data: pa.Table) -> int:
        quote = conn.dialect.identifier_preparer.quote
        into = f"INTO TABLE {quote(table.name)} {LOAD_FORMAT} ({', '.join(quote(c) for c in data.column_names)})"
        if KEY_HASH in table.c:  # the key's digest, computed by the server from the loaded keys
            digest = key_hash_sql(layout, {k: sa.literal_column(quote(k)) for k in string_keys(layout)})
            into += f" SET {quote(KEY_HASH)} = {digest.compile(dialect=conn.dialect)}"
        loaded = 0
        with tempfile.TemporaryDirectory(prefix="tiltframe-append-") as folder, \
                conn.connection.dbapi_connection.cursor() as cursor:
            for path in ahead(tsv_files(data, folder)):
                cursor.execute(f"LOAD DATA LOCAL INFILE {file_literal(path)} {into}")
                loaded += cursor.rowcount
                check_no_warnings(cursor, f"rows of {table.name}")
                os.unlink(path)
        return loaded

    def staging_table(self, name: str, columns: Sequence[sa.Column[Any]], tag: str, level: str) -> sa.Table:
        """Clustered by level and tag (a row number keeps rows apart: attempts may copy the same rows), so
        that each level's merge reads its rows in one range and the load maintains no second index."""
        seq = sa.Column(_STAGE_SEQ, sa.BigInteger(), autoincrement=True, nullable=False)
        return sa.Table(name, sa.MetaData(), *columns, seq, sa.PrimaryKeyConstraint(level, tag, _STAGE_SEQ),
                        sa.UniqueConstraint(_STAGE_SEQ, name=f"{name}_seq"))

    def staging_load(self, quoted_table: str, names: str) -> tuple[str, str]:
        return f"LOAD DATA LOCAL INFILE {FILE_MARK} INTO TABLE {quoted_table} {LOAD_FORMAT} ({names})", "load"

    def merge_staged(self, conn: Connection, layout: AggregationLayout, staged: sa.Table, target: sa.Table,
                     where: Sequence[sa.ColumnElement[bool]]) -> int:
        """One upsert, read in the staging table's own order (a sort made it slower; a plain insert costs
        what its upsert does), with the key digest computed by the server."""
        chosen: list[Any] = [staged.c[c] for c in layout.stored_column_types]
        if KEY_HASH in target.c:
            chosen.append(key_hash_sql(layout, staged.c).label(KEY_HASH))
        conn.execute(self.upsert(target, layout, sa.select(*chosen).where(*where)))
        # The server counts an updated row twice and an unchanged one not at all: count the rows merged.
        return int(conn.execute(sa.select(sa.func.count()).select_from(staged).where(*where)).scalar() or 0)
