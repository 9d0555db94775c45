"""Fixtures of the bad-input catalogue: a fresh store of each kind."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.bad_input.harness import store_url
from tests.servers import STORES


@pytest.fixture(params=STORES)
def store(request: pytest.FixtureRequest) -> Iterator[str | None]:
    """A fresh database on each of the three stores (None: the embedded SQLite store)."""
    with store_url(request.param) as url:
        yield url
