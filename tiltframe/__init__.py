"""tiltframe: incremental, multi-granularity aggregates of event streams on Apache Spark.

Define rollups in SiddhiQL (``define aggregation ... aggregate by ts every sec ... year``), stream events
through Spark into per-granularity tables, and query them back with ``within ... per ...``::

    import tiltframe as tf

    app = tf.load_app("trades.siddhi")
    tf.run(app, {"TradeStream": "data/trades/"})
    tf.query(app, 'from TradeAggregation within "2024-01-** **:**:**" per "days" select symbol, total')
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tiltframe import lazy
from tiltframe.errors import (
    DataError,
    DefinitionError,
    EventRejected,
    NotSupportedYet,
    QueryError,
    StoreError,
    TiltframeError,
    UsageError,
)

if TYPE_CHECKING:
    from tiltframe.api import (
        changed_files,
        compact,
        default_data_dir,
        insert,
        inspect,
        load_app,
        load_trickle,
        parse_records,
        purge,
        query,
        rejected,
        run,
        select,
        start,
        start_trickle,
    )
    from tiltframe.lifecycle import migrate, plan_changes, rebuild, verify

__all__ = [
    "DataError",
    "DefinitionError",
    "EventRejected",
    "NotSupportedYet",
    "QueryError",
    "StoreError",
    "TiltframeError",
    "UsageError",
    "changed_files",
    "compact",
    "default_data_dir",
    "insert",
    "inspect",
    "load_app",
    "load_trickle",
    "migrate",
    "parse_records",
    "plan_changes",
    "purge",
    "query",
    "rebuild",
    "rejected",
    "run",
    "select",
    "start",
    "start_trickle",
    "verify",
]

# The API (pandas, SQLAlchemy, Spark's session) is imported when first used: ``import tiltframe`` alone, as
# a Spark worker's import of one of the package's modules does, stays light (tiltframe.lazy).  The errors are
# imported above; of the other public names, the lifecycle's four, and the API's all the rest.
_LIFECYCLE = ("migrate", "plan_changes", "rebuild", "verify")
__getattr__, __dir__ = lazy.exports(__name__, {
    **lazy.names_in("tiltframe.api", [n for n in __all__ if n not in globals() and n not in _LIFECYCLE]),
    **lazy.names_in("tiltframe.lifecycle", _LIFECYCLE),
}, submodules=("api", "lifecycle"))
