"""Time zones of aggregations: IANA names (``Asia/Kolkata``) or fixed offsets (``+05:30``).

Buckets of an aggregation are in GMT unless the aggregation or its app names a zone (seed 001 makes GMT
the default).  The zone string is passed to Spark as is, so only forms that both Spark and Python read
the same way are accepted.
"""

from __future__ import annotations

import re
from datetime import UTC, timedelta, timezone, tzinfo
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from tiltframe.errors import DefinitionError, did_you_mean

_OFFSET = re.compile(r"^(?:UTC|GMT)?([+-])(\d{2}):?(\d{2})$")
_UTC_NAMES = {"UTC", "GMT", "Z", "Etc/UTC", "Etc/GMT", "UCT"}


@lru_cache(maxsize=256)
def resolve_zone(name: str) -> tzinfo:
    """The tzinfo for ``name``; an unknown zone is a definition error with a suggestion."""
    text = name.strip()
    if text in _UTC_NAMES:
        return UTC
    m = _OFFSET.match(text)
    if m:
        sign = 1 if m.group(1) == "+" else -1
        hours, minutes = int(m.group(2)), int(m.group(3))
        if hours > 18 or minutes > 59:
            msg = f"time zone offset '{name}' is out of range (-18:00 .. +18:00)"
            raise DefinitionError(msg)
        return timezone(sign * timedelta(hours=hours, minutes=minutes))
    try:
        return ZoneInfo(text)
    except (ZoneInfoNotFoundError, ValueError):
        hint = did_you_mean(text, available_timezones())
        msg = f"unknown time zone '{name}'{hint} (use an IANA name such as 'Asia/Kolkata' or an offset like '+05:30')"
        raise DefinitionError(msg) from None


def spark_zone(name: str) -> str:
    """The zone id to give Spark's ``from_utc_timestamp``/``to_utc_timestamp`` for ``name``."""
    z = resolve_zone(name)
    if z is UTC:
        return "UTC"
    if isinstance(z, timezone):
        offset = z.utcoffset(None)
        total = int(offset.total_seconds()) // 60
        sign = "+" if total >= 0 else "-"
        return f"{sign}{abs(total) // 60:02d}:{abs(total) % 60:02d}"
    return name.strip()


def is_utc(name: str) -> bool:
    return resolve_zone(name) is UTC


def fixed_offset_ms(name: str) -> int | None:
    """The constant offset of a fixed-offset zone in ms (0 for GMT); None for zones with rules."""
    z = resolve_zone(name)
    if isinstance(z, timezone):
        return int(z.utcoffset(None).total_seconds() * 1000)
    return None
