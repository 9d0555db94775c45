"""What the CLI prints: consoles for data (stdout) and messages (stderr) and query answers as tables; the
JSON and CSV forms of answers are :mod:`tiltframe.retrieval.formats`'s (shared with the HTTP server)."""

from __future__ import annotations

import math
import os
import sys
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from tiltframe.timeutil.parse import format_ts

if TYPE_CHECKING:
    import pandas as pd


#: The width of tables written to a file or pipe when $COLUMNS does not say: readable in an editor or a
#: pager; a query's answer gets ``WIDE`` (its rows are data: a cell split over lines reads worse).
PIPED_WIDTH = 100
WIDE = 240


def piped_width(default: int = PIPED_WIDTH) -> int:
    """The width of output that is not a terminal: ``$COLUMNS`` when it is a positive number, else
    ``default``."""
    columns = os.environ.get("COLUMNS", "").strip()
    return int(columns) if columns.isdigit() and int(columns) > 0 else default


def stdout_console(*, wide: bool = False) -> Console:
    """A console on the current stdout: a terminal's own width, else ``$COLUMNS``, else 100 columns (240
    with ``wide``, for query answers)."""
    width = None if sys.stdout.isatty() else piped_width(WIDE if wide else PIPED_WIDTH)
    return Console(width=width, highlight=False, soft_wrap=False)


def stderr_console() -> Console:
    return Console(stderr=True, highlight=False, soft_wrap=True)


def _pandas_na() -> object:
    """pandas' missing value (of nullable integer columns), once pandas is imported (nothing is NA before)."""
    return getattr(sys.modules.get("pandas"), "NA", None)


def ts_or_none(ms: int | None) -> str | None:
    return format_ts(ms) if ms is not None else None


def cell(value: Any) -> str:
    """A value as a table cell: blank for null (None, NaN, pandas' NA), floats in short form but always with
    a point."""
    if value is None or (isinstance(value, float) and math.isnan(value)) or value is _pandas_na():
        return ""
    if isinstance(value, float):
        text = f"{value:.10g}"
        return text if any(ch in text for ch in ".einf") else f"{text}.0"
    return str(value)


def result_table(frame: pd.DataFrame, *, zone: str = "UTC", title: str | None = None) -> Table:
    """A rich table of a query answer, datetimes (``AGG_TIME``) as ISO-8601 text; an ``AGG_TIMESTAMP``
    without its ``AGG_TIME`` beside it is also shown as a date in the aggregation's zone."""
    from tiltframe.timeutil.time_columns import AGG_TIME, readable_frame  # pandas: not for every command's start

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
