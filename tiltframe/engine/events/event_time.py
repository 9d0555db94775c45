"""Event times to epoch milliseconds, as Spark columns, from whatever type a source gives them.

Text is read with ``tiltframe.timeutil.parse.TIME_PATTERN`` (Siddhi's forms and ISO-8601), so the engine
and the ``within`` bounds of queries accept the same strings.  Nothing here depends on the session time
zone: an instant (Spark ``TIMESTAMP``) is converted as it is, and a zone-less value (a string without an
offset, ``TIMESTAMP_NTZ``, ``DATE``) is read as GMT, as Siddhi reads ``yyyy-MM-dd HH:mm:ss``.

Speed matters here: the event time of every event of a text source goes through ``text_time_ms``.  Two
things made it cost several times the rest of a CSV file's typing (a run over ISO-8601 text 3.6x slower
than over epoch ms): a cast that fails throws an exception inside Spark (tens of microseconds each, and
``try_cast('2013-01-01T10:00:00Z' AS BIGINT)`` failed for every event before the text was tried), and the
general form took a regular expression's match for each of its eight parts.  So a text is cast to a long
only where it can be one, and the forms nearly every export writes (a full date and time with seconds, an
optional fraction and ``Z`` or ``±HH:MM``) are checked by one match and read by Spark's own cast; only the
other forms take the general path.  Both give the same instant for every text they accept
(tests/engine/events/test_event_time.py checks both against the Python parser of ``within`` bounds).
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from tiltframe.timeutil.parse import TIME_PATTERN

#: Spark's pattern for the canonical text ``_any_form_ms`` rewrites every accepted form into.
_CANONICAL = "yyyy-MM-dd HH:mm:ss.SSSSSSSSS XXX"
#: The common forms, a subset of ``TIME_PATTERN`` that Spark's cast to a timestamp reads as ``_any_form_ms``
#: does: date, ``T`` or a space, ``HH:mm:ss``, a fraction after a dot, then ``Z``, ``±HH:MM`` or no offset.
_COMMON = (r"^[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,9})?"
           r"(?:Z|[+-][0-9]{2}:[0-9]{2})?$")


def text_time_ms(text: Column) -> Column:
    """Epoch ms of a trimmed timestamp string in one of the accepted forms; null for anything else (the
    caller trims once for this and ``text_long``)."""
    # A common form ends in its offset (Z, or a sign six characters from the end) or has none: then GMT.
    zoned = text.endswith("Z") | F.substring(text, -6, 1).isin("+", "-")
    common = F.unix_millis(F.when(zoned, text).otherwise(F.concat(text, F.lit("Z"))).try_cast("timestamp"))
    return F.when(text.rlike(_COMMON), common).otherwise(_any_form_ms(text))


def _any_form_ms(text: Column) -> Column:
    """Epoch ms of a trimmed string of any form ``TIME_PATTERN`` accepts, rewritten into one canonical
    text and parsed with it; null for anything else."""

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


def text_long(text: Column) -> Column:
    """A trimmed text as a long where it is one (``"1704448800000"``, ``"-5"``, ``"+7"``); null otherwise.

    Only a text that could be a long is cast: a failing cast throws inside Spark, which costs tens of
    microseconds a row, and no long holds a dot, a colon or a minus after its first character."""
    inner_minus = F.instr(F.substring(text, 2, 1 << 30), "-")
    could_be = (F.instr(text, ".") == 0) & (F.instr(text, ":") == 0) & (inner_minus == 0)
    return F.when(could_be, text.try_cast("long"))


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
    if isinstance(source_type, T.DateType):
        return F.unix_date(col).cast("long") * 86_400_000
    if isinstance(source_type, T.TimestampNTZType):
        return text_time_ms(col.cast("string"))
    if isinstance(source_type, T.ByteType | T.ShortType | T.IntegerType | T.LongType):
        return col.cast("long")
    if isinstance(source_type, T.DecimalType | T.FloatType | T.DoubleType):
        return integral_long(col, source_type)
    if isinstance(source_type, T.StringType):
        text = F.trim(col)
        return F.coalesce(text_long(text), text_time_ms(text))
    return F.lit(None).cast("long")


def instant_text(col: Column) -> Column:
    """An instant as ISO-8601 text in GMT with milliseconds (``2024-01-05T10:00:00.000Z``), whatever the
    session time zone."""
    wall = F.convert_timezone(F.current_timezone(), F.lit("UTC"), col.cast("timestamp_ntz"))
    return F.date_format(wall, "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'")
