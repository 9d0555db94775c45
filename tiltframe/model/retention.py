"""How long each duration of an aggregation keeps its buckets, and how often purging runs (seed 001).

Seed 001's rules: purging is on unless ``@purge(enable='false')`` says otherwise; it runs every 15 minutes
unless ``@purge(interval=...)`` names another interval; ``@retentionPeriod(sec='120 sec', min='24 hours',
...)``, on its own or nested in ``@purge``, sets the retention of some durations and the others keep the
seed's defaults; a retention below the seed's minimum is refused; ``all`` keeps a duration forever.

Retention is measured against the latest event time the aggregation has seen, not the wall clock (see
``docs/retention.md``): a bucket is purged once it starts more than its retention before that time.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import datetime, timedelta

from tiltframe.errors import DefinitionError
from tiltframe.model.aggregations import AggregationSpec
from tiltframe.model.durations import Granularity, Unit, parse_length, unit_named
from tiltframe.timeutil.zones import resolve_zone

DEFAULT_INTERVAL_MS = 15 * 60_000
_PERIOD = re.compile(r"^\s*(\d+)\s*([A-Za-z]+)\s*$")
#: Lengths to compare periods of different units with (a Gregorian month and year on average).
_NOMINAL_MS = {**{u: u.fixed_ms for u in Unit if u.fixed_ms}, Unit.MONTHS: 2_629_746_000, Unit.YEARS: 31_556_952_000}


@dataclass(frozen=True, slots=True)
class Period:
    """A span of time in one unit; days, months and years are counted on the local calendar."""

    count: int
    unit: Unit

    def __str__(self) -> str:
        name = self.unit.name.lower()
        return f"{self.count} {name[:-1] if self.count == 1 else name}"

    @property
    def nominal_ms(self) -> int:
        return self.count * _NOMINAL_MS[self.unit]

    def before(self, ms: int, zone: str) -> int:
        """The instant this period before ``ms``: the same local wall-clock time for days and longer."""
        if not self.unit.is_calendar:
            return ms - self.count * (self.unit.fixed_ms or 0)
        local = datetime.fromtimestamp(ms / 1000, resolve_zone(zone))
        if self.unit in (Unit.DAYS, Unit.WEEKS):
            earlier = local - timedelta(days=self.count * (7 if self.unit is Unit.WEEKS else 1))
        else:
            months = local.year * 12 + local.month - 1 - self.count * (12 if self.unit is Unit.YEARS else 1)
            year, month = divmod(months, 12)
            day = min(local.day, calendar.monthrange(year, month + 1)[1])
            earlier = local.replace(year=year, month=month + 1, day=day)
        return round(earlier.timestamp() * 1000)

    @classmethod
    def parse(cls, text: str, what: str) -> Period | None:
        """``'120 sec'``, ``'24 hours'``, ``'13 months'``; ``'all'`` (keep forever) gives None."""
        if text.strip().lower() == "all":
            return None
        match = _PERIOD.match(text)
        if match is None or int(match.group(1)) < 1:
            msg = f"{what} takes a period such as '120 sec', '24 hours' or '13 months', or 'all'; got '{text}'"
            raise DefinitionError(msg)
        try:
            unit = unit_named(match.group(2))
        except DefinitionError as exc:
            raise DefinitionError(f"{what}: {exc.message}") from None
        return cls(int(match.group(1)), unit)


#: Seed 001's minimum retention per duration (years have none).
MINIMUM: dict[Unit, Period] = {
    Unit.SECONDS: Period(120, Unit.SECONDS),
    Unit.MINUTES: Period(120, Unit.MINUTES),
    Unit.HOURS: Period(25, Unit.HOURS),
    Unit.DAYS: Period(32, Unit.DAYS),
    Unit.MONTHS: Period(13, Unit.MONTHS),
}
#: Seed 001's retention per duration when none is given (None keeps everything).
DEFAULT: dict[Unit, Period | None] = {
    Unit.SECONDS: Period(120, Unit.SECONDS),
    Unit.MINUTES: Period(24, Unit.HOURS),
    Unit.HOURS: Period(30, Unit.DAYS),
    Unit.DAYS: Period(1, Unit.YEARS),
    Unit.WEEKS: None,
    Unit.MONTHS: None,
    Unit.YEARS: None,
}


@dataclass(frozen=True, slots=True)
class Retention:
    """The purge policy of one aggregation: on or off, how often, and how long each unit is kept."""

    enabled: bool = True
    interval_ms: int = DEFAULT_INTERVAL_MS
    #: Per unit; a duration such as ``10 sec`` follows its unit.  None keeps that unit forever.
    periods: tuple[tuple[Unit, Period | None], ...] = tuple(DEFAULT.items())

    def period(self, g: Granularity) -> Period | None:
        return dict(self.periods)[g.unit]

    @classmethod
    def of(cls, agg: AggregationSpec) -> Retention:
        """The policy ``agg``'s annotations ask for; a DefinitionError (without position) when invalid."""
        purge = agg.purge
        given = (purge.retention if purge else ()) + (agg.retention or ())
        periods = dict(DEFAULT)
        named: set[Unit] = set()
        for key, value in given:
            if not key:
                msg = f"@retentionPeriod takes <duration>='<period>' pairs such as sec='120 sec'; got '{value}'"
                raise DefinitionError(msg)
            what = f"@retentionPeriod {key}"
            try:
                unit = unit_named(key)
            except DefinitionError as exc:
                raise DefinitionError(f"{what}: {exc.message}") from None
            if unit in named:
                raise DefinitionError(f"{what}: the retention of {unit.name.lower()} is given twice")
            if unit not in {g.unit for g in agg.granularities}:
                kept = ", ".join(str(g) for g in agg.granularities)
                msg = f"{what}: aggregation {agg.name} is not aggregated per {unit.name.lower()} (it keeps: {kept})"
                raise DefinitionError(msg)
            named.add(unit)
            period = Period.parse(value, what)
            least = MINIMUM.get(unit)
            if period is not None and least is not None and period.nominal_ms < least.nominal_ms:
                msg = f"{what}='{value}' is below the minimum retention of {unit.name.lower()}, {least}"
                raise DefinitionError(msg)
            periods[unit] = period
        interval = DEFAULT_INTERVAL_MS
        if purge is not None and purge.interval is not None:
            interval = parse_length(purge.interval, "@purge interval")
            if interval < 1:
                raise DefinitionError(f"@purge interval must be positive; got '{purge.interval}'")
        enabled = purge.enable if purge is not None else True
        return cls(enabled, interval, tuple(periods.items()))

    def purge_before(self, agg: AggregationSpec, latest_ms: int, zone: str) -> dict[Granularity, int]:
        """Per duration that does not keep everything: buckets starting before this instant are purged."""
        out = {}
        for g in agg.granularities:
            period = self.period(g)
            if period is not None:
                out[g] = period.before(latest_ms, zone)
        return out

    def describe(self, agg: AggregationSpec) -> str:
        if not self.enabled:
            return "off (@purge(enable='false'))"
        kept = ", ".join(f"{g} for {self.period(g) or 'ever'}" for g in agg.granularities)
        every = self.interval_ms / 60_000
        interval = f"{every:g} min" if every >= 1 else f"{self.interval_ms / 1000:g} s"
        return f"every {interval}, keeping {kept} behind the latest event time"
