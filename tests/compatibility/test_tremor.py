"""Tremor's own tilt-frame cases (tremor-rs/tremor-runtime, tests/queries/<case>/{query.trickle,in,out}), run
through tiltframe: each case is data, its query rewritten as tiltframe's SQL (``from in[w1, w2]`` becomes
``tumble(s, ts, [w1, w2])``) and its expected rows as Tremor's ``out`` file lists them.

Tremor's test harness gives event i the ingest time i (nanoseconds); here it is the event time ``ts = i``
(milliseconds, so ``interval = 4`` is ``interval 4ms``).  Step by step, each event is its own micro-batch as
Tremor takes one event at a time; one case also runs through ``tf.run`` on Spark.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import tiltframe as tf
from tests.engine.continuous_sim import Sim
from tiltframe.engine.sinks import CallbackSink

STREAM = "@eventTime('ts') define stream s (g long, num double, v long, ts long);\n"


def _alternating() -> list[dict[str, Any]]:
    """The ``in`` file of window_mixed_1 and window_mixed_2: groups 1 and 2 alternate, then two more of 1."""
    events = [{"g": 1, "num": 1.0} if i % 2 == 0 else {"g": 2, "num": 0.1} for i in range(20)]
    events += [{"g": 1, "num": 1.0}, {"g": 1, "num": 1.0}]
    return [{**e, "v": i, "ts": i} for i, e in enumerate(events)]


CASES: dict[str, dict[str, Any]] = {
    # tests/queries/window_mixed_1: interval 4, size 2, interval 8; the middle window can emit at once, the
    # others only when a later input's time passes their interval.
    "window_mixed_1": {
        "query": "select g, count() as count, sum(num) as sum from tumble(s, ts, [interval 4ms, size 2, interval 8ms]) "
        "group by g",
        "events": _alternating(),
        "expected": [
            (1, 2, 2.0), (2, 2, 0.2), (1, 2, 2.0), (1, 4, 4.0), (2, 2, 0.2), (2, 4, 0.4), (1, 2, 2.0),
            (2, 2, 0.2), (1, 2, 2.0), (1, 4, 4.0), (1, 4, 4.0), (2, 2, 0.2), (2, 4, 0.4), (2, 4, 0.4),
            (1, 2, 2.0),
        ],
    },
    # tests/queries/window_mixed_2: size 2 then interval 5; Tremor also collects the ingest times, here the
    # v column (equal to them).
    "window_mixed_2": {
        "query": "select g, count() as count, sum(num) as sum, group_array(v) as ingest "
        "from tumble(s, ts, [size 2, interval 5ms]) group by g",
        "events": _alternating(),
        "expected": [
            (1, 2, 2.0, [0, 2]), (2, 2, 0.2, [1, 3]), (1, 2, 2.0, [4, 6]), (2, 2, 0.2, [5, 7]),
            (1, 2, 2.0, [8, 10]), (1, 4, 4.0, [0, 2, 4, 6]), (2, 2, 0.2, [9, 11]), (2, 4, 0.4, [1, 3, 5, 7]),
            (1, 2, 2.0, [12, 14]), (2, 2, 0.2, [13, 15]), (1, 2, 2.0, [16, 18]), (1, 4, 4.0, [8, 10, 12, 14]),
            (2, 2, 0.2, [17, 19]), (2, 4, 0.4, [9, 11, 13, 15]), (1, 2, 2.0, [20, 21]),
        ],
    },
    # tests/queries/window_size_tilted: size 2 then size 3 over the numbers 0..19 (Tremor's last input, the
    # string "emit dummy", fills no window and is left out).
    "window_size_tilted": {
        "query": "select group_array(v) as values from tumble(s, ts, [size 2, size 3])",
        "events": [{"g": 0, "num": 0.0, "v": i, "ts": i} for i in range(20)],
        "expected": [
            ([0, 1],), ([2, 3],), ([4, 5],), ([0, 1, 2, 3, 4, 5],), ([6, 7],), ([8, 9],), ([10, 11],),
            ([6, 7, 8, 9, 10, 11],), ([12, 13],), ([14, 15],), ([16, 17],), ([12, 13, 14, 15, 16, 17],),
            ([18, 19],),
        ],
    },
}


def _row(row: dict[str, Any]) -> tuple[Any, ...]:
    """A row's values; lists (group_array keeps no order) sorted."""
    return tuple(sorted(v) if isinstance(v, list) else v for v in row.values())


@pytest.mark.parametrize("name", CASES)
def test_tremor_case_step_by_step(name: str) -> None:
    case = CASES[name]
    sim = Sim.of(STREAM + f"@info(name='q') {case['query']};", buckets=3)
    got: list[tuple[Any, ...]] = []
    for event in case["events"]:
        got += [_row(r) for r in sim.step([event], now=0)]
    assert got == case["expected"]


@pytest.mark.slow
def test_tremor_case_on_spark(tmp_path: Path, spark: Any) -> None:
    """window_mixed_1 through tf.run, all events in one micro-batch: each group's rows in Tremor's order."""
    case = CASES["window_mixed_1"]
    (tmp_path / "app.siddhi").write_text(STREAM + f"@info(name='q')\n{case['query']};\n")
    inbox = tmp_path / "in"
    inbox.mkdir()
    (inbox / "part-0.json").write_text("".join(json.dumps(e) + "\n" for e in case["events"]))
    got: list[pd.DataFrame] = []
    tf.run(tf.load_app(tmp_path / "app.siddhi"), {"s": str(inbox)}, data_dir=tmp_path / "data", spark=spark,
           outputs={"q": CallbackSink(lambda _s, rows: got.append(rows.copy()))})
    frame = pd.concat(got, ignore_index=True)
    rows = [(int(g), int(n), round(float(t), 6)) for g, n, t in frame[["g", "count", "sum"]].itertuples(index=False)]
    for group in (1, 2):
        assert [r for r in rows if r[0] == group] == [r for r in case["expected"] if r[0] == group]
