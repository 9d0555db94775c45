"""Reads of one level table compiled once per shape and bound per call.

A dashboard asks the same few shapes again and again (one level, a time range, one or a few keys).  Building a
SQLAlchemy ``select`` and compiling it took longer than SQLite took to answer it, so each shape (the table, the
columns, whether the range has each bound, how many values each pinned key takes) is compiled once per store
and only its parameters change.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import sqlalchemy as sa
from sqlalchemy.engine import Compiled, Dialect

from tiltframe.aggregates.layout import AGG_TIMESTAMP
from tiltframe.store.schema import AGGREGATIONS_TABLE

#: Shapes kept per store; past it the oldest half is forgotten (shapes differ in their counts of key values).
KEPT_SHAPES = 256


@dataclass(frozen=True, slots=True)
class RangeRead:
    """One call's read: ``start <= AGG_TIMESTAMP < end`` (either bound may be absent) and, per pinned key,
    the values it may take."""

    table: sa.Table
    columns: tuple[str, ...]
    order: tuple[str, ...]
    start_ms: int | None
    end_ms: int | None
    keys: Mapping[str, Sequence[Any]]

    def shape(self) -> tuple[Any, ...]:
        return (self.table.name, self.columns, self.order, self.start_ms is None,
                self.end_ms is None, tuple((k, len(v)) for k, v in self.keys.items()))

    def params(self) -> dict[str, Any]:
        params: dict[str, Any] = {}
        if self.start_ms is not None:
            params["start_ms"] = self.start_ms
        if self.end_ms is not None:
            params["end_ms"] = self.end_ms
        for i, values in enumerate(self.keys.values()):
            params.update({f"key{i}_{j}": v for j, v in enumerate(values)})
        return params

    def statement(self) -> sa.Select[Any]:
        """The select of this shape, every value a named bound parameter."""
        c = self.table.c
        query = sa.select(*(c[name] for name in self.columns)).order_by(*(c[k] for k in self.order))
        if self.start_ms is not None:
            query = query.where(c[AGG_TIMESTAMP] >= sa.bindparam("start_ms"))
        if self.end_ms is not None:
            query = query.where(c[AGG_TIMESTAMP] < sa.bindparam("end_ms"))
        for i, (key, values) in enumerate(self.keys.items()):
            if not values:  # pinned to no value at all (k == "a" and k == "b")
                query = query.where(sa.false())
                continue
            query = query.where(c[key].in_([sa.bindparam(f"key{i}_{j}") for j in range(len(values))]))
        return query


@dataclass(frozen=True, slots=True)
class RegistrationRead:
    """The registry's row of one aggregation, read before every other read of it."""

    def shape(self) -> tuple[Any, ...]:
        return ("registration",)

    def statement(self) -> sa.Select[Any]:
        a = AGGREGATIONS_TABLE.c
        return sa.select(a.name, a.spec_hash, a.zone, a.granularities, a.created_at).where(
            a.name == sa.bindparam("name"))


class Plan(Protocol):
    """A read whose statement depends on its shape only, its values being named bound parameters."""

    def shape(self) -> tuple[Any, ...]: ...

    def statement(self) -> sa.Select[Any]: ...


class ReadPlans:
    """The compiled statements of one store's reads, by shape (range reads, ``store.reads.merged_reads``)."""

    def __init__(self, dialect: Dialect) -> None:
        self._dialect = dialect
        self._compiled: dict[tuple[Any, ...], Compiled] = {}

    def compiled(self, read: Plan) -> Compiled:
        shape = read.shape()
        found = self._compiled.get(shape)
        if found is None:
            if len(self._compiled) >= KEPT_SHAPES:
                for old in list(self._compiled)[: KEPT_SHAPES // 2]:
                    self._compiled.pop(old, None)
            found = self._compiled[shape] = read.statement().compile(dialect=self._dialect)
        return found
