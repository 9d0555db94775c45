"""Aggregation durations (granularities) and their names.

A granularity is a unit and a multiple.  The calendar units of Siddhi (``sec ... year``) are multiples of
one; fixed chains such as ``10 sec, 1 min`` (tilt frames) reuse the same type with other multiples.
Seconds, minutes and hours are fixed lengths of time; days, months and years follow the local calendar of
the aggregation's time zone.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from tiltframe.errors import DefinitionError, unknown


class Unit(enum.Enum):
    """The six durations of Siddhi, finest first."""

    SECONDS = ("SECONDS", 1_000)
    MINUTES = ("MINUTES", 60_000)
    HOURS = ("HOURS", 3_600_000)
    DAYS = ("DAYS", 86_400_000)
    MONTHS = ("MONTHS", None)
    YEARS = ("YEARS", None)

    def __init__(self, table_suffix: str, fixed_ms: int | None) -> None:
        self.table_suffix = table_suffix
        # Nominal length only; days are 23 or 25 hours long across daylight-saving changes.
        self.fixed_ms = fixed_ms

    @property
    def rank(self) -> int:
        return list(Unit).index(self)

    @property
    def is_calendar(self) -> bool:
        """Days and coarser follow the local calendar of the time zone."""
        return self.rank >= Unit.DAYS.rank


#: Every spelling users write in ``every`` and ``per`` clauses (case-insensitive).
UNIT_NAMES: dict[str, Unit] = {
    **dict.fromkeys(("sec", "secs", "second", "seconds"), Unit.SECONDS),
    **dict.fromkeys(("min", "mins", "minute", "minutes"), Unit.MINUTES),
    **dict.fromkeys(("hour", "hours"), Unit.HOURS),
    **dict.fromkeys(("day", "days"), Unit.DAYS),
    **dict.fromkeys(("month", "months"), Unit.MONTHS),
    **dict.fromkeys(("year", "years"), Unit.YEARS),
}


def unit_named(word: str, *, line: int | None = None, column: int | None = None) -> Unit:
    """The unit a user-written name stands for; unknown names get a 'did you mean' error."""
    found = UNIT_NAMES.get(word.strip().lower())
    if found is None:
        raise DefinitionError(unknown("duration", word, UNIT_NAMES), line=line, column=column)
    return found


@dataclass(frozen=True, slots=True)
class Granularity:
    """One level of a rollup: ``multiple`` x ``unit`` (``Granularity(Unit.DAYS)`` is one day)."""

    unit: Unit
    multiple: int = 1

    def __post_init__(self) -> None:
        if self.multiple < 1:
            msg = f"a duration multiple must be a positive integer, got {self.multiple}"
            raise DefinitionError(msg)

    @property
    def table_suffix(self) -> str:
        """``SECONDS`` for one second (Siddhi's names), ``10_SECONDS`` for a ten-second level."""
        return self.unit.table_suffix if self.multiple == 1 else f"{self.multiple}_{self.unit.table_suffix}"

    @property
    def sort_key(self) -> tuple[int, int]:
        return (self.unit.rank, self.multiple)

    def __str__(self) -> str:
        name = self.unit.name.lower()
        return name if self.multiple == 1 else f"{self.multiple} {name}"

    @classmethod
    def parse(cls, text: str) -> Granularity:
        """``"days"``, ``"DAYS"``, ``"day"`` or ``"10 sec"`` as written in a ``per`` clause."""
        parts = text.strip().split()
        if len(parts) == 2 and parts[0].isdigit():
            return cls(unit_named(parts[1]), int(parts[0]))
        if len(parts) == 1 and "_" in parts[0] and parts[0].split("_", 1)[0].isdigit():
            count, name = parts[0].split("_", 1)
            return cls(unit_named(name), int(count))
        return cls(unit_named(text))


def unit_range(first: Unit, last: Unit) -> tuple[Granularity, ...]:
    """Every unit from ``first`` to ``last`` inclusive (``sec ... year``)."""
    if first.rank > last.rank:
        msg = (
            f"reversed duration range: '{first.name.lower()} ... {last.name.lower()}' "
            f"goes from coarser to finer; write '{last.name.lower()} ... {first.name.lower()}'"
        )
        raise DefinitionError(msg)
    return tuple(Granularity(u) for u in list(Unit)[first.rank : last.rank + 1])


_LENGTH = re.compile(r"^\s*(\d+)\s*([A-Za-z]+)\s*$")
_MILLIS = frozenset(("ms", "millis", "millisecond", "milliseconds"))


def parse_length(text: str, what: str) -> int:
    """A fixed length of time such as ``'10 min'`` or ``'500 ms'``, in milliseconds.

    Months and years have no fixed length, so they are refused rather than guessed.
    """
    match = _LENGTH.match(text)
    if match is None:
        msg = f"{what} takes a length such as '10 min', '30 sec' or '500 ms'; got '{text}'"
        raise DefinitionError(msg)
    count, word = int(match.group(1)), match.group(2).lower()
    if word in _MILLIS:
        return count
    try:
        unit = unit_named(word)
    except DefinitionError as exc:
        raise DefinitionError(f"{what}: {exc.message}") from None
    if unit.fixed_ms is None:
        msg = f"{what} must be a fixed length (ms, sec, min, hour or day), not {unit.name.lower()}; got '{text}'"
        raise DefinitionError(msg)
    return count * unit.fixed_ms
