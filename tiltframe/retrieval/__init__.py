"""Retrieval: ``within ... per ...`` over stored partial states, merged and finalized on read."""
from __future__ import annotations

from typing import TYPE_CHECKING

from tiltframe import lazy

if TYPE_CHECKING:
    from tiltframe.retrieval.retrieve import Resolved, resolve, retrieve

__all__ = ["Resolved", "resolve", "retrieve"]

# Imported when first used: a Spark worker needs only the merges of pandas_states (tiltframe.lazy).
__getattr__, __dir__ = lazy.exports(__name__, lazy.names_in("tiltframe.retrieval.retrieve", __all__))
