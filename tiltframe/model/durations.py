"""Aggregation durations (granularities) and their names.

A granularity is a unit and a multiple.  The calendar units of Siddhi (``sec ... year``) are multiples of
one; fixed chains such as ``10 sec, 1 min`` (tilt frames) reuse the same type with other multiples.
Seconds, minutes and hours are fixed lengths of time; days, weeks, months and years follow the local
calendar of the aggregation's time zone.  Weeks are ISO weeks (from Monday), a level only when asked for:
they do not nest in months or years, so ``sec ... year`` leaves them out and months roll up from days.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from tiltframe.errors import DefinitionError, unknown
from tiltframe.timeutil.ranges import UNIT_WORDS
from tiltframe.timeutil.zones import resolve_zone


class Unit(enum.Enum):
    """The six durations of Siddhi and ISO weeks, finest first."""

    SECONDS = ("SECONDS", 1_000, "sec")
    MINUTES = ("MINUTES", 60_000, "min")
    HOURS = ("HOURS", 3_600_000, "hour")
    DAYS = ("DAYS", 86_400_000, "day")
    WEEKS = ("WEEKS", 604_800_000, "week")
    MONTHS = ("MONTHS", None, "month")
    YEARS = ("YEARS", None, "year")

    def __init__(self, table_suffix: str, fixed_ms: int | None, word: str) -> None:
        self.table_suffix = table_suffix
        # Nominal length only; days are 23 or 25 hours long across daylight-saving changes.
        self.fixed_ms = fixed_ms
        #: The unit as ``every`` takes it.
        self.word = word

    @property
    def rank(self) -> int:
        return list(Unit).index(self)

    @property
    def is_calendar(self) -> bool:
        """Days and coarser follow the local calendar of the time zone."""
        return self.rank >= Unit.DAYS.rank


#: Every spelling users write in ``every`` and ``per`` clauses (case-insensitive), the same words as
#: relative times in ``within`` take.
UNIT_NAMES: dict[str, Unit] = {word: Unit[f"{unit.upper()}S"] for word, unit in UNIT_WORDS.items()}


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


_PER_ZONE = re.compile(r"^(.*?)\s+in\s+(\S.*?)\s*$", re.IGNORECASE)


def parse_per(text: str) -> tuple[Granularity, str | None]:
    """A ``per`` value: ``"days"``, or ``"days in Asia/Kolkata"`` (the buckets of another zone, built on
    read); the duration and the zone named (None: the aggregation's)."""
    m = _PER_ZONE.match(text)
    if m is None:
        return Granularity.parse(text), None
    resolve_zone(m.group(2))
    return Granularity.parse(m.group(1)), m.group(2)


def unit_range(first: Unit, last: Unit) -> tuple[Granularity, ...]:
    """Every unit from ``first`` to ``last`` inclusive (``sec ... year``); weeks only when the range starts
    or ends with them (``sec ... week``), as they are an extra level, not a step to months."""
    if first.rank > last.rank:
        msg = (
            f"reversed duration range: '{first.name.lower()} ... {last.name.lower()}' "
            f"goes from coarser to finer; write '{last.name.lower()} ... {first.name.lower()}'"
        )
        raise DefinitionError(msg)
    return tuple(Granularity(u) for u in list(Unit)[first.rank : last.rank + 1]
                 if u is not Unit.WEEKS or Unit.WEEKS in (first, last))


def nests_in(finer: Granularity, coarser: Granularity) -> bool:
    """Whether each bucket of ``finer`` lies inside one bucket of ``coarser``, for levels that validate:
    they all do but weeks, which straddle months and years."""
    return finer.unit is not Unit.WEEKS or coarser.unit is Unit.WEEKS


def rollup_source(levels: tuple[Granularity, ...], i: int) -> int:
    """The level that level ``i`` (> 0) rolls up from: the nearest finer one whose buckets nest in it, so
    the level before a week level for months and years."""
    j = i - 1
    while j > 0 and not nests_in(levels[j], levels[i]):
        j -= 1
    return j


_LENGTH = re.compile(r"^\s*(\d+)\s*([A-Za-z]+)\s*$")
_MILLIS = frozenset(("ms", "millis", "millisec", "millisecs", "millisecond", "milliseconds"))


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


def ms_text(value: int) -> str:
    """An interval the way streaming SQL writes it: 500ms, 5s, 2m, 1h, 1d."""
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1_000)):
        if value % size == 0:
            return f"{value // size}{unit}"
    return f"{value}ms"
