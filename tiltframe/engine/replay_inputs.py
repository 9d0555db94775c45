"""The inputs and outputs of a replay (``tiltframe replay``), whatever the query's language: input lines
``{"ingest_ns": N, "event": VALUE}`` (an event arriving at N nanoseconds) or ``{"tick": N}`` (a timer tick),
and outputs ``{"stream": NAME, "event": VALUE}`` (with ``"error"`` for an input that could not be taken)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tiltframe.errors import UsageError


@dataclass(frozen=True)
class Output:
    """An output event of ``stream``; or, with ``error``, an input the query could not take (``event``: the
    input, on ``err``)."""

    stream: str
    event: Any
    error: str | None = None

    def line(self) -> str:
        """``{"stream": ..., "event": ...}`` (and ``"error"``) as one JSON line, keys sorted."""
        data = {"stream": self.stream, "event": self.event}
        if self.error is not None:
            data["error"] = self.error
        return json.dumps(data, separators=(",", ":"), sort_keys=True, ensure_ascii=False, allow_nan=True)


@dataclass(frozen=True)
class Tick:
    ns: int


@dataclass(frozen=True)
class Event:
    value: Any
    ingest_ns: int


@dataclass(frozen=True)
class BadLine:
    """A line of a replay file that is no input: it comes out on ``err`` with the reason, and replay goes on."""

    text: str
    reason: str


def read_replay_file(path: Path) -> Iterator[Event | Tick | BadLine]:
    """The inputs of a replay file: lines ``{"ingest_ns": N, "event": VALUE}`` or ``{"tick": N}`` (blank lines
    skipped).  A line that is neither is a :class:`BadLine` naming the file and the line; a file that cannot
    be read is a usage error."""
    try:
        handle = path.open(encoding="utf-8-sig")
    except OSError as exc:
        msg = f"replay file '{path}' cannot be read: {exc.strerror or exc}"
        raise UsageError(msg) from None
    with handle:
        for number, line in enumerate(handle, start=1):
            if line.strip():
                yield _item(line, f"{path}, line {number}")


def _item(line: str, where: str) -> Event | Tick | BadLine:
    text = line.rstrip("\r\n")
    try:
        data = json.loads(line)
    except json.JSONDecodeError as exc:
        return BadLine(text, f"{where}: not JSON ({exc.msg} at column {exc.colno})")
    if isinstance(data, dict) and set(data) == {"tick"} and _whole(data["tick"]):
        return Tick(data["tick"])
    if isinstance(data, dict) and set(data) == {"ingest_ns", "event"} and _whole(data["ingest_ns"]):
        return Event(data["event"], data["ingest_ns"])
    shape = '{"ingest_ns": N, "event": VALUE} or {"tick": N} (N a whole number)'
    return BadLine(text, f"{where}: expected {shape}")


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
