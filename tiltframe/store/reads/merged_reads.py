"""Partial rows merged in the database's GROUP BY (``Store.read_merged``), for ``tf.select``.

A SELECT over a pre-aggregated table merges the partial rows of its finest level by the query's keys.  When
every state merges by SUM, MIN or MAX without a combine function, the database can do that merge itself and
send one row per group instead of every partial row: ``SUM``, ``MIN``, ``MAX`` per state and
``MAX(AGG_EVENT_TIMESTAMP)``, compiled once per shape (``store.reads.read_plans``).  The rows must be the ones
``retrieval.merge.merge_rows`` makes, so what SQL would do differently is handled here:

- NULL: SQL's SUM skips NULLs and is NULL without a value, as ``merge_rows`` is.  PostgreSQL stores a double's
  NaN, which pandas skips and SQL would not: it is made NULL first (the other stores hold no NaN).
- A long sum beyond 64 bits: pandas wraps around, SQLite fails ("integer overflow"), PostgreSQL and MySQL
  give a wider number.  The read then answers None, and the caller merges the partial rows in pandas as
  before, so the answer stays that of the pandas path.
- A double sum over an infinity or near the double range depends on the order of addition (inf + -inf),
  and MariaDB's ``SUM`` of doubles gives 0 on overflow: None when a group's ``MAX(ABS(x)) * COUNT(*)``
  reaches 2**1000 or is not finite.  Finite sums may differ in their last bits (the order of addition).
- Text: SQLite compares bytes; PostgreSQL's deterministic collations take only equal bytes as equal, but
  order by locale, so ordering comparisons use ``COLLATE "C"`` (code points, as Python); MySQL/MariaDB key
  columns made by tiltframe are binary NO PAD (``store.dialects.mysql``).  A table whose text keys have another
  collation (made by an earlier tiltframe: ``IBM`` = ``ibm``) is not merged here (None).
"""

from __future__ import annotations

import operator
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tiltframe.aggregates.layout import AGG_EVENT_TIMESTAMP, AGG_TIMESTAMP, AggregationLayout, KeyColumn, StateColumn
from tiltframe.aggregates.states import Merge
from tiltframe.aggregates.targets.in_sql import GROUP_MERGE
from tiltframe.model.streams import AttrType
from tiltframe.store.base import KeyTerm
from tiltframe.store.dialects.base import StoreDialect
from tiltframe.store.reads.frames import fetch_compiled, typed_frame
from tiltframe.store.reads.read_plans import ReadPlans
from tiltframe.store.writes.overflow import LONG_MAX, LONG_MIN

#: The comparisons a ``KeyTerm`` may make, and those that order (which need a code-point collation).
COMPARISONS: dict[str, Callable[[Any, Any], Any]] = {
    "==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
}
ORDERING = frozenset({"<", "<=", ">", ">="})
#: Key types a store groups and compares exactly (a double key may be NaN or -0.0).
EXACT_KEYS = frozenset({AttrType.STRING, AttrType.INT, AttrType.LONG, AttrType.BOOL})
#: MySQL/MariaDB collations that compare text byte for byte, trailing spaces included (``store.dialects.mysql``).
BINARY_NO_PAD = frozenset({"utf8mb4_nopad_bin", "utf8mb4_0900_bin"})
#: A double sum of n terms of magnitude at most m stays below n * m in any order of addition: below this,
#: no order overflows (the largest double is about 2**1024).
_SAFE_SUM = 2.0**1000
_MAX_ABS, _ROWS = "AGG_MAX_ABS_", "AGG_ROWS"
_ZERO = sa.literal_column("0")


def merges_in_sql(states: Iterable[StateColumn]) -> bool:
    """Whether every state of ``states`` merges by SUM, MIN or MAX of a number, without a combine function."""
    return all(s.merge in GROUP_MERGE and s.function.combine is None and s.type.is_numeric for s in states)


@dataclass(frozen=True, slots=True)
class MergedRead:
    """One call's merged read of a level table: the rows of ``[start_ms, end_ms)`` where every term of
    ``where`` holds, grouped by the bucket (with ``by_interval``) and the keys ``by``."""

    table: sa.Table
    dialect: StoreDialect
    keys: tuple[KeyColumn, ...]
    by: tuple[str, ...]
    states: tuple[StateColumn, ...]
    by_interval: bool
    start_ms: int | None
    end_ms: int | None
    where: tuple[KeyTerm, ...]

    @classmethod
    def of(cls, table: sa.Table, dialect: StoreDialect, layout: AggregationLayout, by: Sequence[str],
           states: Sequence[str], start_ms: int | None, end_ms: int | None, by_interval: bool,
           where: Sequence[KeyTerm]) -> MergedRead:
        """The read of ``layout``'s ``table``, refusing what SQL cannot merge or compare exactly."""
        columns = {s.name: s for s in layout.states}
        chosen = tuple(columns[s] for s in states)
        if not merges_in_sql(chosen):
            msg = f"states {', '.join(states)} of {layout.name} do not all merge by SUM, MIN or MAX"
            raise ValueError(msg)
        types = {k.name: k.type for k in layout.keys}
        if any(types[k] not in EXACT_KEYS for k in by):
            msg = f"keys {', '.join(by)} of {layout.name} are not all of a type grouped exactly"
            raise ValueError(msg)
        types[AGG_TIMESTAMP] = AttrType.LONG
        for term in where:
            if term.op not in COMPARISONS or types.get(term.column) not in EXACT_KEYS:
                msg = f"cannot compare {term.column} {term.op} in SQL exactly: {layout.name} has no such key"
                raise ValueError(msg)
        return cls(table, dialect, layout.keys, tuple(by), chosen, by_interval, start_ms, end_ms, tuple(where))

    def shape(self) -> tuple[Any, ...]:
        return (MergedRead, self.table.name, self.dialect, tuple((k.name, k.type) for k in self.keys), self.by,
                tuple((s.name, s.merge, s.type) for s in self.states), self.by_interval, self.start_ms is None,
                self.end_ms is None, tuple((t.column, t.op) for t in self.where))

    def params(self) -> dict[str, Any]:
        params: dict[str, Any] = {f"term{i}": t.value for i, t in enumerate(self.where)}
        if self.start_ms is not None:
            params["start_ms"] = self.start_ms
        if self.end_ms is not None:
            params["end_ms"] = self.end_ms
        return params

    @property
    def guarded(self) -> tuple[int, ...]:
        """Positions in ``states`` of the double sums, whose terms are bounded (``_SAFE_SUM``)."""
        return tuple(i for i, s in enumerate(self.states) if s.merge is Merge.SUM and not s.type.is_integral)

    @property
    def text(self) -> tuple[str, ...]:
        """The text key columns this read groups or compares."""
        used = {*self.by, *(t.column for t in self.where)}
        return tuple(k.name for k in self.keys if k.type is AttrType.STRING and k.name in used)

    def statement(self) -> sa.Select[Any]:
        """The GROUP BY of this shape, every value a named bound parameter."""
        c = self.table.c
        groups = [*([c[AGG_TIMESTAMP]] if self.by_interval else []), *(c[k] for k in self.by)]
        columns: list[Any] = [*groups, sa.func.max(c[AGG_EVENT_TIMESTAMP]).label(AGG_EVENT_TIMESTAMP)]
        d = self.dialect
        for s in self.states:
            merged = GROUP_MERGE[s.merge](c[s.name] if s.type.is_integral else d.stored_double(c[s.name]))
            if s.merge is Merge.SUM and s.type.is_integral:
                merged = d.long_sum(merged)
            columns.append(merged.label(s.name))
        for i in self.guarded:
            s = self.states[i]
            columns.append(sa.func.max(sa.func.abs(d.stored_double(c[s.name]))).label(f"{_MAX_ABS}{i}"))
        if self.guarded:
            columns.append(sa.func.count().label(_ROWS))
        query = sa.select(*columns).select_from(self.table)
        if self.start_ms is not None:
            query = query.where(c[AGG_TIMESTAMP] >= sa.bindparam("start_ms"))
        if self.end_ms is not None:
            query = query.where(c[AGG_TIMESTAMP] < sa.bindparam("end_ms"))
        for i, term in enumerate(self.where):
            column: Any = c[term.column]
            if term.op in ORDERING and term.column in self.text:
                column = d.ordered_text(column)
            query = query.where(COMPARISONS[term.op](column, sa.bindparam(f"term{i}")))
        # Without groups SQL makes one row even of no rows; merge_rows makes none.
        return query.group_by(*groups) if groups else query.having(sa.func.count() > _ZERO)

    def types(self) -> dict[str, AttrType]:
        """The columns the statement selects, in order, with their types."""
        keys = {k.name: k.type for k in self.keys}
        types = {**({AGG_TIMESTAMP: AttrType.LONG} if self.by_interval else {}), **{k: keys[k] for k in self.by},
                 AGG_EVENT_TIMESTAMP: AttrType.LONG, **{s.name: s.type for s in self.states}}
        types.update({f"{_MAX_ABS}{i}": AttrType.DOUBLE for i in self.guarded})
        return {**types, _ROWS: AttrType.LONG} if self.guarded else types

    def frame(self, rows: list[Any]) -> pd.DataFrame | None:
        """The merged rows as ``merge_rows`` gives them; None when a sum leaves what it can be exactly."""
        types = self.types()
        if self.dialect.decimal_long_sums:
            sums = {s.name for s in self.states if s.merge is Merge.SUM and s.type.is_integral}
            rows = _long_sums(rows, [i for i, name in enumerate(types) if name in sums])
            if rows is None:
                return None
        frame = typed_frame(rows, types)
        if self.guarded:
            count = frame[_ROWS].to_numpy(dtype="float64")
            for i in self.guarded:
                bound = frame[f"{_MAX_ABS}{i}"].to_numpy(dtype="float64")
                with np.errstate(invalid="ignore", over="ignore"):
                    safe = np.isnan(bound) | (bound * count < _SAFE_SUM)  # NaN: no value in the group
                if not safe.all():
                    return None
            frame = frame.drop(columns=[_ROWS, *(f"{_MAX_ABS}{i}" for i in self.guarded)])
        if not self.by_interval:
            frame.insert(0, AGG_TIMESTAMP, np.zeros(len(frame), dtype="int64"))
        return frame

    def empty(self) -> pd.DataFrame:
        frame = self.frame([])
        assert frame is not None
        return frame


class MergedReads:
    """One store's merged reads: their compiled statements and, on MySQL/MariaDB, which tables' text
    columns compare byte for byte."""

    def __init__(self, plans: ReadPlans) -> None:
        self._plans = plans
        self._binary_text: dict[str, frozenset[str]] = {}

    def forget(self, table: str) -> None:
        """Collations seen for ``table`` may be stale (it may have been made anew)."""
        self._binary_text.pop(table, None)

    def run(self, conn: Connection, read: MergedRead) -> pd.DataFrame | None:
        """The rows of ``read`` on ``conn`` (whose table exists), or None when they cannot be exact."""
        if read.dialect.collated_text and read.text and not set(read.text) <= self._binary(conn, read.table.name):
            return None
        return read.frame(fetch_compiled(conn, self._plans.compiled(read), read.params()))

    def _binary(self, conn: Connection, table: str) -> frozenset[str]:
        found = self._binary_text.get(table)
        if found is None:
            found = self._binary_text[table] = frozenset(
                c["name"] for c in sa.inspect(conn).get_columns(table)
                if getattr(c["type"], "collation", None) in BINARY_NO_PAD)
        return found


def out_of_range(error: BaseException | None) -> bool:
    """Whether a failed merged read was a sum the database could not hold (then merged in pandas instead):
    SQLite's "integer overflow", PostgreSQL's SQLSTATE 22003, MySQL's error 1690."""
    cause = getattr(error, "orig", None) or error
    if isinstance(cause, sqlite3.Error):
        return "integer overflow" in str(cause)
    if getattr(cause, "sqlstate", None) == "22003":
        return True
    args = getattr(cause, "args", ())
    return type(cause).__module__.startswith("pymysql") and bool(args) and args[0] == 1690


def _long_sums(rows: list[Any], positions: Sequence[int]) -> list[Any] | None:
    """MySQL's long sums (DECIMAL) as ints, or None when one leaves the 64-bit range."""
    if not rows or not positions:
        return rows
    columns = list(zip(*rows, strict=True))
    for i in positions:
        values = [v for v in columns[i] if v is not None]
        if values and (min(values) < LONG_MIN or max(values) > LONG_MAX):
            return None
        columns[i] = tuple(None if v is None else int(v) for v in columns[i])
    return list(zip(*columns, strict=True))

