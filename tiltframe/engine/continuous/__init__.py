"""Continuous queries (streaming SQL with windows and EMIT policies) on Spark Structured Streaming."""

from __future__ import annotations

from tiltframe.engine.continuous.query import ContinuousRun, ContinuousTotals

__all__ = ["ContinuousRun", "ContinuousTotals"]
