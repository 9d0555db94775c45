"""Retrieval: ``within ... per ...`` over stored partial states, merged and finalized on read."""
from __future__ import annotations

from tiltframe.retrieval.retrieve import Resolved, resolve, retrieve

__all__ = ["Resolved", "resolve", "retrieve"]
