"""Query results as typed DataFrames: the raw DBAPI cursor (much cheaper per row than SQLAlchemy's Row) and
one structured NumPy array per result."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pyarrow as pa

from tiltframe.model.streams import AttrType

if TYPE_CHECKING:  # only for types: a Spark worker that merges states imports this module, not SQLAlchemy
    import sqlalchemy as sa
    from sqlalchemy.engine import Connection

#: The dtype pandas itself gives a column of Python strings (``str`` in pandas 3, ``object`` before).
STR_DTYPE = pd.Series(["x"]).dtype
_STR_IS_OBJECT = np.dtype(object) == STR_DTYPE
ARROW_TYPES = {
    AttrType.STRING: pa.string(), AttrType.INT: pa.int64(), AttrType.LONG: pa.int64(),
    AttrType.FLOAT: pa.float64(), AttrType.DOUBLE: pa.float64(), AttrType.BOOL: pa.bool_(),
    AttrType.BINARY: pa.binary(),
}
NUMPY_TYPES = {AttrType.STRING: object, AttrType.INT: "i8", AttrType.LONG: "i8", AttrType.FLOAT: "f8",
               AttrType.DOUBLE: "f8", AttrType.BOOL: "?", AttrType.BINARY: object}


def fetch_all(conn: Connection, query: sa.Select[Any]) -> list[Any]:
    """Rows of ``query`` through the raw DBAPI cursor."""
    compiled = query.compile(dialect=conn.dialect, compile_kwargs={"render_postcompile": True})  # IN lists
    return fetch_compiled(conn, compiled, compiled.construct_params())


def fetch_compiled(conn: Connection, compiled: sa.engine.Compiled, params: dict[str, Any]) -> list[Any]:
    """Rows of a statement compiled once (:mod:`tiltframe.store.reads.read_plans`) with this call's ``params``."""
    args: Any = [params[p] for p in compiled.positiontup or ()] if compiled.positional else params
    cursor = conn.connection.cursor()
    try:
        cursor.execute(compiled.string, args)
        return list(cursor.fetchall())  # PyMySQL gives a tuple, which NumPy would read as one record
    finally:
        cursor.close()


def typed_frame(rows: Sequence[Sequence[Any]], types: dict[str, AttrType]) -> pd.DataFrame:
    """A DataFrame with one properly typed column per entry of ``types``.

    Rows go through one structured NumPy array (C speed, no per-column Python loops); only when a
    column holds NULL does it fall back to per-column building (``Int64``/``boolean`` for those columns).
    Columns go to the frame as arrays: a Series each would cost more than the rows of a small answer.
    """
    try:
        packed = np.array(rows, dtype=[(n, NUMPY_TYPES[t]) for n, t in types.items()])
        columns: dict[str, Any] = {n: packed[n] for n in types}
    except (TypeError, ValueError):
        columns = dict(zip(types, zip(*rows, strict=True), strict=True))
    out: dict[str, Any] = {}
    for name, t in types.items():
        values = columns[name]
        if t is AttrType.STRING:
            out[name] = np.asarray(values, dtype=object) if _STR_IS_OBJECT else pd.array(values, dtype=STR_DTYPE)
        elif t is AttrType.BINARY:  # drivers give bytes, memoryview or bytearray
            out[name] = np.asarray([None if v is None else bytes(v) for v in values], dtype=object)
        elif t.is_numeric and not t.is_integral:
            out[name] = np.asarray(values, dtype="float64")  # NULL as NaN
        elif isinstance(values, np.ndarray) or None not in values:
            out[name] = np.asarray(values, dtype=NUMPY_TYPES[t])
        else:
            out[name] = pd.array(values, dtype="Int64" if t.is_integral else "boolean")
    return pd.DataFrame(out, copy=False) if out else pd.DataFrame(index=pd.RangeIndex(len(rows)))
