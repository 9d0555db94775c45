"""Rows as a server's bulk-load text: CSV for PostgreSQL's ``COPY ... FROM STDIN``, tab-separated text for
``LOAD DATA LOCAL INFILE`` on MariaDB and MySQL.

Both are made by Arrow's C++ kernels (no Python object per value), for the executors' staging
(``engine.staging_writers``) and the driver's appends of new buckets (``store.appends``) alike.  Doubles
come out in their shortest form that reads back exactly.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from tiltframe.errors import StoreError
from tiltframe.store.overflow import unholdable

Column = pa.Array | pa.ChunkedArray

#: ``LOAD DATA``'s escapes (``ESCAPED BY '\\'``), the backslash first.
_ESCAPES = (("\\", "\\\\"), ("\t", "\\t"), ("\n", "\\n"), ("\r", "\\r"), ("\x00", "\\0"))
#: How ``LOAD DATA`` reads the text :func:`load_tsv` writes (after the table's name).
LOAD_FORMAT = "CHARACTER SET utf8mb4 FIELDS TERMINATED BY '\\t' ESCAPED BY '\\\\' LINES TERMINATED BY '\\n'"


def copy_csv(columns: Sequence[Column]) -> memoryview:
    """The rows as ``COPY``'s CSV (``FORMAT csv``).  Strings are quoted, so an empty string stays one and
    an unquoted empty field is NULL."""
    import pyarrow.csv  # on first use: a Spark worker that only reads never needs it

    out = io.BytesIO()
    pyarrow.csv.write_csv(pa.table(list(columns), names=[f"c{i}" for i in range(len(columns))]), out,
                          pyarrow.csv.WriteOptions(include_header=False, quoting_style="needed"))
    return out.getbuffer()


def load_tsv(columns: Sequence[Column]) -> bytes:
    """The rows as ``LOAD DATA``'s text (:data:`LOAD_FORMAT`): fields by tab, rows by newline, NULL as
    ``\\N``, the escapes above in strings, booleans as 0/1.  A double the server cannot hold (NaN,
    infinite) is refused here: ``LOAD DATA LOCAL`` would store 0 with a warning."""
    words, bad = unholdable("mysql") or ("", None)
    fields = []
    for column in columns:
        kind = column.type
        if bad is not None and pa.types.is_floating(kind) and pc.any(bad(column)).as_py():
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
