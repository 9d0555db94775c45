"""The registry's primitives in SQL (SQLAlchemy expressions every store's dialect compiles): how a stored
partial value and a new one merge in an upsert (``PAIR_MERGE``), how a group of partial rows merges in one
statement (``GROUP_MERGE``: merged reads, the views of final values), and ``SqlOps`` for the finalize and
combine functions.  States are never built in SQL: Spark and pandas build them (``NOT_BUILT``).
``NOT_MERGED`` names what SQL leaves to another part (``tests/aggregates/test_targets.py`` holds every
target to every primitive).

Written with CASE and COALESCE only, so NULLs (an empty min, say) never win and every dialect agrees.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sqlalchemy as sa

from tiltframe.aggregates.states import Build, Merge


class SqlOps:
    """The ``Ops`` of finalize and combine functions for SQL expressions: division in floating point,
    NULL for 0; sketches cannot be read in SQL (``apply``)."""

    @staticmethod
    def div(a: Any, b: Any) -> Any:  # an inline 0: the merge statements bind row values only
        return sa.cast(a, sa.Double()) / sa.func.nullif(b, sa.literal_column("0"))

    @staticmethod
    def where(cond: Any, a: Any, b: Any) -> Any:
        return sa.case((cond, a), else_=b)

    @staticmethod
    def isnull(a: Any) -> Any:
        return a.is_(None)

    @staticmethod
    def sqrt(a: Any) -> Any:
        return sa.func.sqrt(a)

    @staticmethod
    def coalesce(a: Any, value: int) -> Any:  # inline, as in div
        return sa.func.coalesce(a, sa.literal_column(str(int(value))))

    @staticmethod
    def apply(fn: Any, a: Any) -> Any:
        raise NotImplementedError


def _better(new_wins: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """The stored value, or the new one where it is better; a NULL never wins."""
    return lambda old, new: sa.case((new.is_(None), old), (sa.or_(old.is_(None), new_wins(old, new)), new),
                                    else_=old)


def _union(old: Any, new: Any) -> Any:
    """A sketch's union is made before the upsert (``store/writes/upserts.py``, with the sketch library): the new
    value is the union of both."""
    return sa.func.coalesce(new, old)


#: Each merge primitive as ``SET column = f(stored, new)`` of an upsert.
PAIR_MERGE: dict[Merge, Callable[[Any, Any], Any]] = {
    Merge.SUM: lambda old, new: sa.func.coalesce(old + new, old, new),
    Merge.MIN: _better(lambda old, new: new < old),
    Merge.MAX: _better(lambda old, new: new > old),
    Merge.HLL: _union,
    Merge.KLL: _union,
    Merge.DDS: _union,
    Merge.HDR: _union,
}
#: Each merge primitive SQL merges over a group of rows (the sketches' binaries are read and merged by their
#: library: ``aggregates/sketches/stored.py``).
GROUP_MERGE: dict[Merge, Callable[[Any], Any]] = {Merge.SUM: sa.func.sum, Merge.MIN: sa.func.min,
                                                  Merge.MAX: sa.func.max}

NOT_BUILT: dict[Build, str] = {b: "states are built in Spark (or pandas) and only merged in SQL" for b in Build}
NOT_MERGED: dict[Merge, str] = {
    Merge.COMBINE: "a function's states fold together through its combine over SqlOps (store/writes/upsert_merges.py)",
    Merge.EARLIEST: "one event's fields merge together: the earlier row by (ts, batch, seq) (upsert_merges.py)",
    Merge.LATEST: "one event's fields merge together: the later row by (ts, batch, seq) (upsert_merges.py)",
    Merge.CONCAT: "lists (group_array) are kept by continuous queries only, never stored",
}
