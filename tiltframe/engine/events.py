"""From raw source rows to typed events, with a reason for every event that cannot be aggregated.

Sources deliver attributes as strings (CSV, JSON) or typed (Parquet, caller DataFrames).  Each declared
attribute is converted with ``try_cast`` (never failing the batch, whatever ANSI mode says); the first
problem of a row, in attribute order, becomes its rejection reason, field and value.  A missing (null)
value is a problem only for attributes the aggregation uses.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from tiltframe.spec.model import AttrType, StreamDef
from tiltframe.timeutil.parse import FORMATS

REASON = "_reject_reason"
FIELD = "_reject_field"
VALUE = "_reject_value"
RAW = "_raw"
EVENT_TS = "_event_ts"
CORRUPT = "_corrupt_record"
#: Where a row sits in arrival order, set by file sources: (file modification time, path, block start).
ARRIVAL_PART = "_tiltframe_arrival_part"

SPARK_TYPES: dict[AttrType, T.DataType] = {
    AttrType.STRING: T.StringType(),
    AttrType.INT: T.IntegerType(),
    AttrType.LONG: T.LongType(),
    AttrType.FLOAT: T.FloatType(),
    AttrType.DOUBLE: T.DoubleType(),
    AttrType.BOOL: T.BooleanType(),
    AttrType.BINARY: T.BinaryType(),
}

_MIN_TS = -62_135_596_800_000  # 0001-01-01 00:00:00 GMT
_MAX_TS = 253_402_300_799_999  # 9999-12-31 23:59:59.999 GMT
_TS_OFFSET = "yyyy-MM-dd HH:mm:ss XXX"


def parse_event_time(col: Column, attr_type: AttrType) -> Column:
    """Epoch ms of an event-time attribute: a long, or a string in one of the two seed formats."""
    if attr_type is AttrType.LONG:
        return col.cast("long")
    text = F.trim(col.cast("string"))
    with_offset = F.try_to_timestamp(text, F.lit(_TS_OFFSET))
    # The GMT form is parsed with an explicit +00:00 so the session time zone plays no part.
    gmt = F.when(
        F.length(text) == 19, F.try_to_timestamp(F.concat(text, F.lit(" +00:00")), F.lit(_TS_OFFSET))
    )
    return F.unix_millis(F.coalesce(with_offset, gmt))


def _convert(col: Column, source_type: T.DataType, target: AttrType) -> Column:
    """``col`` as ``target``; null where the value does not convert."""
    spark_type = SPARK_TYPES[target]
    if source_type == spark_type:
        return col
    if target is AttrType.STRING:
        return col.cast("string")
    if target is AttrType.INT:
        text = isinstance(source_type, T.StringType)
        as_long = F.trim(col).try_cast("long") if text else col.try_cast("long")
        return F.when(as_long.between(-(2**31), 2**31 - 1), as_long.cast("int"))
    if isinstance(source_type, T.StringType):
        col = F.trim(col)
    return col.try_cast(spark_type)


def type_events(
    raw: DataFrame,
    stream: StreamDef,
    *,
    required: Iterable[str],
    time_attribute: str | None,
    arrival_ms: int,
) -> DataFrame:
    """Typed attributes plus ``_event_ts`` (epoch ms) and the rejection columns (null when fine).

    ``raw`` must have one column per declared attribute (any type; missing ones are added as nulls) and
    may have ``_corrupt_record`` (a line that could not be read at all).  ``_raw`` keeps the event as
    JSON text for the rejected-events table.

    The columns come from ``_typing_columns``, built once per input schema and kept for the process:
    building a column costs a Py4J round trip per function call, and rebuilt for every micro-batch the
    typing columns took a tenth of a second or more, a good part of a small batch (a quarter of a second
    the first time).  Columns are unresolved expressions in the process's one JVM, so one set serves
    every batch, run and session of the process.
    """
    attributes, rest = _typing_columns(raw.schema, stream, frozenset(required), time_attribute)
    # Without a time attribute the event time is the batch's arrival time, the one per-batch column.
    event_ts = [] if time_attribute is not None else [F.lit(arrival_ms).cast("long").alias(EVENT_TS)]
    return raw.select(*attributes, *event_ts, *rest)


@functools.lru_cache(maxsize=256)
def _typing_columns(
    schema: T.StructType, stream: StreamDef, required: frozenset[str], time_attribute: str | None
) -> tuple[tuple[Column, ...], tuple[Column, ...]]:
    """The typed attributes, and the columns after ``EVENT_TS`` (which leads them when the stream has a
    time attribute; otherwise the caller puts the arrival time between the two)."""
    present = {f.name: f.dataType for f in schema.fields}
    cols: dict[str, Column] = {}
    problems: list[tuple[Column, Column, Column, Column]] = []  # (condition, reason, field, value)
    if CORRUPT in present:
        bad = F.col(CORRUPT).isNotNull()
        problems.append((bad, F.lit("malformed record: cannot be read as a row of the stream"),
                         F.lit(None).cast("string"), F.col(CORRUPT)))
    for attr in stream.attributes:
        src_type = present.get(attr.name)
        src = F.col(attr.name) if src_type is not None else F.lit(None).cast("string")
        typed = _convert(src, src_type or T.StringType(), attr.type)
        # A column already of its type is passed through unaliased: the optimizer drops a self-alias in
        # some branches of a plan and keeps it in others, and then Spark cannot share their shuffles.
        cols[attr.name] = typed if src_type == SPARK_TYPES[attr.type] else typed.alias(attr.name)
        as_text = src.cast("string")
        if attr.name in required:
            reason = F.lit(f"missing field '{attr.name}'")
            problems.append((src.isNull(), reason, F.lit(attr.name), F.lit(None).cast("string")))
        if attr.name != time_attribute and src_type != SPARK_TYPES[attr.type]:  # else nothing to convert
            reason = F.concat(
                F.lit(f"field '{attr.name}': value '"), as_text, F.lit(f"' is not a {attr.type.value}")
            )
            problems.append((src.isNotNull() & typed.isNull(), reason, F.lit(attr.name), as_text))
    if time_attribute is not None:
        attr = stream.attribute(time_attribute)
        src_type = present.get(attr.name)
        src = F.col(attr.name) if src_type is not None else F.lit(None).cast("string")
        event_ts = parse_event_time(src if attr.type is AttrType.STRING else cols[attr.name], attr.type)
        reason = F.concat(
            F.lit(f"field '{attr.name}': value '"),
            src.cast("string"),
            F.lit(f"' is not a timestamp (expected {FORMATS})"),
        )
        problems.append((src.isNotNull() & event_ts.isNull(), reason, F.lit(attr.name), src.cast("string")))
        out_of_range = ~event_ts.between(_MIN_TS, _MAX_TS)
        reason = F.concat(
            F.lit(f"field '{attr.name}': value '"), src.cast("string"), F.lit("' is outside years 0001-9999")
        )
        problems.append((out_of_range, reason, F.lit(attr.name), src.cast("string")))
        leading = [event_ts.alias(EVENT_TS)]
    else:
        leading = []

    def first(index: int) -> Column:
        result = F.lit(None).cast("string")
        for cond, *outs in reversed(problems):
            result = F.when(cond, outs[index]).otherwise(result)
        return result

    raw_json = F.to_json(F.struct(*[F.col(n) for n in present if n not in (CORRUPT, ARRIVAL_PART)]))
    raw_text = F.coalesce(F.col(CORRUPT), raw_json) if CORRUPT in present else raw_json
    rest = [
        first(0).alias(REASON),
        first(1).alias(FIELD),
        first(2).alias(VALUE),
        raw_text.alias(RAW),
        *([F.col(ARRIVAL_PART)] if ARRIVAL_PART in present else []),
    ]
    return tuple(cols.values()), (*leading, *rest)
