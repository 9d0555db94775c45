"""Continuous queries (streaming SQL with windows and EMIT policies) on Spark Structured Streaming."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tiltframe import lazy

if TYPE_CHECKING:
    from tiltframe.engine.continuous.query import ContinuousRun, ContinuousTotals

__all__ = ["ContinuousRun", "ContinuousTotals"]

# Imported when first used: the processor and the clock's data source, which Spark's Python workers import,
# need neither the query's plan nor the store (tiltframe.lazy).
__getattr__, __dir__ = lazy.exports(__name__, lazy.names_in("tiltframe.engine.continuous.query", __all__))
