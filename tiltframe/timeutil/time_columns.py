"""Readable time columns (pandas): epoch milliseconds as zone-aware datetimes, and those as ISO-8601 text.

Results keep their epoch-ms columns (``AGG_TIMESTAMP``, ``window_start``) as Siddhi returns them; this
module makes the readable columns beside them (``AGG_TIME``).  Each instant gets its zone's offset at that
instant (zoneinfo rules, so a month bucket in winter and one in summer carry different offsets), and text
forms end with that offset, never a bare local time.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tiltframe.timeutil import AGG_TIME
from tiltframe.timeutil.zones import resolve_zone

__all__ = ["AGG_TIME", "aware_times", "iso_text", "readable_frame"]


def aware_times(ms: pd.Series, zone: str = "UTC") -> pd.Series:
    """Epoch milliseconds as ``datetime64[ms, zone]`` (missing values become ``NaT``)."""
    # In milliseconds throughout: nanoseconds (pandas' default unit) end in 2262, and buckets reach year 9999.
    nat = np.iinfo(np.int64).min  # NumPy's NaT
    values = pd.to_numeric(ms).astype("Int64").to_numpy(dtype="int64", na_value=nat).view("datetime64[ms]")
    utc = pd.Series(values, index=ms.index, name=ms.name).dt.tz_localize("UTC")
    return utc.dt.tz_convert(resolve_zone(zone))


def iso_text(times: pd.Series) -> pd.Series:
    """Datetimes as ISO-8601 text with their offset (``2024-07-01T00:00:00.000+02:00``), to the millisecond,
    or to the microsecond for a column that has finer values (never losing what it holds, one width per
    column); a naive datetime is taken as UTC; missing values stay missing (None)."""
    if not isinstance(times.dtype, pd.DatetimeTZDtype):
        times = times.dt.tz_localize("UTC")
    finer = bool(((times.dt.microsecond.dropna() % 1000) != 0).any())  # NaT has no microseconds
    spec = "microseconds" if finer else "milliseconds"
    text = [None if pd.isna(t) else t.isoformat(timespec=spec) for t in times]
    return pd.Series(text, index=times.index, name=times.name, dtype=object)


def readable_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with every datetime column as ISO-8601 text, for text outputs (JSON, CSV, a console),
    which would otherwise print epoch numbers or pandas' own ``2024-01-01 00:00:00+00:00``."""
    columns = [c for c in frame.columns if pd.api.types.is_datetime64_any_dtype(frame[c].dtype)]
    if not columns:
        return frame
    out = frame.copy()
    for c in columns:
        out[c] = iso_text(frame[c])
    return out
