"""Long sums that leave a long's range: stopped in Spark whatever ANSI mode says, explained on the driver.

A wrapped sum is a silently wrong total, so a sum of long values never wraps: its Spark aggregate fails the
job (``aggregates.targets.in_spark.checked_sum``).  The pipeline then finds which key and bucket overflowed
(``explain_overflow``, a second job run only on that failure) and says so in one clear error.
"""

from __future__ import annotations

import functools
import operator

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from tiltframe.aggregates.layout import AggregationLayout
from tiltframe.aggregates.states import LONG_MAX, Build
from tiltframe.aggregates.targets.in_spark import OVERFLOW
from tiltframe.engine.events.buckets import bucket_start
from tiltframe.engine.events.spark_expressions import to_column
from tiltframe.engine.events.typed import EVENT_TS, REASON
from tiltframe.timeutil.parse import format_ts

#: Spark's own error for an arithmetic overflow in ANSI mode.
ANSI_OVERFLOW = "ARITHMETIC_OVERFLOW"


def ansi_enabled() -> bool:
    """Whether the active session's arithmetic fails on overflow (Spark 4's default) rather than wraps."""
    session = SparkSession.getActiveSession()
    return session is not None and str(session.conf.get("spark.sql.ansi.enabled", "false")).lower() == "true"


def is_overflow(exc: BaseException) -> bool:
    text = str(exc)
    return OVERFLOW in text or ANSI_OVERFLOW in text


def explain_overflow(events: DataFrame, layout: AggregationLayout) -> str | None:
    """Which sum of which key and bucket leaves a long's range in ``events`` (the typed events of the
    batch that failed): the first found, at the finest level where it happens; None when no sum does (the
    overflow was another one)."""
    keys = [k.name for k in layout.keys]
    sums = [s for s in layout.states if s.state.build is Build.SUM and s.type.is_integral and s.item.arg is not None]
    if not sums:
        return None
    valid = events.filter(F.col(REASON).isNull())
    for g in layout.spec.granularities:
        bucket = bucket_start(F.col(EVENT_TS), g, layout.zone).alias("bucket")
        totals = [F.sum(to_column(s.item.arg, layout.stream).cast("decimal(38,0)")).alias(s.name) for s in sums]
        grouped = valid.groupBy(bucket, *keys).agg(*totals)
        over = functools.reduce(operator.or_, [F.abs(F.col(s.name)) > LONG_MAX for s in sums])
        row = grouped.filter(over).limit(1).collect()
        if row:
            found = row[0]
            state = next(s for s in sums if found[s.name] is not None and abs(found[s.name]) > LONG_MAX)
            where = ", ".join(f"{k}={found[k]!r}" for k in keys) or "the aggregation's one group"
            return (
                f"{state.item.function}({state.item.arg}) as {state.item.alias} of aggregation {layout.name} "
                f"leaves the range of a long "
                f"(reaches {found[state.name]}) for {where} in the {g} bucket starting "
                f"{format_ts(found['bucket'], layout.zone)} ({layout.zone}); declare the attribute double, "
                f"or check the input"
            )
    return None
