"""What the CLI prints: consoles for data (stdout) and messages (stderr), JSON of any value the stores
and pandas hand back, and query answers as tables."""

from __future__ import annotations

import json
import math
import sys
from datetime import date, datetime, time
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from tiltframe.timeutil.columns import AGG_TIME, readable_frame
from tiltframe.timeutil.parse import format_ts

if TYPE_CHECKING:
    import pandas as pd


def stdout_console() -> Console:
    """A console on the current stdout; wide when piped so that tables are not squeezed to 80 columns."""
    return Console(width=None if sys.stdout.isatty() else 240, highlight=False, soft_wrap=False)


def stderr_console() -> Console:
    return Console(stderr=True, highlight=False, soft_wrap=True)


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


def to_json(value: Any) -> str:
    """Indented, valid JSON of ``value``, whatever numbers the store gave (see :func:`json_value`)."""
    return json.dumps(_finite(value), indent=2, default=json_value, allow_nan=False)


def records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """Rows as JSON-ready dicts: plain numbers, NaN as null, datetimes (``AGG_TIME``) as ISO-8601 text."""
    return json.loads(readable_frame(frame).to_json(orient="records", double_precision=15, default_handler=str))


def csv_text(frame: pd.DataFrame) -> str:
    """CSV with a header row; datetimes (``AGG_TIME``) as ISO-8601 text with their offset."""
    return readable_frame(frame).to_csv(index=False)


def ts_or_none(ms: int | None) -> str | None:
    return format_ts(ms) if ms is not None else None


def cell(value: Any) -> str:
    """A value as a table cell: blank for null, floats in short form but always with a point."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, float):
        text = f"{value:.10g}"
        return text if any(ch in text for ch in ".einf") else f"{text}.0"
    return str(value)


def result_table(frame: pd.DataFrame, *, zone: str = "UTC", title: str | None = None) -> Table:
    """A rich table of a query answer, datetimes (``AGG_TIME``) as ISO-8601 text; an ``AGG_TIMESTAMP``
    without its ``AGG_TIME`` beside it is also shown as a date in the aggregation's zone."""
    label = "time (GMT)" if zone.upper() in ("UTC", "GMT") else f"time ({zone})"
    dated = AGG_TIME not in frame.columns
    frame = readable_frame(frame)
    table = Table(title=title, title_justify="left")
    columns: list[str] = []
    for c in frame.columns:
        numeric = frame[c].dtype.kind in "iuf"
        table.add_column(str(c), justify="right" if numeric else "left")
        columns.append(str(c))
        if c == "AGG_TIMESTAMP" and dated:
            table.add_column(label)
    for rec in frame.itertuples(index=False):
        cells: list[str] = []
        for c, v in zip(columns, rec, strict=True):
            cells.append(cell(v))
            if c == "AGG_TIMESTAMP" and dated:
                cells.append(format_ts(int(v), zone) if v is not None else "")
        table.add_row(*cells)
    return table
