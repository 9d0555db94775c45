"""Times a trickle query reads from text (a window's ``script`` giving an event's time), to epoch
milliseconds: the forms of docs/time.md ("Event time"), vectorised over a pandas Series.

The acceptance is that of the Spark side (``engine.events.event_time.event_time_ms`` over a string, then the
range check of ``engine.events.typed``): spaces around the text are ignored; a whole number (an optional sign,
ASCII digits, within a long; control characters around it ignored, as Spark's cast does) is epoch
milliseconds; otherwise ``timeutil.parse.TIME_PATTERN`` (Siddhi's ``yyyy-MM-dd HH:mm:ss`` with or without an
offset, ISO-8601 with ``T``, ``Z``, offsets and fractions, dates) with a real calendar date, hours to 23,
minutes and seconds to 59 and an offset of at most 18 hours (Java's ``ZoneOffset``, which Spark parses with);
digits after the millisecond are dropped.  The reasons are Spark's too: a text of no such form "is not a
timestamp", an instant outside years 0001-9999 "is outside years 0001-9999".
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
import pandas as pd

from tiltframe.timeutil.parse import FORMATS, TIME_PATTERN

#: The pattern as Java reads it (``\\s`` and digits ASCII only), which is how Spark applies it.
_TIME = re.compile(TIME_PATTERN, re.ASCII)
#: A whole number as Spark's cast to long reads it: the cast also ignores ASCII control characters around
#: the digits (``"29\\f"`` is 29), but a minus only where it is the text's first character (``text_long``).
_CONTROLS = "".join(map(chr, [*range(0x21), 0x7F]))
_WHOLE = re.compile(r"^(?:-[0-9]+|[\x00-\x20\x7f]*\+?[0-9]+)[\x00-\x20\x7f]*$", re.ASCII)
_MIN_MS = -62_135_596_800_000  # 0001-01-01 00:00:00 GMT
_MAX_MS = 253_402_300_799_999  # 9999-12-31 23:59:59.999 GMT
_MONTH_DAYS = np.array([31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31])
_MAX_OFFSET_MS = 18 * 3_600_000


def days_from_civil(year: np.ndarray, month: np.ndarray, day: np.ndarray) -> np.ndarray:
    """Days since 1970-01-01 of proleptic Gregorian dates (H. Hinnant's ``days_from_civil``), exact in int64."""
    y = year - (month <= 2)
    era = np.floor_divide(y, 400)
    yoe = y - era * 400
    doy = (153 * (month + np.where(month > 2, -3, 9)) + 2) // 5 + day - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146_097 + doe - 719_468


def _valid_date(year: np.ndarray, month: np.ndarray, day: np.ndarray) -> np.ndarray:
    leap = ((year % 4 == 0) & (year % 100 != 0)) | (year % 400 == 0)
    ok_month = (month >= 1) & (month <= 12)
    days = _MONTH_DAYS[np.clip(month, 1, 12) - 1] + ((month == 2) & leap)
    return ok_month & (day >= 1) & (day <= days)


def _offset_ms(zone: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """The offset of ``TIME_PATTERN``'s last group in milliseconds (0 when absent or ``Z``), and whether it
    is one Spark takes."""
    text = zone.fillna("").str.replace(":", "", regex=False)
    signed = text.str.match(r"[+-]").to_numpy(dtype=bool)
    hours = pd.to_numeric(text.str.slice(1, 3), errors="coerce").fillna(0).to_numpy(dtype="int64")
    minutes = pd.to_numeric(text.str.slice(3, 5), errors="coerce").fillna(0).to_numpy(dtype="int64")
    size = np.where(signed, (hours * 60 + minutes) * 60_000, 0)
    sign = np.where(text.str.startswith("-").to_numpy(dtype=bool), -1, 1)
    return sign * size, (minutes <= 59) & (size <= _MAX_OFFSET_MS)


def _whole_ms(text: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Whole numbers as epoch ms, and whether each is a long (Spark's ``try_cast``: one past a long is no
    number); a long of more than 15 digits is past year 9999 either way, so its value is not worked out."""
    digits = text.str.lstrip("+-").str.lstrip("0")
    negative = text.str.startswith("-").to_numpy(dtype=bool)
    length = digits.str.len().to_numpy(dtype="int64")
    limit = np.where(negative, "9223372036854775808", "9223372036854775807").astype(object)
    fits = (length < 19) | ((length == 19) & (digits.to_numpy(dtype=object) <= limit))
    small = length <= 15
    ms = np.where(negative, -1, 1) * (_MAX_MS + 1)  # past the range: refused as such
    if small.any():
        ms[small] = pd.to_numeric(text[small].str.lstrip("+")).to_numpy(dtype="int64")
    return ms, fits


def text_times_ms(values: pd.Series, where: str | Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Epoch milliseconds of each text of ``values`` (int64; 0 where it is not one) and the reason it is
    not, or None: ``where`` (one for all, or one per value) names the value in the reason, as Spark's
    ``field 'ts'`` does."""
    raw = values.astype(object).where(values.notna(), "").astype(str).reset_index(drop=True)
    text = raw.str.strip(" ")
    n = len(text)
    ms = np.zeros(n, dtype="int64")
    found = np.zeros(n, dtype=bool)
    whole = text.str.match(_WHOLE).to_numpy(dtype=bool)
    if whole.any():
        at = np.flatnonzero(whole)
        ms[at], found[at] = _whole_ms(text[whole].str.strip(_CONTROLS).reset_index(drop=True))
    rest = ~whole
    if rest.any():
        parts = text[rest].str.extract(_TIME)
        matched = parts[0].notna().to_numpy(dtype=bool)

        def number(i: int) -> np.ndarray:
            return pd.to_numeric(parts[i], errors="coerce").fillna(0).to_numpy(dtype="int64")

        year, month, day, hour, minute, second = (number(i) for i in range(6))
        millis = pd.to_numeric(parts[6].fillna("").str.slice(0, 3).str.pad(3, "right", "0"),
                               errors="coerce").fillna(0).to_numpy(dtype="int64")
        offset, offset_ok = _offset_ms(parts[7])
        ok = (matched & _valid_date(year, month, day) & (hour <= 23) & (minute <= 59) & (second <= 59)
              & offset_ok)
        days = days_from_civil(year, np.where(ok, month, 1), np.where(ok, day, 1))
        local = ((days * 24 + hour) * 60 + minute) * 60_000 + second * 1000 + millis
        at = np.flatnonzero(rest)
        ms[at] = np.where(ok, local - offset, 0)
        found[at] = ok
    in_range = (ms >= _MIN_MS) & (ms <= _MAX_MS)
    shown = raw.to_numpy(dtype=object)
    named = np.full(n, where, dtype=object) if isinstance(where, str) else np.asarray(list(where), dtype=object)
    reasons = np.full(n, None, dtype=object)
    if (~found).any():
        reasons[~found] = named[~found] + ": value '" + shown[~found] + f"' is not a timestamp (expected {FORMATS})"
    outside = found & ~in_range
    if outside.any():
        reasons[outside] = named[outside] + ": value '" + shown[outside] + "' is outside years 0001-9999"
    return np.where(found & in_range, ms, 0), reasons
