"""Event times to epoch milliseconds, as Spark columns, from whatever type a source gives them.

Text is read with ``tiltframe.timeutil.parse.TIME_PATTERN`` (Siddhi's forms and ISO-8601), so the engine
and the ``within`` bounds of queries accept the same strings.  Nothing here depends on the session time
zone: an instant (Spark ``TIMESTAMP``) is converted as it is, and a zone-less value (a string without an
offset, ``TIMESTAMP_NTZ``, ``DATE``) is read as GMT, as Siddhi reads ``yyyy-MM-dd HH:mm:ss``.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from tiltframe.timeutil.parse import TIME_PATTERN

#: Spark's pattern for the canonical text ``text_time_ms`` rewrites every accepted form into.
_CANONICAL = "yyyy-MM-dd HH:mm:ss.SSSSSSSSS XXX"


def text_time_ms(text: Column) -> Column:
    """Epoch ms of a timestamp string in one of the accepted forms; null for anything else."""
    text = F.trim(text)

    def group(i: int, default: str | None = None) -> Column:
        found = F.regexp_extract(text, TIME_PATTERN, i)
        return found if default is None else F.when(found == "", F.lit(default)).otherwise(found)

    zone = group(8)
    digits = F.regexp_replace(zone, ":", "")
    offset = F.when((zone == "") | (F.upper(zone) == "Z"), F.lit("+00:00")).otherwise(
        F.concat(F.substring(digits, 1, 3), F.lit(":"), F.when(F.length(digits) == 5, F.substring(digits, 4, 2))
                 .otherwise(F.lit("00")))
    )
    canonical = F.concat(
        group(1), F.lit("-"), group(2), F.lit("-"), group(3), F.lit(" "),
        group(4, "00"), F.lit(":"), group(5, "00"), F.lit(":"), group(6, "00"), F.lit("."),
        F.rpad(group(7), 9, "0"), F.lit(" "), offset,
    )
    return F.unix_millis(F.try_to_timestamp(canonical, F.lit(_CANONICAL)))


def integral_long(col: Column, source_type: T.DataType) -> Column:
    """``col``, a fractional or decimal number, as a long when it is a whole number within a long's range;
    null otherwise (never truncated: 1.9 is not the long 1)."""
    whole = col == F.floor(col)
    if isinstance(source_type, T.FloatType | T.DoubleType):
        whole = ~F.isnan(col) & whole  # Spark's NaN equals itself
    return F.when(whole, col.try_cast("long"))


def event_time_ms(col: Column, source_type: T.DataType) -> Column:
    """Epoch ms of an event-time value of ``source_type``: an instant, a zone-less date-time or date (GMT),
    a whole number of epoch milliseconds, or a string holding either."""
    if isinstance(source_type, T.TimestampType):
        return F.unix_millis(col)
    if isinstance(source_type, T.TimestampNTZType | T.DateType):
        return text_time_ms(col.cast("string"))
    if isinstance(source_type, T.ByteType | T.ShortType | T.IntegerType | T.LongType):
        return col.cast("long")
    if isinstance(source_type, T.DecimalType | T.FloatType | T.DoubleType):
        return integral_long(col, source_type)
    if isinstance(source_type, T.StringType):
        text = F.trim(col)
        return F.coalesce(text.try_cast("long"), text_time_ms(text))
    return F.lit(None).cast("long")


def instant_text(col: Column) -> Column:
    """An instant as ISO-8601 text in GMT with milliseconds (``2024-01-05T10:00:00.000Z``), whatever the
    session time zone."""
    wall = F.convert_timezone(F.current_timezone(), F.lit("UTC"), col.cast("timestamp_ntz"))
    return F.date_format(wall, "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'")
