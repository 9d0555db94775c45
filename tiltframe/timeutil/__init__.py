"""Time zones, timestamp parsing and ``within`` ranges, in plain Python (retrieval and validation)."""

from __future__ import annotations

#: The readable twin of ``AGG_TIMESTAMP``: the bucket start in the aggregation's zone (its column is made by
#: ``timeutil.time_columns``, with pandas; the name is here, for validation, which needs no pandas).
AGG_TIME = "AGG_TIME"
