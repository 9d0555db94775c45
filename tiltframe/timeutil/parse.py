"""Timestamps as users write them to epoch milliseconds (``within`` ranges: ``tiltframe.timeutil.ranges``).

Accepted forms (docs/time.md): a long of epoch milliseconds; Siddhi's ``yyyy-MM-dd HH:mm:ss`` and
``yyyy-MM-dd HH:mm:ss +05:30``; ISO-8601 dates and date-times such as ``2024-01-05``,
``2024-01-05T10:00:00Z``, ``2024-01-05T10:30:00.250+00:00`` or ``2024-01-05T10:00+0530``.  A time without
an offset is read in the zone the caller gives (a query: its aggregation's; GMT by default); digits after
the millisecond are dropped (times are kept in epoch milliseconds).  The Spark side parses event
timestamps with the same pattern (``tiltframe.engine.events.event_time``), without an offset in GMT.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone, tzinfo

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
TIMESTAMP = re.compile(TIME_PATTERN)
#: A whole number of epoch ms, as Spark casts text to a long (ASCII digits, a sign).
_WHOLE = re.compile(r"[+-]?[0-9]+\Z")
FORMATS = (
    "a long (epoch ms), 'yyyy-MM-dd HH:mm:ss', 'yyyy-MM-dd HH:mm:ss +05:30' or ISO-8601 such as "
    "'2024-01-05T10:00:00Z'"
)


def _zone(text: str | None, default: tzinfo = UTC) -> tzinfo:
    """The offset of ``TIME_PATTERN``'s last group (``default`` when absent)."""
    if not text:
        return default
    if text in "Zz":
        return UTC
    digits = text[1:].replace(":", "")
    return offset_zone(text[0], digits[:2], digits[2:4] or "00")


def offset_zone(sign: str | None, hh: str | None, mm: str | None, default: tzinfo = UTC) -> tzinfo:
    if sign is None:
        return default
    delta = timedelta(hours=int(hh or 0), minutes=int(mm or 0))
    # Java's offsets (and so Spark's reading of event times) end at 18 hours; real ones at 14.
    if delta > timedelta(hours=18) or int(mm or 0) > 59:
        msg = f"the offset {sign}{hh}:{mm} is not one of -18:00 ... +18:00"
        raise ValueError(msg)
    return timezone(delta if sign == "+" else -delta)


def epoch_ms(dt: datetime) -> int:
    """Whole milliseconds since the epoch, rounded down (exact: no float)."""
    return (dt - _EPOCH) // timedelta(milliseconds=1)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def local_time(ms: int, zone: tzinfo) -> datetime:
    """Instant ``ms`` (epoch ms) as an aware datetime in ``zone`` (exact: no float)."""
    return (_EPOCH + timedelta(milliseconds=ms)).astimezone(zone)


def parse_timestamp(value: object, zone: str = "UTC") -> int:
    """Epoch milliseconds of a long or a timestamp string (read in ``zone`` when it has no offset);
    anything else is a QueryError."""
    if isinstance(value, bool):
        msg = f"expected a timestamp ({FORMATS}), got {value!r}"
        raise QueryError(msg)
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        m = TIMESTAMP.match(value.strip())
        if m:
            y, mo, d, h, mi, sec = (int(x or 0) for x in m.groups()[:6])
            micros = int((m.group(7) or "").ljust(6, "0")[:6])
            try:
                dt = datetime(y, mo, d, h, mi, sec, micros, tzinfo=_zone(m.group(8), resolve_zone(zone)))
            except ValueError as exc:
                msg = f"invalid timestamp '{value}': {exc}"
                raise QueryError(msg) from None
            return epoch_ms(dt)
        if _WHOLE.match(value.strip()):
            return int(value.strip())
    msg = f"expected a timestamp ({FORMATS}), got {value!r}"
    raise QueryError(msg)


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
