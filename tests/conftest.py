"""Shared fixtures: one local SparkSession for the whole test session."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

os.environ.setdefault("TILTFRAME_SHUFFLE_PARTITIONS", "4")


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    from tiltframe.engine.session import get_session

    session = get_session("local[2]")
    yield session
    session.stop()
