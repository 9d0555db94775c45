"""Timestamps as users write them, and ``within`` ranges, to epoch milliseconds.

Accepted forms (docs/time.md): a long of epoch milliseconds; Siddhi's ``yyyy-MM-dd HH:mm:ss`` (GMT) and
``yyyy-MM-dd HH:mm:ss +05:30``; ISO-8601 dates and date-times such as ``2024-01-05``,
``2024-01-05T10:00:00Z``, ``2024-01-05T10:30:00.250+00:00`` or ``2024-01-05T10:00+0530``.  A time without
an offset is GMT; digits after the millisecond are dropped (times are kept in epoch milliseconds).  The
Spark side parses event timestamps with the same pattern (``tiltframe.engine.event_time``).
"""

from __future__ import annotations

import calendar
import re
from datetime import UTC, datetime, timedelta, timezone

from tiltframe.errors import QueryError
from tiltframe.timeutil.zones import resolve_zone

#: A timestamp string (after trimming): date; then optionally ``T`` or a space, the time (seconds and a
#: fraction optional); then optionally an offset (``Z``, ``+05:30``, ``+0530``, ``+05``), spaces allowed
#: before it.  The same text is a Java regex: Spark parses event times with it.
TIME_PATTERN = (
    r"^([0-9]{4})-([0-9]{2})-([0-9]{2})"
    r"(?:[T ]([0-9]{2}):([0-9]{2})(?::([0-9]{2})(?:[.,]([0-9]{1,9}))?)?)?"
    r"\s*(Z|z|[+-][0-9]{2}(?::?[0-9]{2})?)?$"
)
_TS = re.compile(TIME_PATTERN)
_PATTERN = re.compile(
    r"^\s*(\d{4})-(\d{2}|\*\*)-(\d{2}|\*\*) (\d{2}|\*\*):(\d{2}|\*\*):(\d{2}|\*\*)"
    r"(?:\s+([+-])(\d{2}):?(\d{2}))?\s*$"
)
FORMATS = (
    "a long (epoch ms), 'yyyy-MM-dd HH:mm:ss' (GMT), 'yyyy-MM-dd HH:mm:ss +05:30' or ISO-8601 such as "
    "'2024-01-05T10:00:00Z'"
)


def _zone(text: str | None) -> timezone:
    """The offset of ``TIME_PATTERN``'s last group (GMT when absent)."""
    if not text or text in "Zz":
        return UTC
    digits = text[1:].replace(":", "")
    return _offset(text[0], digits[:2], digits[2:4] or "00")


def _offset(sign: str | None, hh: str | None, mm: str | None) -> timezone:
    if sign is None:
        return UTC
    delta = timedelta(hours=int(hh or 0), minutes=int(mm or 0))
    if delta >= timedelta(hours=24) or int(mm or 0) > 59:
        msg = f"the offset {sign}{hh}:{mm} is not one of -23:59 ... +23:59"
        raise ValueError(msg)
    return timezone(delta if sign == "+" else -delta)


def _epoch_ms(dt: datetime) -> int:
    """Whole milliseconds since the epoch, rounded down (exact: no float)."""
    return (dt - _EPOCH) // timedelta(milliseconds=1)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


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
        m = _TS.match(value.strip())
        if m:
            y, mo, d, h, mi, sec = (int(x or 0) for x in m.groups()[:6])
            micros = int((m.group(7) or "").ljust(6, "0")[:6])
            try:
                dt = datetime(y, mo, d, h, mi, sec, micros, tzinfo=_zone(m.group(8)))
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
            m = _TS.match(start.strip())
            if m:  # one instant: its second; a date alone: that day
                s = parse_timestamp(start)
                return s, s + (1000 if m.group(4) else 86_400_000)
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


def iso_ts(ms: int | None, zone: str = "UTC") -> str | None:
    """Epoch milliseconds as ISO-8601 with the offset in ``zone`` (``2024-01-01T09:00:00+09:00``); None for none."""
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, tz=resolve_zone(zone)).isoformat(timespec="milliseconds")


def format_ts(ms: int | None, zone: str = "UTC") -> str:
    """Epoch milliseconds as ``yyyy-MM-dd HH:mm:ss`` in ``zone`` (GMT by default); ``-`` for none."""
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, tz=resolve_zone(zone)).strftime("%Y-%m-%d %H:%M:%S")
