"""The columns a continuous query's processor reads and writes, its configuration, and small helpers its
parts share (``step.py``, ``emission.py``, ``windows/``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from pyspark.sql import Column
from pyspark.sql import functions as F

from tiltframe.aggregates.layout import AggregationLayout
from tiltframe.engine.events.event_time import event_time_ms
from tiltframe.engine.events.spark_expressions import to_column
from tiltframe.engine.events.typed import SPARK_TYPES
from tiltframe.model.continuous import EMIT_VERSION, ContinuousQuery, Emit, EmitPolicy
from tiltframe.model.expressions import Attr
from tiltframe.model.streams import StreamDef
from tiltframe.model.windows import Window

# Input columns besides keys and aggregate arguments (PySpark renames pandas columns that start with "_").
KIND = "tf_kind"  # "e" an event, "t" a clock tick
NOW = "tf_now"  # tick: processing time
MAX_TS = "tf_max_ts"  # tick: greatest event time of the query so far
RAW = "tf_raw"
REASON = "tf_reason"  # why an event could not be typed (null when fine)
IDENT = "tf_ident"  # AFTER KEY EXPIRE: the IDENTIFIED BY column in epoch ms
FLAG = "tf_flag"  # sessions with start and end conditions: 1 the event meets the start, 2 the end (both: 3)
# Output columns besides the query's outputs.
OUT_KIND = "tf_out"  # a row kind (ROW_KINDS), "late", "rejected", "unwindowed" or "max_ts"
#: Kinds of emitted rows: "row" always reaches the sink; a periodic row of a group with news is "period", of
#: a group without news "period?", which reaches the sink only in a micro-batch that also has a "period" row
#: (the query emits at a period where anything arrived, in any bucket: the driver decides, ``emitted_rows``).
ROW, PERIOD, PERIOD_IF = "row", "period", "period?"
ROW_KINDS = (ROW, PERIOD, PERIOD_IF)
EMITTED_AT = "tf_emit_time"
DELTA = "tf_delta"
#: The changelog's column as users see it (Timeplus's name): +1 an inserted row, -1 a retracted one.
CHANGELOG_DELTA = "_tp_delta"
# Bookkeeping columns of open groups, and how two rows of one group combine.
WS = "_ws"  # window_start as emitted
WE = "_we"  # window_end as emitted (time windows: when the window closes)
LAST = "_last_arrival"  # processing time of the group's last event (TIMEOUT)
DIRTY = "_dirty"  # events arrived since the group's last row
IMIN = "_imin"  # AFTER KEY EXPIRE: least and greatest IDENTIFIED BY value
IMAX = "_imax"
PIECE = "_piece"  # session segments: the start of the piece (window) they belong to
NEXT = "_next"  # session segments: the start of the group's piece after theirs (NaN: none yet)
FOLLOWED = "_followed"  # session pieces: a later event of the group closed them (their end is final)
END = "_end"  # bounded sessions: the time of the event that ended the session (NaN: none yet)
MEMBER = "_member"  # bounded sessions: the segment is aggregated into its session (not a left-out bound)
CLOSE = "_close"  # bounded sessions: the watermark at which the piece closes
BOOK = {
    WS: "min",
    WE: "max",
    LAST: "max",
    DIRTY: "any",
    IMIN: "min",
    IMAX: "max",
    PIECE: "max",
    NEXT: "max",
    END: "max",
    MEMBER: "any",
    FLAG: "max",
}
# Open sessions: start, last event time, last arrival.
SS = "_ss"
SL = "_sl"
# Rows last emitted: window start of the group then (to follow a session that moves), last values.
MWS = "_mws"
# PARTITION BY: a substream's greatest event time.
PMAX = "_pmax"

@dataclass(frozen=True)
class ProcessorConfig:
    query: ContinuousQuery
    layout: AggregationLayout
    output_names: tuple[str, ...]
    output_dtypes: dict[str, str]


class StepParts:
    """What the parts of one processor call (``emission.py``, ``windows/bounded_session_step.py``) read and call
    on ``step.Step``, which holds the state and defines these methods: declared once here."""

    config: ProcessorConfig
    query: ContinuousQuery
    window: Window
    emit: Emit
    layout: AggregationLayout
    keys: list[str]
    now: Any
    open: pd.DataFrame | None
    emitted: pd.DataFrame | None
    sessions: pd.DataFrame | None
    out: list[pd.DataFrame]

    def marks(self, frame: pd.DataFrame) -> np.ndarray | None:
        raise NotImplementedError

    def _merge(self, rows: pd.DataFrame) -> pd.DataFrame:
        raise NotImplementedError

    def _crossed(self, interval: int | None) -> bool:
        raise NotImplementedError

    def _groups(self) -> pd.DataFrame:
        raise NotImplementedError

    def _emit_rows(self, groups: pd.DataFrame, *, only_changes: bool, kinds: np.ndarray) -> None:
        raise NotImplementedError


def extra_columns(query: ContinuousQuery, stream: StreamDef) -> list[Column]:
    """Spark columns of the events the processor needs besides keys and aggregate arguments: the
    ``IDENTIFIED BY`` column of AFTER KEY EXPIRE in epoch milliseconds, a bounded session's flags."""
    conditions, emit = query.window.conditions, query.emit
    if conditions is not None:
        start, end = (F.coalesce(to_column(c, stream), F.lit(False)) for c in conditions)
        return [(F.when(start, 1).otherwise(0) + F.when(end, 2).otherwise(0)).alias(FLAG)]
    if emit.policy is not EmitPolicy.AFTER_KEY_EXPIRE:
        return []
    name = emit.identified_by or query.window.time_attribute
    if name is None:
        msg = "EMIT AFTER KEY EXPIRE needs IDENTIFIED BY or an event-time attribute"
        raise ValueError(msg)
    return [event_time_ms(F.col(name), SPARK_TYPES[stream.attribute(name).type]).alias(IDENT)]


def version_outputs(query: ContinuousQuery) -> tuple[str, ...]:
    """The outputs that are ``emit_version()``: numbered by the driver, not part of a row's values."""
    return tuple(n for n, e in query.outputs if isinstance(e, Attr) and e.name == EMIT_VERSION)


def text_of(numbers: np.ndarray) -> np.ndarray:
    """Whole numbers as text, for building reasons element-wise with ``+``."""
    return numbers.astype(str).astype(object)


def maximum(*values: Any) -> int | None:
    present = [int(v) for v in values if v is not None and not pd.isna(v)]
    return max(present) if present else None


def is_empty(frame: pd.DataFrame | None) -> bool:
    return frame is None or frame.empty


def hits(frame: pd.DataFrame, other: pd.DataFrame, on: list[str]) -> np.ndarray:
    """Which rows of ``frame`` have their ``on`` values among the rows of ``other`` (nulls match nulls)."""
    if frame.empty or other.empty:
        return np.zeros(len(frame), dtype=bool)
    marks = other[on].drop_duplicates().assign(_hit=True)
    return frame[on].merge(marks, on=on, how="left")["_hit"].notna().to_numpy()


