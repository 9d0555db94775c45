"""The clock of a continuous query: a Spark streaming source of ticks that carry processing time and the
watermark to every state bucket.

Emit policies need two times that Spark's stateful operator cannot give together: processing time (for
PERIODIC, TIMEOUT, WITH BATCH) and a query-wide event-time watermark that still lets the engine see, count
and record late events (Spark drops them silently before a stateful processor in event-time mode).  So
both travel as data.  A small JSON file is the clock: ``now`` (processing time, epoch ms) and
``max_event_ts`` (the greatest event time the query has aggregated).  The driver updates it (wall time in
a follow run, fixed in a bounded run, set by hand in tests) and after each micro-batch (the greatest event
time the processor reported).  This source offers the file's content as its offset whenever it changes;
each new offset becomes one tick row per bucket, so every bucket's processor runs, closes the windows the
watermark passed, and fires its timers.  Offsets are in Spark's offset log, so a replayed batch sees the
same ticks.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow

FORMAT = "tiltframe_clock"
SCHEMA = "bucket int, now long, max_event_ts long"


def read_clock(path: str | Path) -> dict[str, int | None]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {"now": None, "max_event_ts": None}
    return {"now": data.get("now"), "max_event_ts": data.get("max_event_ts")}


#: One lock for every clock file of this process: the follow run's ticker thread and the micro-batch
#: callback both move a query's clock, and each update reads the file before replacing it.
_WRITING = threading.Lock()


def write_clock(path: str | Path, *, now: int | None = None, max_event_ts: int | None = None) -> None:
    """Move the clock: ``now`` replaces processing time; ``max_event_ts`` only ever grows.  The file is
    replaced atomically, so the source never reads half a clock."""
    target = Path(path)
    with _WRITING:
        state = read_clock(target)
        if now is not None:
            state["now"] = now
        if max_event_ts is not None:
            current = state["max_event_ts"]
            state["max_event_ts"] = max_event_ts if current is None else max(current, max_event_ts)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(json.dumps(state))
        os.replace(tmp, target)


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


def follow_wall_time(path: str | Path, every_s: float, stop: threading.Event, name: str) -> threading.Thread:
    """A follow run's clock: a daemon thread that moves the clock at ``path`` to wall time every ``every_s``
    seconds until ``stop`` is set (each move a tick in the next micro-batch)."""

    def run() -> None:
        while not stop.wait(every_s):
            write_clock(path, now=wall_ms())

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    return thread


class _ClockReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: dict[str, str]) -> None:
        self.path = options["path"]
        self.buckets = int(options["buckets"])
        self.target: dict[str, Any] | None = None

    def initialOffset(self) -> dict[str, Any]:
        return {"now": None, "max_event_ts": None}

    def prepareForTriggerAvailableNow(self) -> None:
        """A bounded run (``availableNow``) reads the clock as it is when it starts: without this, Spark would
        run the whole query, every source, as one micro-batch."""
        self.target = dict(read_clock(self.path))

    def latestOffset(self, start: dict[str, Any] | None = None, limit: object = None) -> dict[str, Any]:
        return self.target if self.target is not None else dict(read_clock(self.path))

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        return [InputPartition(end)] if end != start else []

    def read(self, partition: InputPartition) -> Iterator[tuple[int, int | None, int | None]]:
        end = partition.value
        for bucket in range(self.buckets):
            yield (bucket, end["now"], end["max_event_ts"])

    def commit(self, end: dict[str, Any]) -> None:
        pass


class ClockSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> str:
        return SCHEMA

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return _ClockReader(self.options)


def clock_stream(spark: SparkSession, path: str | Path, buckets: int) -> DataFrame:
    """The ticks of the clock file at ``path``, one row per bucket and change."""
    spark.dataSource.register(ClockSource)
    return spark.readStream.format(FORMAT).option("path", str(path)).option("buckets", buckets).load()
