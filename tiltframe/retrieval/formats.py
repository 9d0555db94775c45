"""An answer's text forms, the same for the CLI and the HTTP server: JSON-ready records (datetimes as
ISO-8601 text, NaN as null), CSV, and JSON of whatever values the stores and pandas hand back."""

from __future__ import annotations

import json
import math
from datetime import date, datetime, time
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd


def json_value(value: Any) -> Any:
    """``json.dumps``'s ``default``: the plain JSON form of values drivers and numpy return (a server
    store's ``Decimal`` counts and sums, numpy scalars, dates, bytes)."""
    if isinstance(value, Decimal):
        if not value.is_finite():
            return None if value.is_nan() else str(value)
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, set | frozenset):
        return sorted(value, key=str)
    item = getattr(value, "item", None)  # a numpy scalar (numpy is not imported for this)
    if callable(item) and type(value).__module__ == "numpy":
        plain = item()
        return None if isinstance(plain, float) and math.isnan(plain) else plain
    msg = f"{type(value).__name__} is not JSON serializable"
    raise TypeError(msg)


def _finite(value: Any) -> Any:
    """``value`` with NaN floats as None and infinite ones as strings: JSON has no such numbers."""
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else str(value).replace("inf", "Infinity")
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def to_json(value: Any, *, indent: int | None = 2) -> str:
    """Valid JSON of ``value`` (indented, or compact with ``indent=None``), whatever numbers the store gave
    (see :func:`json_value`)."""
    separators = None if indent is not None else (",", ":")
    return json.dumps(_finite(value), indent=indent, separators=separators, default=json_value, allow_nan=False)


def records_json(frame: pd.DataFrame) -> str:
    """Rows as a JSON array of objects: plain numbers, NaN and infinities as null, datetimes (``AGG_TIME``)
    as ISO-8601 text."""
    from tiltframe.timeutil.time_columns import readable_frame  # pandas's, imported by whoever made the frame

    return readable_frame(frame).to_json(orient="records", double_precision=15, default_handler=str)


def records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """Rows as JSON-ready dicts (see :func:`records_json`)."""
    return json.loads(records_json(frame))


def csv_text(frame: pd.DataFrame) -> str:
    """CSV with a header row; datetimes (``AGG_TIME``) as ISO-8601 text with their offset."""
    from tiltframe.timeutil.time_columns import readable_frame

    return readable_frame(frame).to_csv(index=False)
