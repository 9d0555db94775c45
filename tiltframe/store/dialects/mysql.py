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

from collections.abc import Mapping
from hashlib import sha256
from types import ModuleType
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tiltframe.aggregates.layout import SHARD_ID, AggregationLayout
from tiltframe.model.streams import AttrType

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
