"""Timestamps as users write them, and ``within`` ranges, to epoch milliseconds.

Accepted forms (seeds 000/001): a long of epoch milliseconds; ``yyyy-MM-dd HH:mm:ss`` in GMT;
``yyyy-MM-dd HH:mm:ss Z`` with an ISO-8601 offset such as ``+05:30``.  The Spark side parses event
timestamps with the same two patterns (``tiltframe.engine.events``).
"""

from __future__ import annotations

import calendar
import re
from datetime import UTC, datetime, timedelta, timezone

from tiltframe.errors import QueryError
from tiltframe.timeutil.zones import resolve_zone

_TS = re.compile(
    r"^\s*(\d{4})-(\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2})(?:\s+([+-])(\d{2}):?(\d{2}))?\s*$"
)
_PATTERN = re.compile(
    r"^\s*(\d{4})-(\d{2}|\*\*)-(\d{2}|\*\*) (\d{2}|\*\*):(\d{2}|\*\*):(\d{2}|\*\*)"
    r"(?:\s+([+-])(\d{2}):?(\d{2}))?\s*$"
)
FORMATS = "a long (epoch ms), 'yyyy-MM-dd HH:mm:ss' (GMT) or 'yyyy-MM-dd HH:mm:ss +05:30'"


def _offset(sign: str | None, hh: str | None, mm: str | None) -> timezone:
    if sign is None:
        return UTC
    delta = timedelta(hours=int(hh or 0), minutes=int(mm or 0))
    if delta >= timedelta(hours=24) or int(mm or 0) > 59:
        msg = f"the offset {sign}{hh}:{mm} is not one of -23:59 ... +23:59"
        raise ValueError(msg)
    return timezone(delta if sign == "+" else -delta)


def _epoch_ms(dt: datetime) -> int:
    return int(dt.timestamp() * 1000)


def parse_timestamp(value: object) -> int:
    """Epoch milliseconds of a long or a timestamp string; anything else is a QueryError."""
    if isinstance(value, bool):
        msg = f"expected a timestamp ({FORMATS}), got {value!r}"
        raise QueryError(msg)
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        m = _TS.match(value)
        if m:
            y, mo, d, h, mi, s = (int(x) for x in m.groups()[:6])
            try:
                dt = datetime(y, mo, d, h, mi, s, tzinfo=_offset(*m.groups()[6:]))
            except ValueError as exc:
                msg = f"invalid timestamp '{value}': {exc}"
                raise QueryError(msg) from None
            return _epoch_ms(dt)
        if value.strip().lstrip("-").isdigit():
            return int(value.strip())
    msg = f"expected a timestamp ({FORMATS}), got {value!r}"
    raise QueryError(msg)


def _pattern_range(text: str) -> tuple[int, int] | None:
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
        start = datetime(*values, tzinfo=_offset(*m.groups()[6:]))  # type: ignore[misc]
    except ValueError as exc:
        msg = f"invalid within pattern '{text}': {exc}"
        raise QueryError(msg) from None
    unit = first_wild - 1  # the last fixed field sets the length of the range
    if unit == 0:
        days = 366 if calendar.isleap(start.year) else 365
    elif unit == 1:
        days = calendar.monthrange(start.year, start.month)[1]
    else:
        days = [1, 1 / 24, 1 / 1440][unit - 2]
    # In milliseconds, not datetimes: the range of year 9999 ends in year 10000, past datetime's range (the
    # offset is fixed, so every day of the range has 24 hours).
    return _epoch_ms(start), _epoch_ms(start) + round(days * 86_400_000)


def within_range(start: object, end: object = None) -> tuple[int, int]:
    """``[start_ms, end_ms)`` of a ``within`` clause: a pattern, or a start and an end."""
    if end is None:
        if isinstance(start, str):
            found = _pattern_range(start)
            if found is not None:
                return found
            if _TS.match(start):
                s = parse_timestamp(start)
                return s, s + 1000
        msg = (
            f"within {start!r}: a single within value must be a pattern such as \"2018-01-** **:**:**\" "
            f"(or give a start and an end)"
        )
        raise QueryError(msg)
    s, e = parse_timestamp(start), parse_timestamp(end)
    if s >= e:
        msg = f"within {start!r}, {end!r}: the start must be before the end (the range is [start, end))"
        raise QueryError(msg)
    return s, e


def format_ts(ms: int | None, zone: str = "UTC") -> str:
    """Epoch milliseconds as ``yyyy-MM-dd HH:mm:ss`` in ``zone`` (GMT by default); ``-`` for none."""
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, tz=resolve_zone(zone)).strftime("%Y-%m-%d %H:%M:%S")
