"""The CLI's JSON: whatever numbers a store or pandas hands back, the output is plain JSON."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest

from tiltframe.retrieval.formats import to_json


def test_decimals_and_numpy_scalars_become_plain_numbers() -> None:
    doc = {
        "events_read": Decimal("5"),  # COUNT/SUM on PostgreSQL and MariaDB come back as Decimal
        "average": Decimal("2.5"),
        "rows": np.int64(3),
        "share": np.float64(0.25),
        "flag": np.bool_(True),
        "nothing": np.float64("nan"),
        "when": datetime(2024, 1, 1, tzinfo=UTC),
        "day": date(2024, 1, 2),
        "raw": b"\x01\xff",
        "where": Path("/data/tiltframe.db"),
        "nested": [{"n": Decimal("1E+3")}, (Decimal("-7"),)],
    }
    assert json.loads(to_json(doc)) == {
        "events_read": 5, "average": 2.5, "rows": 3, "share": 0.25, "flag": True, "nothing": None,
        "when": "2024-01-01T00:00:00+00:00", "day": "2024-01-02", "raw": "01ff", "where": "/data/tiltframe.db",
        "nested": [{"n": 1000}, [-7]],
    }
    assert '"events_read": 5,' in to_json(doc)  # an integer, not 5.0


def test_non_finite_decimals_and_unknown_types() -> None:
    assert json.loads(to_json([Decimal("NaN"), Decimal("Infinity")])) == [None, "Infinity"]
    with pytest.raises(TypeError, match="object is not JSON serializable"):
        to_json(object())


def test_non_finite_floats() -> None:
    assert json.loads(to_json({"a": [float("nan"), float("inf"), -float("inf"), 1.5]})) == {
        "a": [None, "Infinity", "-Infinity", 1.5]}
