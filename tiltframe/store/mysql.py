"""What MySQL and MariaDB need beyond portable SQL, so that they keep the same rows as SQLite and PostgreSQL.

Text compares byte for byte.  The servers' default collations fold case and accents (``IBM`` = ``ibm``,
``é`` = ``e``), treat many emoji as one, and PAD SPACE collations ignore trailing spaces (``IBM`` =
``IBM ``, even with ``utf8mb4_bin``).  Every text column tiltframe creates there is utf8mb4 with a binary
NO PAD collation: ``utf8mb4_nopad_bin`` on MariaDB, ``utf8mb4_0900_bin`` on MySQL 8.0.17 and later.

Keys of any length.  InnoDB indexes at most 3072 bytes of a key, so a string key column is LONGTEXT and the
unique key holds a stored generated column instead: ``AGG_KEY_HASH``, the SHA-256 of the string keys
(each prefixed with its length in bytes, so that ``("ab", "c")`` and ``("a", "bc")`` differ).  The unique
key ``tiltframe_key`` is (``AGG_TIMESTAMP``, the other keys, ``AGG_KEY_HASH``, ``SHARD_ID``), which the
upsert's ``ON DUPLICATE KEY UPDATE`` finds rows by.  MariaDB refuses a primary key on a generated column,
so such a table has no primary key (InnoDB adds a hidden one).  Tables whose keys are all numbers keep
their primary key.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import mysql
from sqlalchemy.engine import Connection

from tiltframe.spec.model import AttrType
from tiltframe.store.layout import SHARD_ID, AggregationLayout

MYSQL_DIALECTS = frozenset({"mysql", "mariadb"})
#: The generated column of the string keys' digest, and the unique key that holds it.
KEY_HASH = "AGG_KEY_HASH"
KEY_INDEX = "tiltframe_key"


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
            return dialect.type_descriptor(mysql.VARCHAR(self.length, charset="utf8mb4", collation=collation))
        return dialect.type_descriptor(mysql.LONGTEXT(charset="utf8mb4", collation=collation))


def string_keys(layout: AggregationLayout) -> list[str]:
    """The group-by keys stored as text, which MySQL cannot index whole."""
    return [k.name for k in layout.keys if k.type is AttrType.STRING]


def key_hash_column(layout: AggregationLayout) -> sa.Column[Any]:
    """``AGG_KEY_HASH``: SHA-256 of the string keys, computed and stored by the server."""
    names = [f"`{k.replace('`', '``')}`" for k in string_keys(layout)]
    text = names[0] if len(names) == 1 else "CONCAT({})".format(", ".join(f"LENGTH({n}), ':', {n}" for n in names))
    return sa.Column(KEY_HASH, mysql.BINARY(32), sa.Computed(f"UNHEX(SHA2({text}, 256))", persisted=True))


def unique_key(layout: AggregationLayout) -> list[str]:
    """The columns of ``tiltframe_key``: the stored key with the string keys replaced by their digest."""
    text = set(string_keys(layout))
    kept = [k for k in layout.stored_key_names if k not in text and k != SHARD_ID]
    return [*kept, KEY_HASH, *([SHARD_ID] if layout.partitioned else [])]


def key_columns(conn: Connection, table: str) -> list[str]:
    """The columns that identify a stored row: the primary key, else (MySQL) ``tiltframe_key``."""
    inspector = sa.inspect(conn)
    primary = list(inspector.get_pk_constraint(table)["constrained_columns"])
    if primary or not is_mysql(conn.dialect):
        return primary
    return next((list(i["column_names"]) for i in inspector.get_indexes(table) if i["name"] == KEY_INDEX), [])


def add_shard_to_key(conn: Connection, table: str, layout: AggregationLayout) -> None:
    """Make the filled ``SHARD_ID`` column NOT NULL and part of the key of ``table`` (a partitioned
    ``layout``), whether the table has ``tiltframe_key`` or (keys all numbers, or made by an earlier
    tiltframe) a primary key."""
    quote = conn.dialect.identifier_preparer.quote
    shard = f"{quote(SHARD_ID)} {shard_column_ddl(conn.dialect)} NOT NULL"
    if KEY_INDEX in {i["name"] for i in sa.inspect(conn).get_indexes(table)}:
        key = ", ".join(quote(k) for k in unique_key(layout))
        rekey = f"DROP INDEX {quote(KEY_INDEX)}, ADD CONSTRAINT {quote(KEY_INDEX)} UNIQUE ({key})"
    else:
        key = ", ".join(quote(k) for k in layout.stored_key_names)
        rekey = f"DROP PRIMARY KEY, ADD PRIMARY KEY ({key})"
    conn.exec_driver_sql(f"ALTER TABLE {quote(table)} MODIFY {shard}, {rekey}")


def shard_column_ddl(dialect: sa.Dialect) -> str:
    """The type of a ``SHARD_ID`` column added to an existing table."""
    return f"VARCHAR(255) CHARACTER SET utf8mb4 COLLATE {binary_collation(dialect)}"


def earlier_keys(conn: Connection, table: str, layout: AggregationLayout) -> str | None:
    """Why a table made by an earlier tiltframe may merge distinct keys (its string keys in the primary
    key, in the server's default collation), or None."""
    if not string_keys(layout) or KEY_HASH in {c["name"] for c in sa.inspect(conn).get_columns(table)}:
        return None
    return (f"table {table} was made by an earlier tiltframe: its string keys are limited to 255 characters and "
            f"compare in the database's collation, which may take keys differing only in case, accents or "
            f"trailing spaces for one; rebuild it (tiltframe run ... --rebuild) to keep them apart")
