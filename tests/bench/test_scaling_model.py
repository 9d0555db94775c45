"""The scaling model of ``bench/bench_scaling.py`` (docs/scaling.md) against brute force: calendar buckets
counted exactly, and expected rows per level against the distinct (key, bucket) pairs of generated events."""

from __future__ import annotations

import math
import sys
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import bench_scaling as model
import workload


def _ms(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp() * 1000)


def test_two_hours_from_23h_hold_two_buckets_of_every_calendar_level() -> None:
    spans = {level: model.bucket_spans(level, workload.DEFAULT_START_MS, 7_200_000) for level in model.LEVELS}
    assert spans == {"SECONDS": Counter({1_000: 7200}), "MINUTES": Counter({60_000: 120}),
                     "HOURS": Counter({3_600_000: 2}), "DAYS": Counter({3_600_000: 2}),
                     "MONTHS": Counter({3_600_000: 2}), "YEARS": Counter({3_600_000: 2})}


def test_partial_buckets_and_a_leap_day_are_counted_by_what_they_hold() -> None:
    start, span = _ms("2024-02-28T23:59:59.500"), 36 * 3_600_000
    assert model.bucket_spans("DAYS", start, span) == Counter({500: 1, 86_400_000: 1, 43_199_500: 1})
    assert model.bucket_spans("MONTHS", start, span) == Counter({86_400_500: 1, 43_199_500: 1})
    assert model.bucket_spans("SECONDS", start, span) == Counter({500: 2, 1_000: 36 * 3600 - 1})
    for level in model.LEVELS:
        assert sum(ms * n for ms, n in model.bucket_spans(level, start, span).items()) == span


def test_uniform_equal_buckets_give_the_closed_form() -> None:
    n, k, b = 1e9, 100_000, 86_400
    closed = k * b * -math.expm1(-n / (k * b))
    got = model.expected_rows(n, model.key_weights(k), Counter({1_000: b}), b * 1_000)
    assert got == pytest.approx(closed, rel=1e-6)


def _distinct(table: pd.DataFrame) -> dict[str, int]:
    """Distinct (symbol, bucket) pairs of each level (UTC), by brute force."""
    ts = table["timestamp"]
    when = pd.to_datetime(ts, unit="ms")
    buckets = {"SECONDS": ts // 1_000, "MINUTES": ts // 60_000, "HOURS": ts // 3_600_000, "DAYS": ts // 86_400_000,
               "MONTHS": when.dt.year * 12 + when.dt.month, "YEARS": when.dt.year}
    return {level: len(table[["symbol"]].assign(b=b).drop_duplicates()) for level, b in buckets.items()}


@pytest.mark.parametrize("zipf_s", [0.0, 1.1])
def test_expected_rows_match_the_generators_distinct_pairs(zipf_s: float) -> None:
    # Half an hour across a new year, from an instant no level's boundary: partial buckets at every level.
    w = workload.Workload(50_000, 100, 1800, start_ms=_ms("2023-12-31T23:45:00.250"), zipf_s=zipf_s)
    table, _ = workload.events(w)
    counted = _distinct(table.to_pandas())
    expected = model.model_rows(w.events, w.keys, w.start_ms, w.span_seconds * 1000, zipf_s)
    assert counted["SECONDS"] > 10_000  # sparse enough that the formula, not saturation, decides
    for level in model.LEVELS:
        assert counted[level] == pytest.approx(expected[level], rel=0.01), level
