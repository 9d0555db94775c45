"""Records held as text in a column of any DataFrame (Kafka's ``value``, a socket's or a text file's lines),
parsed into a stream's attributes so that the run types and rejects them as it does file rows.

Parsing reads every attribute as a string, as the file source reads JSON and CSV, and marks a record that
cannot be read at all in ``_corrupt_record``; ``tiltframe.engine.events.typed`` then does the typing and the
rejection reasons, the one typing path of every source (docs/kafka.md).  A column of the DataFrame (Kafka's
``timestamp``) can stand for an attribute, typically the event time.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from tiltframe.engine.events.typed import CORRUPT
from tiltframe.engine.inputs.file_reads import text_schema
from tiltframe.errors import UsageError, unknown
from tiltframe.model.streams import StreamDef

TEXT_FORMATS = ("json", "csv")


def parse_records(
    df: DataFrame,
    stream: StreamDef,
    *,
    column: str = "value",
    format: str = "json",
    columns: Sequence[str] | None = None,
    attributes_from: Mapping[str, str] | None = None,
    options: Mapping[str, str] | None = None,
) -> DataFrame:
    """``df`` (streaming or not) as rows of ``stream``: one string column per attribute parsed from the text
    in ``column`` (a JSON object, or a CSV line), and ``_corrupt_record`` holding the text of a record that
    cannot be read (not JSON, not an object, too few or too many CSV fields, empty).

    ``columns``: the order of a CSV line's fields (default: the stream's attributes).  ``attributes_from``:
    attributes taken from another column of ``df`` instead of the text, e.g. ``{"ts": "timestamp"}`` for
    Kafka's record time as the event time (a TIMESTAMP column is the instant it is).  ``options``: more of
    Spark's JSON / CSV options (``sep``, ``quote``, ...).
    """
    if format not in TEXT_FORMATS:
        msg = f"parse_records: {unknown('format', format, TEXT_FORMATS)}"
        raise UsageError(msg)
    fields = {f.name: f.dataType for f in df.schema.fields}
    if column not in fields:
        msg = f"parse_records: the DataFrame has no column '{column}' (it has {', '.join(fields)})"
        raise UsageError(msg)
    taken = dict(attributes_from or {})
    names = [a.name for a in stream.attributes]
    for attr, source in taken.items():
        if attr not in names:
            msg = f"parse_records: attributes_from: {unknown(f'attribute of stream {stream.name}', attr, names)}"
            raise UsageError(msg)
        if source not in fields:
            msg = f"parse_records: attributes_from {attr}: the DataFrame has no column '{source}'"
            raise UsageError(msg)
    order = list(columns) if columns is not None else names
    text = F.col(column).cast("string") if not isinstance(fields[column], T.StringType) else F.col(column)
    # CSV as RFC 4180 writes it (a doubled quote inside quotes, a backslash a character), as files are read.
    rfc4180 = {"escape": '"'} if format == "csv" else {}
    settings = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT, **rfc4180, **(options or {})}
    if format == "json":
        parsed = F.from_json(text, text_schema(names), settings)
    else:
        parsed = F.from_csv(text, text_schema(order).simpleString(), settings)
    # A null or blank record is no row either.
    blank = text.isNull() | (F.trim(text) == "")
    corrupt = F.when(blank, F.coalesce(text, F.lit(""))).otherwise(parsed[CORRUPT])
    record = df.select(parsed.alias("_record"), corrupt.alias(CORRUPT),
                       *[F.col(source).alias(f"_from_{attr}") for attr, source in taken.items()])
    out = [F.col(f"_from_{a}").alias(a) if a in taken
           else F.col("_record")[a].alias(a) if a in order
           else F.lit(None).cast("string").alias(a) for a in names]
    return record.select(*out, F.col(CORRUPT))
