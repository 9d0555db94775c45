"""The one registry of mergeable aggregate functions.

An aggregate is a partial state (one or more columns), a way to build each state column from events, a
merge rule for two partial states, and a finalize step.  Builds and merges are named *primitives*
(``sum``, ``min``, ``max``, ...): the Spark engine, the store's upsert and the retrieval merge each
translate a primitive once (``tiltframe.engine.partials``, ``tiltframe.store.sql``,
``tiltframe.retrieval.merge``), so the math of a function is written here and only here.

Finalize functions use only arithmetic operators and ``ops.div`` (float division), so the same function
finalizes pandas Series, Spark Columns and SQLAlchemy expressions.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from tiltframe.errors import DefinitionError, unknown
from tiltframe.spec.model import AttrType


class Build(enum.Enum):
    """How a state column is computed from the events of one bucket."""

    SUM = "sum"
    COUNT = "count"
    MIN = "min"
    MAX = "max"


class Merge(enum.Enum):
    """How two partial values of one state column combine (associative and commutative)."""

    SUM = "sum"
    MIN = "min"
    MAX = "max"


class Ops(Protocol):
    """What a finalize function may use beyond arithmetic operators; each target provides one."""

    def div(self, a: Any, b: Any) -> Any: ...


@dataclass(frozen=True, slots=True)
class State:
    """One stored column of a partial state: ``<alias>_<suffix>``."""

    suffix: str
    build: Build
    merge: Merge
    type: Callable[[AttrType | None], AttrType]


@dataclass(frozen=True, slots=True)
class AggregateFunction:
    name: str
    states: tuple[State, ...]
    finalize: Callable[[Mapping[str, Any], Ops], Any]
    result_type: Callable[[AttrType | None], AttrType]
    takes_arg: bool = True
    numeric_arg: bool = True
    aliases: tuple[str, ...] = ()
    doc: str = ""

    def check_arg(self, arg_type: AttrType | None, *, where: str) -> None:
        """Reject an argument the function cannot aggregate, naming the item."""
        if self.takes_arg and arg_type is None:
            msg = f"{self.name}() needs an argument in {where}"
            raise DefinitionError(msg)
        if self.numeric_arg and arg_type is not None and not arg_type.is_numeric:
            msg = f"{self.name}() needs a numeric argument in {where}, got {arg_type.value}"
            raise DefinitionError(msg)


def _sum_type(t: AttrType | None) -> AttrType:
    return AttrType.LONG if t is not None and t.is_integral else AttrType.DOUBLE


def _same_type(t: AttrType | None) -> AttrType:
    return t if t is not None else AttrType.DOUBLE


def _long(_: AttrType | None) -> AttrType:
    return AttrType.LONG


def _double(_: AttrType | None) -> AttrType:
    return AttrType.DOUBLE


def _only(suffix: str) -> Callable[[Mapping[str, Any], Ops], Any]:
    return lambda s, _ops: s[suffix]


_FUNCTIONS: dict[str, AggregateFunction] = {}
_ALIASES: dict[str, str] = {}


def register(fn: AggregateFunction) -> AggregateFunction:
    """Add a function (and its aliases) to the registry; names are case-insensitive."""
    for name in (fn.name, *fn.aliases):
        if name.lower() in _ALIASES:
            msg = f"aggregate function {name!r} is already registered"
            raise ValueError(msg)
        _ALIASES[name.lower()] = fn.name
    _FUNCTIONS[fn.name] = fn
    return fn


def get(name: str) -> AggregateFunction:
    """The function called ``name`` (or an alias of it); unknown names get a 'did you mean' error."""
    canonical = _ALIASES.get(name.lower())
    if canonical is None:
        raise DefinitionError(unknown("aggregate function", name, _ALIASES))
    return _FUNCTIONS[canonical]


def is_aggregate(name: str) -> bool:
    return name.lower() in _ALIASES


def names() -> tuple[str, ...]:
    return tuple(sorted(_FUNCTIONS))


register(
    AggregateFunction(
        "sum",
        (State("SUM", Build.SUM, Merge.SUM, _sum_type),),
        _only("SUM"),
        _sum_type,
        doc="Sum of the argument; long for int/long arguments, double otherwise.",
    )
)
register(
    AggregateFunction(
        "count",
        (State("COUNT", Build.COUNT, Merge.SUM, _long),),
        _only("COUNT"),
        _long,
        takes_arg=False,
        numeric_arg=False,
        doc="Number of events in the bucket.",
    )
)
register(
    AggregateFunction(
        "avg",
        (
            State("SUM", Build.SUM, Merge.SUM, _double),
            State("COUNT", Build.COUNT, Merge.SUM, _long),
        ),
        lambda s, ops: ops.div(s["SUM"], s["COUNT"]),
        _double,
        aliases=("mean",),
        doc="Arithmetic mean, stored as a sum and a count (Siddhi stores avg the same way).",
    )
)
register(
    AggregateFunction(
        "min",
        (State("MIN", Build.MIN, Merge.MIN, _same_type),),
        _only("MIN"),
        _same_type,
        doc="Smallest value of the argument.",
    )
)
register(
    AggregateFunction(
        "max",
        (State("MAX", Build.MAX, Merge.MAX, _same_type),),
        _only("MAX"),
        _same_type,
        doc="Largest value of the argument.",
    )
)
