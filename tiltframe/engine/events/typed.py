"""From raw source rows to typed events, with a reason for every event that cannot be aggregated.

Sources deliver attributes as strings (CSV, JSON) or typed (Parquet, caller DataFrames).  Each declared
attribute is converted exactly or not at all (``try_cast``, never failing the batch whatever ANSI mode
says; 1.9 is not a long, 1.0 is); the first problem of a row, in attribute order, becomes its rejection
reason, field and value.  A missing value (null, or NaN for a floating-point attribute) rejects an event
only where it is a group-by key or the event time; aggregates skip it (``count()`` still counts the
event), as Siddhi's do.  Infinities are rejected: not every store can hold them, and a sum or mean of
them says nothing (docs/bad-input.md).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from tiltframe.engine.events.event_time import event_time_ms, instant_text, integral_long, text_long
from tiltframe.model.streams import Attribute, AttrType, StreamDef
from tiltframe.timeutil.parse import FORMATS

REASON = "_reject_reason"
FIELD = "_reject_field"
VALUE = "_reject_value"
RAW = "_raw"
EVENT_TS = "_event_ts"
CORRUPT = "_corrupt_record"
#: The first problem of a row as one struct (reason, field, value), taken apart into the three columns above.
PROBLEM = "_reject_problem"
_PROBLEM_TYPE = "struct<reason:string,field:string,value:string>"
#: A derived stream's rows (``engine.events.derived``) carry the problem (a ``PROBLEM`` struct) and the row as read
#: of the event they come from: that problem comes first, and the row stands for the event in the
#: rejected-events table.
PRIOR_PROBLEM = "_reject_prior"
PRIOR_RAW = "_reject_prior_raw"
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
_FRACTIONAL = (T.FloatType, T.DoubleType, T.DecimalType)
_TIMES = (T.TimestampType, T.TimestampNTZType, T.DateType)
#: Beyond 2^53 a double no longer holds every integer: a text such as "12345678901234567.0" is a long only
#: when written without the fraction.
_EXACT_DOUBLE = 2**53


def _as_long(col: Column, source_type: T.DataType) -> Column:
    """``col`` as a long when its value is exactly one: whole numbers only (1.0, "1e3"), never 1.9
    truncated; instants and dates as epoch ms."""
    if isinstance(source_type, T.StringType):
        text = F.trim(col)
        number = text.try_cast("double")
        return F.coalesce(text_long(text),
                          F.when(F.abs(number) <= _EXACT_DOUBLE, integral_long(number, T.DoubleType())))
    if isinstance(source_type, _FRACTIONAL):
        return integral_long(col, source_type)
    if isinstance(source_type, _TIMES):
        return event_time_ms(col, source_type)
    return col.try_cast("long")


def _convert(col: Column, source_type: T.DataType, target: AttrType) -> Column:
    """``col`` as ``target``; null where the value does not convert exactly."""
    spark_type = SPARK_TYPES[target]
    if source_type == spark_type:
        return col
    if target is AttrType.STRING:
        return instant_text(col) if isinstance(source_type, T.TimestampType) else col.cast("string")
    if target is AttrType.LONG:
        return _as_long(col, source_type)
    if target is AttrType.INT:
        as_long = _as_long(col, source_type)
        return F.when(as_long.between(-(2**31), 2**31 - 1), as_long.cast("int"))
    if isinstance(source_type, T.StringType):
        col = F.trim(col)
    return col.try_cast(spark_type)


#: The prefix under which the first projection keeps a source value it converted: the second one quotes it
#: in reasons and in the row as read.
_SRC = "_tiltframe_src_"
#: Whether a row is a malformed record, found in the first projection (it reads a data column, below).
_MALFORMED = "_tiltframe_malformed"
#: Source columns that are no part of the event as read.
_NOT_RAW = frozenset({CORRUPT, ARRIVAL_PART, PRIOR_PROBLEM, PRIOR_RAW})


def _problems(
    src: Column, typed: Column, converted: bool, attr: Attribute, *, required: bool
) -> tuple[Column, list[tuple[Column, Column, Column, Column]]]:
    """One attribute's final value and its problems ``(condition, reason, field, value)``, in the order they
    are reported, from its source value ``src`` and its conversion ``typed`` (computed once, before).  A
    missing value (null, or NaN for a floating-point attribute) is a problem only where ``required`` (a
    group-by key); elsewhere aggregates skip it, as Siddhi's do."""
    as_text = src.cast("string")
    field = F.lit(attr.name)
    problems = []

    def said(what: str) -> Column:
        return F.concat(F.lit(f"field '{attr.name}': value '"), as_text, F.lit(f"' {what}"))

    if required:
        problems.append((src.isNull(), F.lit(f"missing field '{attr.name}'"), field, F.lit(None).cast("string")))
    if converted:
        problems.append((src.isNotNull() & typed.isNull(), said(f"is not a {attr.type.value}"), field, as_text))
    if attr.type is AttrType.STRING:
        problems.append((F.instr(typed, "\u0000") > 0,
                         said("holds a NUL character (U+0000), which PostgreSQL cannot store"), field, as_text))
    if attr.type in (AttrType.FLOAT, AttrType.DOUBLE):
        problems.append((F.abs(typed) == float("inf"), said(f"is not a finite {attr.type.value}"), field, as_text))
        if required:
            problems.append((F.isnan(typed), said("is not a number (a group-by key cannot be missing)"), field,
                             as_text))
        typed = F.when(~F.isnan(typed), typed).alias(attr.name)  # NaN is a missing value, as null is
    return typed, problems


def _time_value(src: Column, source_type: T.DataType, attr: Attribute) -> Column | None:
    """The event-time attribute's own value, where it is no event time as ``EVENT_TS`` holds it: the text
    for a string (an instant as ISO-8601 GMT text); None for a long (``EVENT_TS`` itself)."""
    if source_type == SPARK_TYPES[attr.type]:
        return src
    if attr.type is AttrType.LONG:
        return None
    return _convert(src, source_type, attr.type)


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

    Two projections: the first converts each value (and the event time) once, the second finds the first
    problem of a row on the converted values.  In one projection every conversion ran twice or three times
    (for the value, then for each condition that tests it: Spark shares no expression inside the
    conditional branches of a CASE WHEN), and a CSV file's typing cost several times its reading; Spark
    keeps the two apart, as it never collapses projections that would repeat an expensive expression.

    The columns come from ``_typing_columns``, built once per input schema and kept for the process:
    building a column costs a Py4J round trip per function call, and rebuilt for every micro-batch the
    typing columns took a tenth of a second or more, a good part of a small batch (a quarter of a second
    the first time).  Columns are unresolved expressions in the process's one JVM, so one set serves
    every batch, run and session of the process.
    """
    first, attributes, rest = _typing_columns(raw.schema, stream, frozenset(required), time_attribute)
    # Without a time attribute the event time is the batch's arrival time, the one per-batch column.
    event_ts = [] if time_attribute is not None else [F.lit(arrival_ms).cast("long").alias(EVENT_TS)]
    typed = raw.select(*first).select(*attributes, *event_ts, *rest)
    # The problem is found once, as a struct, and taken apart after: three CASE WHENs over every condition
    # made Java code generation pass its limits once stream queries type rows twice.
    names = [c for c in typed.columns if c != PROBLEM]
    at = names.index(RAW)
    parts = [F.col(PROBLEM).getField(f).alias(c) for f, c in (("reason", REASON), ("field", FIELD), ("value", VALUE))]
    return typed.select(*names[:at], *parts, *names[at:])


@functools.lru_cache(maxsize=256)
def _typing_columns(
    schema: T.StructType, stream: StreamDef, required: frozenset[str], time_attribute: str | None
) -> tuple[tuple[Column, ...], tuple[Column, ...], tuple[Column, ...]]:
    """The first projection's columns; the second's typed attributes, and its columns after ``EVENT_TS``
    (which leads them when the stream has a time attribute; otherwise the caller puts the arrival time
    between the two)."""
    present = {f.name: f.dataType for f in schema.fields}
    first: dict[str, Column] = {}
    cols: dict[str, Column] = {}
    problems: list[tuple[Column, Column, Column, Column]] = []  # (condition, reason, field, value)
    #: Each source value as the second projection reads it: under ``_SRC`` where its name holds a conversion.
    source = {name: F.col(name) for name in present}
    for name in (CORRUPT, ARRIVAL_PART, PRIOR_PROBLEM, PRIOR_RAW):
        if name in present:
            first[name] = F.col(name)

    def convert(name: str, value: Column, src: Column | None) -> None:
        """``name`` is ``value`` after the first projection; its source value (if any) kept apart."""
        first[name] = value.alias(name)
        if src is not None:
            first[_SRC + name] = src.alias(_SRC + name)
            source[name] = F.col(_SRC + name)

    if CORRUPT in present:
        bad = F.col(CORRUPT).isNotNull()
        data = next((a.name for a in stream.attributes if a.name in present), None)
        if data is not None:
            # Spark refuses to scan a JSON or CSV file for its corrupt-record column alone, which is all an
            # aggregation of no attribute (``count()``) would read: a term that always holds keeps one data
            # column in the plan.
            bad = bad & (F.length(F.concat(F.coalesce(F.col(data).cast("string"), F.lit("")), F.lit("."))) > 0)
        first[_MALFORMED] = bad.alias(_MALFORMED)
        problems.append((F.col(_MALFORMED), F.lit("malformed record: cannot be read as a row of the stream"),
                         F.lit(None).cast("string"), F.col(CORRUPT)))
    for attr in stream.attributes:
        src_type = present.get(attr.name)
        src = F.col(attr.name) if src_type is not None else F.lit(None).cast("string")
        if attr.name == time_attribute:
            value = _time_value(src, src_type or T.StringType(), attr)
            if value is None:
                cols[attr.name] = F.col(EVENT_TS).alias(attr.name)
                if src_type is not None:
                    first[attr.name] = src  # kept for the reasons and the row as read
            elif value is src and src_type is not None:
                first[attr.name] = src
                cols[attr.name] = F.col(attr.name)
            else:
                convert(attr.name, value, src if src_type is not None else None)
                cols[attr.name] = F.col(attr.name)
            continue
        typed = _convert(src, src_type or T.StringType(), attr.type)
        converted = typed is not src
        if src_type is None:
            first[attr.name] = typed.alias(attr.name)
        elif converted:
            convert(attr.name, typed, src)
        else:
            first[attr.name] = src
        value, attr_problems = _problems(source.get(attr.name, src) if src_type is not None else src,
                                         F.col(attr.name), converted, attr, required=attr.name in required)
        problems.extend(attr_problems)
        # A column already of its type is passed through unaliased: the optimizer drops a self-alias in
        # some branches of a plan and keeps it in others, and then Spark cannot share their shuffles.
        cols[attr.name] = value
    if time_attribute is not None:
        attr = stream.attribute(time_attribute)
        src_type = present.get(attr.name)
        src = F.col(attr.name) if src_type is not None else F.lit(None).cast("string")
        first[EVENT_TS] = event_time_ms(src, src_type or T.StringType()).alias(EVENT_TS)
        event_ts = F.col(EVENT_TS)
        kept = source[attr.name] if src_type is not None else src
        as_text = kept.cast("string")
        problems.append((kept.isNull(), F.lit(f"missing field '{attr.name}'"), F.lit(attr.name),
                         F.lit(None).cast("string")))
        reason = F.concat(F.lit(f"field '{attr.name}': value '"), as_text,
                          F.lit(f"' is not a timestamp (expected {FORMATS})"))
        problems.append((event_ts.isNull(), reason, F.lit(attr.name), as_text))
        out_of_range = ~event_ts.between(_MIN_TS, _MAX_TS)
        reason = F.concat(F.lit(f"field '{attr.name}': value '"), as_text, F.lit("' is outside years 0001-9999"))
        problems.append((out_of_range, reason, F.lit(attr.name), as_text))
        leading = [event_ts]
    else:
        leading = []

    found = [F.col(PRIOR_PROBLEM)] if PRIOR_PROBLEM in present else []
    found += [F.when(cond, F.struct(reason.alias("reason"), field.alias("field"), value.alias("value")))
              for cond, reason, field, value in problems]
    problem = F.coalesce(*found) if found else F.lit(None)
    for name in present:  # source columns of no attribute are part of the row as read
        if name not in _NOT_RAW and name not in first and _SRC + name not in first:
            first[name] = F.col(name)
    raw_json = F.to_json(F.struct(*[source[n].alias(n) for n in present if n not in _NOT_RAW]))
    raw_text = F.coalesce(F.col(CORRUPT), raw_json) if CORRUPT in present else raw_json
    if PRIOR_RAW in present:
        raw_text = F.col(PRIOR_RAW)
    rest = [
        problem.cast(_PROBLEM_TYPE).alias(PROBLEM),
        raw_text.alias(RAW),
        *([F.col(ARRIVAL_PART)] if ARRIVAL_PART in present else []),
    ]
    return tuple(first.values()), tuple(cols.values()), (*leading, *rest)
