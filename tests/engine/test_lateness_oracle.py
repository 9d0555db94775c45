"""Late-event policies against independent oracles (property-based): whatever the disorder and however
the events are split into micro-batches, and whether each batch is ordered in one partition (a small one) or
by its parts' ranks, the rollups equal a DuckDB GROUP BY over the events the policy
keeps (in the buckets it puts them), and the rejected-events table holds exactly the others."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tiltframe as tf
from tests.engine.test_oracle import ANCHORS
from tests.oracle import APP, check_against_oracle, run_batches

pytestmark = pytest.mark.slow
SETTINGS = settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

# (symbol, ms the stream advances before this event, share of the delay bound this event is late, price, qty)
step = st.tuples(
    st.sampled_from(["IBM", "WSO2", "ORCL"]),
    st.integers(0, 1500),
    st.sampled_from([0.0, 0.0, 0.3, 0.99, 1.0]) | st.floats(0, 1),
    st.integers(1, 100_000).map(lambda c: c / 100),
    st.integers(1, 1000),
)
cuts = st.lists(st.integers(0, 40), max_size=3)


def with_annotation(annotation: str) -> str:
    return APP.replace("define aggregation", f"{annotation}\ndefine aggregation")


def stream_of(steps: list[tuple], anchor: int, max_delay: int) -> pd.DataFrame:
    """Events in arrival order: a clock that moves forward, each event up to ``max_delay`` ms behind it."""
    clock = anchor + np.cumsum([s[1] for s in steps])
    ts = clock - np.array([int(s[2] * max_delay) for s in steps])
    events = pd.DataFrame({"symbol": [s[0] for s in steps], "price": [s[3] for s in steps],
                           "quantity": [s[4] for s in steps], "ts": ts})
    events["arrival"] = np.arange(len(events))
    return events


def recorded(app, data_dir: Path) -> pd.DataFrame:
    return tf.rejected(app, "TradeAggregation", data_dir=data_dir, limit=10_000)


@SETTINGS
@given(steps=st.lists(step, min_size=1, max_size=40), anchor=st.sampled_from(ANCHORS),
       allowed=st.sampled_from([1000, 4000]), beyond=st.booleans(), cuts=cuts, small=st.booleans())
def test_bounded_lateness(spark, tmp_path_factory, steps, anchor, allowed, beyond, cuts, small) -> None:
    events = stream_of(steps, anchor, allowed * (3 if beyond else 1))
    # The oracle's own running maximum, in arrival order.
    keep = (events["ts"] >= np.maximum.accumulate(events["ts"]) - allowed).to_numpy()
    if not beyond:
        assert keep.all()
    tmp = tmp_path_factory.mktemp("bounded")
    app, totals = run_batches(spark, tmp, events, [c for c in cuts if c < len(events)],
                              with_annotation(f"@allowedLateness('{allowed} ms')"), small=small)
    check_against_oracle(app, tmp, events[keep])
    assert (totals.events_aggregated, totals.events_rejected) == (keep.sum(), (~keep).sum())
    late = recorded(app, tmp)
    assert set(late["kind"]) <= {"too_late"}
    assert sorted(late["event_timestamp"]) == sorted(events["ts"][~keep])


def buffer_oracle(ts: pd.Series, size: int, drop: bool) -> tuple[np.ndarray, np.ndarray]:
    """Seed 000's rule event by event, on GMT seconds: (time to aggregate at or -1 if dropped, moved)."""
    latest = None
    at, moved = [], []
    for t in ts:
        latest = t if latest is None else max(latest, t)
        oldest = latest // 1000 * 1000 - size * 1000
        if t // 1000 * 1000 >= oldest:
            at.append(t)
            moved.append(False)
        else:
            at.append(-1 if drop else oldest)
            moved.append(not drop)
    return np.array(at), np.array(moved)


@SETTINGS
@given(steps=st.lists(step, min_size=1, max_size=40), anchor=st.sampled_from(ANCHORS),
       size=st.sampled_from([0, 1, 3]), drop=st.booleans(), cuts=cuts, small=st.booleans())
def test_siddhi_buffer(spark, tmp_path_factory, steps, anchor, size, drop, cuts, small) -> None:
    events = stream_of(steps, anchor, 6000)
    at, moved = buffer_oracle(events["ts"], size, drop)
    annotation = f"@IgnoreEventsOlderThanBuffer('{str(drop).lower()}')"
    if size:
        annotation = f"@BufferSize('{size}')\n{annotation}"
    tmp = tmp_path_factory.mktemp("buffer")
    app, totals = run_batches(spark, tmp, events, [c for c in cuts if c < len(events)], with_annotation(annotation),
                              small=small)
    kept = events[at >= 0].assign(ts=at[at >= 0])
    check_against_oracle(app, tmp, kept)
    dropped = at < 0
    assert (totals.events_aggregated, totals.events_moved, totals.events_rejected) == (
        len(events) - dropped.sum() - moved.sum(), moved.sum(), dropped.sum())
    rows = recorded(app, tmp)
    assert sorted(rows["event_timestamp"]) == sorted(events["ts"][dropped | moved])
    assert set(rows["kind"]) <= {"older_than_buffer" if drop else "moved"}
    if not drop:
        assert sorted(rows["adjusted_timestamp"]) == sorted(at[moved])
