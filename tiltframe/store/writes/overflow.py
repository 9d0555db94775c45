"""Values a state cannot hold, named: which aggregation, table, bucket, key and state, with the values.

Two checks, both ending in a :class:`StoreError` that leaves the batch unwritten:

- before writing, a double the store cannot keep (:func:`check_holdable`): MySQL/MariaDB has no NaN and no
  infinity, SQLite stores NaN as NULL (which a sum would then skip);
- after a merge failed (:func:`explain_overflow`): the database refused a sum of the stored and the new
  state, a long beyond 64 bits or a double beyond its range (``store.writes.upsert_merges`` makes SQLite refuse them
  too).  The batch's transaction has rolled back; the stored states of its keys are read again to find
  the row, since the database's own message names at most the column.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tiltframe.aggregates.layout import AGG_TIMESTAMP, SHARD_ID, AggregationLayout
from tiltframe.aggregates.states import LONG_MAX, LONG_MIN
from tiltframe.errors import StoreError
from tiltframe.model.streams import AttrType
from tiltframe.store.dialects.base import StoreDialect
from tiltframe.store.dialects.lookup import dialect_of
from tiltframe.store.reads.frames import fetch_all, typed_frame
from tiltframe.store.writes.upsert_merges import sum_states
from tiltframe.timeutil.parse import format_ts

_SHOWN_KEY_CHARS = 80


def check_holdable(dialect: StoreDialect, url: str, layout: AggregationLayout, batch_id: int,
                   levels: Sequence[tuple[sa.Table, pa.Table]]) -> None:
    """Refuse a batch whose rows hold a double ``dialect`` cannot store, naming the first one."""
    rule = dialect.unholdable
    if rule is None:
        return
    words, bad = rule
    doubles = [c for c, t in layout.stored_column_types.items() if t in (AttrType.DOUBLE, AttrType.FLOAT)]
    for table, data in levels:
        for column in doubles:
            mask = bad(data.column(column))
            if not pc.any(mask).as_py():
                continue
            first = data.filter(mask).slice(0, 1).to_pylist()[0]
            msg = (f"{_where(url, layout, batch_id, table.name, first)}, column {column} holds {first[column]}, "
                   f"which this store cannot hold ({words}); {_NOT_WRITTEN}")
            raise StoreError(msg)


def explain_overflow(conn: Connection, url: str, layout: AggregationLayout, batch_id: int,
                     levels: Sequence[tuple[sa.Table, pa.Table]]) -> StoreError | None:
    """After a failed merge: the error naming the first stored row whose sum with the batch's row leaves
    its state's range, or None when no sum does (the failure had another cause)."""
    sums = sum_states(layout)
    if not sums:
        return None
    keys = list(layout.stored_key_names)
    types = layout.stored_column_types
    nan_is_lost = dialect_of(conn).unholdable is not None
    for table, data in levels:
        if data.num_rows == 0:
            continue
        bounds = pc.min_max(data.column(AGG_TIMESTAMP)).as_py()
        ts = table.c[AGG_TIMESTAMP]
        query = sa.select(*(table.c[k] for k in keys), *(table.c[s] for s, _ in sums)).where(
            ts >= bounds["min"], ts <= bounds["max"])
        stored = typed_frame(fetch_all(conn, query), {c: types[c] for c in (*keys, *(s for s, _ in sums))})
        if stored.empty:
            continue
        new = data.select([*keys, *(s for s, _ in sums)]).to_pandas()
        both = new.merge(stored, on=keys, how="inner", suffixes=("", "_stored"))
        for state, t in sums:
            old, add = both[f"{state}_stored"], both[state]
            if t.is_integral:
                bad = _long_overflows(old, add)
                limit = f"beyond the 64-bit range of a long ({LONG_MIN} .. {LONG_MAX})"
            else:
                a, b = old.to_numpy("float64", na_value=np.nan), add.to_numpy("float64", na_value=np.nan)
                with np.errstate(over="ignore", invalid="ignore"):
                    total = a + b
                bad = np.isfinite(a) & np.isfinite(b) & ~np.isfinite(total)
                if nan_is_lost:
                    bad |= ~np.isnan(a) & ~np.isnan(b) & np.isnan(total)
                limit = "beyond the range of a double (about ±1.8e308) or not a number"
            if bad.any():
                first = both[bad].iloc[0]
                msg = (f"{_where(url, layout, batch_id, table.name, first)}, the sum {state} = "
                       f"{first[f'{state}_stored']} + {first[state]} (stored + this batch) is {limit}; "
                       f"{_NOT_WRITTEN}. A sum that large needs a double attribute (a new definition)")
                return StoreError(msg)
    return None


_NOT_WRITTEN = ("the batch was not written (nothing of it is stored) and the run stops here, since every later "
                "batch builds on it")


def _long_overflows(old: pd.Series, add: pd.Series) -> np.ndarray:
    """Rows where ``old + add`` leaves the long range (NULLs never overflow)."""
    present = (old.notna() & add.notna()).to_numpy()
    a = old.to_numpy("int64", na_value=0)
    b = add.to_numpy("int64", na_value=0)
    with np.errstate(over="ignore"):
        total = a + b  # wraps on overflow: the sign then differs from both operands'
    return present & (((a ^ total) & (b ^ total)) < 0)


def _where(url: str, layout: AggregationLayout, batch_id: int, table: str, row: Any) -> str:
    """``could not write batch N ... in table T, bucket B, key k='v'``."""
    bucket = int(row[AGG_TIMESTAMP])
    names = [k.name for k in layout.keys] + ([SHARD_ID] if layout.partitioned else [])
    key = ", ".join(f"{n}={_shown(row[n])}" for n in names) or "(no group by)"
    return (f"could not write batch {batch_id} of aggregation {layout.name} to {url}: in table {table}, bucket "
            f"{format_ts(bucket)} UTC ({bucket}), key {key}")


def _shown(value: Any) -> str:
    text = repr(value.item() if isinstance(value, np.generic) else value)
    return text if len(text) <= _SHOWN_KEY_CHARS else f"{text[:_SHOWN_KEY_CHARS]}… ({len(text)} characters)"
