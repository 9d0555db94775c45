"""The events of a stream that plain stream queries write (``from S[filter] select ... insert into T``),
made in Spark from the rows of the input stream they come from.

Each query of the chain types its source's rows, keeps those its filter passes, and computes the target's
attributes; a row of the source that cannot be typed goes on with its problem and its row as read
(``events.PRIOR_PROBLEM``, ``events.PRIOR_RAW``), so whatever reads the target (an aggregation, a
continuous query) rejects and records it as it would a row of its own, under the first problem found.  A
row the filter leaves out is no event of the target.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from tiltframe.engine.events.spark_expressions import to_column
from tiltframe.engine.events.typed import ARRIVAL_PART, FIELD, PRIOR_PROBLEM, PRIOR_RAW, RAW, REASON, VALUE, type_events
from tiltframe.model.app import AppSpec
from tiltframe.model.expressions import Attr

__all__ = ["derive"]

#: Whether the query's filter passes a row (a column of one step, dropped after it).
_KEPT = "_tiltframe_stream_kept"


def derive(raw: DataFrame, app: AppSpec, stream: str, time_attribute: str | None = None) -> DataFrame:
    """``raw`` rows of ``stream``'s input stream as rows of ``stream`` (``raw`` itself for an input stream).

    ``time_attribute`` is the attribute of ``stream`` its reader takes as event time: where a query selects
    it as it is, the source's attribute is read as a time too (an ISO text for a long, as the reader would),
    as is a source's declared ``@eventTime``."""
    queries = app.chain(stream)
    times: list[str | None] = []
    for query in reversed(queries):
        expr = dict(query.outputs).get(time_attribute) if time_attribute is not None else None
        time_attribute = expr.name if isinstance(expr, Attr) else None
        times.insert(0, time_attribute)
    for query, time in zip(queries, times, strict=True):
        source = app.stream(query.source)
        typed = type_events(raw, source, required=(), time_attribute=time or source.event_time, arrival_ms=0)
        problem = F.struct(*(F.col(c).alias(f) for c, f in ((REASON, "reason"), (FIELD, "field"), (VALUE, "value"))))
        # The row's problem is one large expression; Spark would copy it into the filter below (pushed down
        # through this step) and the generated code would pass the JVM's 64 KB a method.  A non-deterministic
        # term (always true) keeps the filter above this step, where it reads the computed column.
        made = typed.select(
            *(to_column(expr, source).alias(name) for name, expr in query.outputs),
            F.when(F.col(REASON).isNotNull() & (F.spark_partition_id() >= 0), problem).alias(PRIOR_PROBLEM),
            F.col(RAW).alias(PRIOR_RAW),
            *([F.col(ARRIVAL_PART)] if ARRIVAL_PART in typed.columns else []),
            (F.coalesce(to_column(query.where, source), F.lit(False)) if query.where is not None
             else F.lit(True)).alias(_KEPT),
        )
        # A row with a problem goes on whatever the filter says: its reader rejects and records it.
        raw = made.where(F.col(PRIOR_PROBLEM).isNotNull() | F.col(_KEPT)).drop(_KEPT)
    return raw
