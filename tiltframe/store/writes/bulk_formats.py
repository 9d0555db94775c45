"""Rows in a server's bulk-load format: PostgreSQL's binary ``COPY ... FROM STDIN``, and the tab-separated
text of ``LOAD DATA LOCAL INFILE`` on MariaDB and MySQL.

Both are made by numpy and Arrow's C++ kernels (no Python object per value), for the executors' staging
(``engine.rollup.staging_writers``) and the driver's appends of new buckets (``store.writes.appends``) alike.  Doubles
keep every bit in the binary format, and come out of the text in their shortest form that reads back
exactly.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tiltframe.errors import StoreError
from tiltframe.model.streams import AttrType

Column = pa.Array | pa.ChunkedArray

#: ``LOAD DATA``'s escapes (``ESCAPED BY '\\'``), the backslash first.
_ESCAPES = (("\\", "\\\\"), ("\t", "\\t"), ("\n", "\\n"), ("\r", "\\r"), ("\x00", "\\0"))
#: How ``LOAD DATA`` reads the text :func:`load_tsv` writes (after the table's name).
LOAD_FORMAT = "CHARACTER SET utf8mb4 FIELDS TERMINATED BY '\\t' ESCAPED BY '\\\\' LINES TERMINATED BY '\\n'"
#: Marks where ``LOAD DATA``'s statement takes the file's name (``engine.rollup.staging_writers``).
FILE_MARK = "\x00file\x00"
#: The doubles MySQL/MariaDB cannot hold, as (words, Arrow predicate): ``LOAD DATA`` would store 0.
NON_FINITE = ("MySQL/MariaDB has no NaN or infinity", lambda a: pc.invert(pc.is_finite(a)))


def carries(types: Iterable[AttrType]) -> bool:
    """Whether both formats carry columns of ``types``: no binary (sketch) or list column."""
    return not any(t in (AttrType.BINARY, AttrType.ARRAY) for t in types)


def binary_rows(columns: Sequence[Column]) -> Iterator[memoryview]:
    """The rows in ``COPY``'s binary format (``FORMAT binary``; the stream starts with :data:`BINARY_HEADER`
    and ends with :data:`BINARY_TRAILER`), in pieces of :data:`CHUNK_ROWS` rows: each value as the server
    stores it (big-endian longs, ints and IEEE doubles bit for bit, UTF-8 text), so the server parses no
    text (a third less of its time than CSV for W1's rows).  The columns' Arrow types must be the table's:
    int64 for BIGINT, int32 for INTEGER, float64 for DOUBLE PRECISION, string for text, bool."""
    n = len(columns[0])
    for start in range(0, n, CHUNK_ROWS):
        part = [c.slice(start, CHUNK_ROWS) for c in columns]
        m = len(part[0])
        count = _fixed(np.full((m, 1), len(part), ">i2").view(np.uint8), None)
        rows = pc.binary_join_element_wise(count, *(_field(c) for c in part), _NOTHING)
        offsets = np.frombuffer(rows.buffers()[1], np.int64, m + 1, rows.offset * 8)
        yield memoryview(rows.buffers()[2])[offsets[0]:offsets[m]]


#: The binary format's signature, flags and header extension (none), and its end of data.
BINARY_HEADER = b"PGCOPY\n\xff\r\n\x00" + bytes(8)
BINARY_TRAILER = b"\xff\xff"
#: Rows encoded at a time, in either format (bounds the encoder's memory: about 80 bytes a row).
CHUNK_ROWS = 500_000
_NOTHING = pa.scalar(b"", pa.large_binary())
_WIDTHS = {pa.int64(): ">i8", pa.int32(): ">i4", pa.float64(): ">f8", pa.bool_(): "u1"}


def _field(column: Column) -> pa.LargeBinaryArray:
    """Each row's field: its length (-1 for NULL) as a big-endian int32, then its bytes."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    n = len(column)
    nulls = column.is_null().to_numpy(zero_copy_only=False) if column.null_count else None
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        data = pc.fill_null(column.cast(pa.large_binary()), b"")
        lengths = pc.binary_length(data).to_numpy().astype(">i4")
        if nulls is not None:
            lengths[nulls] = -1
        return pc.binary_join_element_wise(_fixed(lengths.view(np.uint8).reshape(n, 4), None), data, _NOTHING)
    code = _WIDTHS.get(column.type)
    if code is None:
        msg = f"no binary COPY of a {column.type} column"
        raise StoreError(msg)
    values = pc.fill_null(column, False if pa.types.is_boolean(column.type) else 0).to_numpy(zero_copy_only=False)
    width = np.dtype(code).itemsize
    cells = np.empty((n, 4 + width), np.uint8)
    cells[:, :4] = np.array([width], ">i4").view(np.uint8)
    cells[:, 4:] = values.astype(code).view(np.uint8).reshape(n, width)
    if nulls is not None:
        cells[nulls, :4] = 0xFF
    return _fixed(cells, nulls)


def _fixed(cells: np.ndarray, nulls: np.ndarray | None) -> pa.LargeBinaryArray:
    """Rows of ``cells`` (one row of bytes each) as binary values; a NULL's keeps its first four bytes."""
    n, width = cells.shape
    lengths = np.full(n, width, np.int64)
    if nulls is not None:
        lengths[nulls] = 4
        keep = np.ones(cells.shape, bool)
        keep[nulls, 4:] = False
        cells = cells[keep]
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return pa.LargeBinaryArray.from_buffers(pa.large_binary(), n, [None, pa.py_buffer(offsets),
                                                                   pa.py_buffer(np.ascontiguousarray(cells))])


def load_tsv(columns: Sequence[Column]) -> bytes:
    """The rows as ``LOAD DATA``'s text (:data:`LOAD_FORMAT`): fields by tab, rows by newline, NULL as
    ``\\N``, the escapes above in strings, booleans as 0/1.  A double the server cannot hold (NaN,
    infinite) is refused here: ``LOAD DATA LOCAL`` would store 0 with a warning."""
    words, bad = NON_FINITE
    fields = []
    for column in columns:
        kind = column.type
        if pa.types.is_floating(kind) and pc.any(bad(column)).as_py():
            msg = f"a double that is NaN or infinite ({words})"
            raise StoreError(msg)
        if pa.types.is_boolean(kind):
            column = column.cast(pa.int8())
        text = column.cast(pa.string())
        if pa.types.is_string(kind):
            for old, new in _ESCAPES:
                text = pc.replace_substring(text, old, new)
        fields.append(pc.fill_null(text, "\\N"))
    lines = pc.binary_join_element_wise(*fields, "\t").cast(pa.large_string())
    if isinstance(lines, pa.ChunkedArray):
        lines = lines.combine_chunks()
    whole = pa.LargeListArray.from_arrays(pa.array([0, len(lines)], pa.int64()), lines)
    return pc.binary_join(whole, pa.scalar("\n", pa.large_string()))[0].as_buffer().to_pybytes() + b"\n"


def file_literal(path: str) -> str:
    """``path`` as the quoted file name of a ``LOAD DATA`` statement."""
    return "'" + path.replace("\\", "\\\\").replace("'", "\\'") + "'"


def check_no_warnings(cursor: object, what: str) -> None:
    """Fail when the ``LOAD DATA`` just run on ``cursor`` left warnings: a value the server changed (a
    number out of range, a text too long) would be stored altered, a row it skipped (a duplicate key) lost."""
    if not getattr(cursor, "warning_count", 0):
        return
    cursor.execute("SHOW WARNINGS LIMIT 3")  # type: ignore[attr-defined]
    said = "; ".join(str(row[2]) for row in cursor.fetchall())  # type: ignore[attr-defined]
    msg = f"the server changed or skipped {what} while loading them ({said})"
    raise StoreError(msg)
