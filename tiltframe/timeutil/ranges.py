"""``within`` ranges to ``[start, end)`` in epoch milliseconds, read in the aggregation's zone.

One value names a period: a pattern (``"2018-01-** **:**:**"``), a date (that day), a date-time (that
second), ``today`` / ``yesterday`` / ``tomorrow``, ``this <unit>`` (the period holding now), ``last N
<units>`` (the N units up to now), or an ISO-8601 interval (``2024-01-01/2024-02-01``,
``2024-01-01/P1M``, ``P7D/2024-01-08``).  Two values are a start and an end, each a time, ``now``,
``today`` (its midnight), ``yesterday``, ``tomorrow``, and any of them moved by ``+``/``- N <unit>``
(``now - 7 days``).  Times, patterns and days without an offset are in the zone given (docs/time.md).

Days, weeks, months and years move on the local calendar (``now - 1 day`` is the same local time
yesterday, 23 or 25 hours away across a daylight-saving change); seconds, minutes and hours are fixed
lengths.  A local time a daylight-saving change skips reads as Python's ``zoneinfo`` reads it (with the
offset before the change); a repeated one as its first occurrence.
"""

from __future__ import annotations

import calendar
import re
import time
from datetime import date, datetime, timedelta, tzinfo

from tiltframe.errors import QueryError
from tiltframe.timeutil.parse import TIMESTAMP, epoch_ms, local_time, offset_zone, parse_timestamp
from tiltframe.timeutil.zones import resolve_zone

#: Every spelling of a unit (case-insensitive), by the unit it names: relative times here, ``every`` and
#: ``per`` (``model.durations.UNIT_NAMES``).
UNIT_WORDS: dict[str, str] = {
    **dict.fromkeys(("sec", "secs", "second", "seconds"), "second"),
    **dict.fromkeys(("min", "mins", "minute", "minutes"), "minute"),
    **dict.fromkeys(("h", "hr", "hrs", "hour", "hours"), "hour"),
    **dict.fromkeys(("day", "days"), "day"),
    **dict.fromkeys(("week", "weeks"), "week"),
    **dict.fromkeys(("month", "months"), "month"),
    **dict.fromkeys(("year", "years"), "year"),
}
_FIXED_MS = {"second": 1_000, "minute": 60_000, "hour": 3_600_000}
_DAYS = {"today": 0, "yesterday": -1, "tomorrow": 1}

_PATTERN = re.compile(
    r"^\s*(\d{4})-(\d{2}|\*\*)-(\d{2}|\*\*) (\d{2}|\*\*):(\d{2}|\*\*):(\d{2}|\*\*)"
    r"(?:\s+([+-])(\d{2}):?(\d{2}))?\s*$"
)
_RELATIVE = re.compile(r"^(now|today|yesterday|tomorrow)((?:\s*[+-]\s*\d+\s*[a-z]+)*)$", re.IGNORECASE)
_STEP = re.compile(r"([+-])\s*(\d+)\s*([a-z]+)", re.IGNORECASE)
_LAST = re.compile(r"^(?:last|past)\s+(?:(\d+)\s*)?([a-z]+)$", re.IGNORECASE)
_THIS = re.compile(r"^this\s+([a-z]+)$", re.IGNORECASE)
_ISO_DURATION = re.compile(
    r"^P(?!$)(?:(\d+)Y)?(?:(\d+)M)?(?:(\d+)W)?(?:(\d+)D)?(?:T(?=\d)(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)S)?)?$"
)
_ISO_UNITS = ("year", "month", "week", "day", "hour", "minute", "second")

FORMS = (
    "a pattern such as \"2018-01-** **:**:**\", a date or date-time, today, yesterday, this <unit>, "
    "last N <units>, or an ISO interval such as 2024-01-01/P1M"
)


def _now() -> int:
    """The clock, rounded up to the whole second: the same buckets start before it as before the exact
    instant (they start on whole seconds), and a range that ends now ends on a second's boundary."""
    return -(-time.time_ns() // 1_000_000_000) * 1000


def _unit(word: str, text: str) -> str:
    found = UNIT_WORDS.get(word.lower())
    if found is None:
        msg = f"within {text!r}: unknown unit '{word}' (use seconds, minutes, hours, days, weeks, months or years)"
        raise QueryError(msg)
    return found


def shift(ms: int, n: int, unit: str, zone: tzinfo) -> int:
    """``ms`` moved by ``n`` units: fixed lengths, or the local calendar for days and coarser."""
    if unit in _FIXED_MS:
        return ms + n * _FIXED_MS[unit]
    local = local_time(ms, zone)
    if unit in ("day", "week"):
        moved = local + timedelta(days=n * (7 if unit == "week" else 1))  # wall-clock arithmetic
    else:
        months = local.year * 12 + local.month - 1 + n * (12 if unit == "year" else 1)
        year, month = divmod(months, 12)
        if not 1 <= year <= 9999:
            raise QueryError(f"{n:+d} {unit}s from {local.isoformat()} is out of the calendar's range")
        moved = local.replace(year=year, month=month + 1, day=min(local.day, calendar.monthrange(year, month + 1)[1]))
    return epoch_ms(moved.replace(tzinfo=zone))


def _floor(ms: int, unit: str, zone: tzinfo) -> int:
    """The start of the local ``unit`` period holding ``ms`` (weeks start on Monday, as ISO's)."""
    local = local_time(ms, zone).replace(microsecond=0)
    fields = {"second": {}, "minute": {"second": 0}, "hour": {"minute": 0, "second": 0}}
    if unit in fields:
        return epoch_ms(local.replace(**fields[unit]))
    day = local.date()
    if unit == "week":
        day -= timedelta(days=day.weekday())
    elif unit == "month":
        day = day.replace(day=1)
    elif unit == "year":
        day = day.replace(month=1, day=1)
    return _midnight(day, zone)


def _midnight(day: date, zone: tzinfo) -> int:
    return epoch_ms(datetime(day.year, day.month, day.day, tzinfo=zone))


def _relative(text: str, zone: tzinfo, now_ms: int) -> int | None:
    """``now``, ``today``... moved by their steps; None when ``text`` is no relative time."""
    m = _RELATIVE.match(text.strip())
    if not m:
        return None
    anchor = m.group(1).lower()
    ms = now_ms if anchor == "now" else shift(_floor(now_ms, "day", zone), _DAYS[anchor], "day", zone)
    for sign, n, word in _STEP.findall(m.group(2)):
        ms = shift(ms, int(n) if sign == "+" else -int(n), _unit(word, text), zone)
    return ms


def _instant(value: object, zone: tzinfo, zone_name: str, now_ms: int) -> int:
    if isinstance(value, str):
        found = _relative(value, zone, now_ms)
        if found is not None:
            return found
    return parse_timestamp(value, zone_name)


def _pattern_range(text: str, zone: tzinfo) -> tuple[int, int] | None:
    """``2018-01-** **:**:**`` -> the month of January 2018; None when ``text`` is no pattern."""
    m = _PATTERN.match(text)
    if not m or "**" not in text:
        return None
    fields = list(m.groups()[:6])
    first_wild = next(i for i, f in enumerate(fields) if f == "**")
    if any(f != "**" for f in fields[first_wild:]):
        msg = f"within pattern '{text}': '**' may only stand for the trailing fields (e.g. '2018-01-** **:**:**')"
        raise QueryError(msg)
    defaults = [0, 1, 1, 0, 0, 0]
    values = [int(f) if f != "**" else defaults[i] for i, f in enumerate(fields)]
    try:
        start = datetime(*values, tzinfo=offset_zone(*m.groups()[6:], default=zone))  # type: ignore[misc]
    except ValueError as exc:
        msg = f"invalid within pattern '{text}': {exc}"
        raise QueryError(msg) from None
    unit = ("year", "month", "day", "hour", "minute")[first_wild - 1]  # the last fixed field's
    begin = epoch_ms(start)
    if start.year == 9999 and unit == "year":  # its end is past datetime's range; no zone shifts then
        return begin, begin + 365 * 86_400_000
    return begin, shift(begin, 1, unit, start.tzinfo or zone)


def _iso_interval(text: str, zone: tzinfo, zone_name: str, now_ms: int) -> tuple[int, int] | None:
    """``start/end``, ``start/duration`` or ``duration/end``; None when ``text`` holds no ``/``."""
    if "/" not in text:
        return None
    first, _, second = (part.strip() for part in text.partition("/"))
    durations = [_ISO_DURATION.match(p) for p in (first, second)]
    if durations[0] and durations[1]:
        raise QueryError(f"within {text!r}: an interval needs a start or an end, not two durations")
    if durations[1]:
        start = _instant(first, zone, zone_name, now_ms)
        return start, _moved(start, durations[1], 1, zone)
    end = _instant(second, zone, zone_name, now_ms)
    if durations[0]:
        return _moved(end, durations[0], -1, zone), end
    return _instant(first, zone, zone_name, now_ms), end


def _moved(ms: int, duration: re.Match[str], sign: int, zone: tzinfo) -> int:
    for amount, unit in zip(duration.groups(), _ISO_UNITS, strict=True):
        if amount:
            ms = shift(ms, sign * int(amount), unit, zone)
    return ms


def _period(text: str, zone: tzinfo, zone_name: str, now_ms: int) -> tuple[int, int] | None:
    """The range one ``within`` value names, or None when it names none."""
    stripped = text.strip()
    for found in (_pattern_range(text, zone), _iso_interval(stripped, zone, zone_name, now_ms)):
        if found is not None:
            return found
    if stripped.lower() in _DAYS:
        start = _relative(stripped, zone, now_ms)
        assert start is not None
        return start, shift(start, 1, "day", zone)
    m = _THIS.match(stripped)
    if m:
        unit = _unit(m.group(1), text)
        start = _floor(now_ms, unit, zone)
        return start, shift(start, 1, unit, zone)
    m = _LAST.match(stripped)
    if m:
        return shift(now_ms, -int(m.group(1) or 1), _unit(m.group(2), text), zone), now_ms
    m = TIMESTAMP.match(stripped)
    if m:  # one instant: its second; a date alone: that day
        start = parse_timestamp(stripped, zone_name)
        return start, (start + 1000 if m.group(4) else shift(start, 1, "day", zone))
    return None


def instant(value: object, *, zone: str = "UTC", now_ms: int | None = None) -> int:
    """One bound of a ``within`` range in epoch ms: a time, ``now``, ``today``, moved by steps (``now - 7 days``)."""
    return _instant(value, resolve_zone(zone), zone, _now() if now_ms is None else now_ms)


def within_range(start: object, end: object = None, *, zone: str = "UTC", now_ms: int | None = None) -> tuple[int, int]:
    """``[start_ms, end_ms)`` of a ``within`` clause: one value naming a period, or a start and an end;
    what has no offset is in ``zone``, and ``now`` is ``now_ms`` (the clock by default)."""
    tz = resolve_zone(zone)
    now = _now() if now_ms is None else now_ms
    if end is None:
        found = _period(start, tz, zone, now) if isinstance(start, str) else None
        if found is None:
            msg = f"within {start!r}: a single within value must name a period: {FORMS} (or give a start and an end)"
            raise QueryError(msg)
        s, e = found
    else:
        s, e = _instant(start, tz, zone, now), _instant(end, tz, zone, now)
    if s >= e:
        msg = f"within {start!r}, {end!r}: the start must be before the end (the range is [start, end))"
        raise QueryError(msg)
    return s, e
