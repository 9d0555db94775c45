"""PostgreSQL's binary COPY as ``store.writes.bulk_formats`` writes it: every type the tables use, NULLs in each,
doubles bit for bit, text of any content, rows split across pieces."""

from __future__ import annotations

import math
import struct

import pyarrow as pa
import pytest
import sqlalchemy as sa

import tiltframe.store.writes.bulk_formats as bulk_formats
from tests.servers import fresh_database
from tiltframe.errors import StoreError
from tiltframe.model.aggregations import StoreSpec
from tiltframe.store.urls import store_target

DOUBLES = [0.1, -0.0, math.inf, -math.inf, 5e-324, 1.7976931348623157e308, math.nan, None]
TEXTS = ["", "a\tb\nc", 'q"uote', "\\N", "ünï 株", "x" * 3000, None, ","]


def bits(value: float | None) -> bytes | None:
    return None if value is None else struct.pack(">d", value)


def test_every_type_and_null_reads_back_as_written(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bulk_formats, "CHUNK_ROWS", 3)  # pieces end mid-table
    n = len(DOUBLES)
    columns = [pa.array([i - 4 if i % 3 else None for i in range(n)], pa.int64()),
               pa.array([2**31 - 1, -(2**31), *([7] * (n - 3)), None], pa.int32()),
               pa.array(DOUBLES, pa.float64()), pa.array(TEXTS, pa.string()),
               pa.array([True, False, None, *([True] * (n - 3))], pa.bool_()),
               pa.chunked_array([[9_223_372_036_854_775_807, -9_223_372_036_854_775_808], list(range(n - 2))],
                                pa.int64())]
    with fresh_database("postgresql") as url:
        engine = sa.create_engine(store_target(StoreSpec("rdbms", url)))
        try:
            with engine.begin() as conn:
                conn.exec_driver_sql("CREATE TABLE t (a BIGINT, b INTEGER, c DOUBLE PRECISION, d TEXT, e BOOLEAN, "
                                     "f BIGINT NOT NULL)")
                with conn.connection.dbapi_connection.cursor() as cursor, cursor.copy(
                        "COPY t (a, b, c, d, e, f) FROM STDIN (FORMAT binary)") as copy:
                    copy.write(bulk_formats.BINARY_HEADER)
                    for piece in bulk_formats.binary_rows(columns):
                        copy.write(piece)
                    copy.write(bulk_formats.BINARY_TRAILER)
                rows = conn.exec_driver_sql("SELECT a, b, c, d, e, f FROM t ORDER BY ctid").all()
        finally:
            engine.dispose()
    want = [c.to_pylist() for c in columns]
    assert [list(col) for col in zip(*rows, strict=True)][:2] == want[:2]
    got_c = [r[2] for r in rows]
    assert [bits(v) for v in got_c[:-2]] == [bits(v) for v in want[2][:-2]]  # -0.0 and the smallest double kept
    assert math.isnan(got_c[-2]) and got_c[-1] is None
    assert [r[3] for r in rows] == TEXTS and [r[4] for r in rows] == want[4] and [r[5] for r in rows] == want[5]


def test_a_type_the_format_cannot_carry_is_named() -> None:
    with pytest.raises(StoreError, match="no binary COPY of a binary column"):
        list(bulk_formats.binary_rows([pa.array([b"x"], pa.binary())]))
