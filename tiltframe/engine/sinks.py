"""Where the rows of a retrieval's output stream go: console, JSON Lines files, or a Python callback.

File sinks name each file after the micro-batch that produced it and replace it atomically, so a replayed
batch rewrites the same file instead of adding a duplicate.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import pandas as pd
from rich.console import Console
from rich.table import Table


class Sink(Protocol):
    def write(self, stream: str, batch_id: int, rows: pd.DataFrame) -> None: ...


def rows_as_records(rows: pd.DataFrame) -> list[dict[str, object]]:
    """Plain JSON-friendly dicts (numpy scalars become Python numbers, NaN becomes null)."""
    return json.loads(rows.to_json(orient="records", double_precision=15))


class ConsoleSink:
    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console()

    def write(self, stream: str, batch_id: int, rows: pd.DataFrame) -> None:
        table = Table(title=f"{stream} (batch {batch_id}, {len(rows)} rows)")
        for c in rows.columns:
            table.add_column(str(c))
        for rec in rows.itertuples(index=False):
            table.add_row(*(str(v) for v in rec))
        self.console.print(table)


class JsonLinesSink:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def write(self, stream: str, batch_id: int, rows: pd.DataFrame) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        target = self.path / f"{stream}-batch-{batch_id:06d}.jsonl"
        tmp = target.with_suffix(".tmp")
        with tmp.open("w", encoding="utf-8") as fh:
            for rec in rows_as_records(rows):
                fh.write(json.dumps(rec) + "\n")
        os.replace(tmp, target)


class CallbackSink:
    def __init__(self, fn: Callable[[str, pd.DataFrame], None]) -> None:
        self.fn = fn

    def write(self, stream: str, batch_id: int, rows: pd.DataFrame) -> None:
        self.fn(stream, rows)
