"""Tilt frames against the reference rule (``tests/tilt_oracle.py``, which keeps each window's raw events, no
partial states), with pandas computing every emitted row from the raw events it covers; and the errors for
what a tilt frame does not take."""

from __future__ import annotations

import random
from typing import Any

import pandas as pd
import pytest

from tests.engine.continuous_sim import Sim
from tests.tilt_oracle import tilt_frames
from tiltframe.errors import DefinitionError
from tiltframe.lang import parse_app

S = "@eventTime('ts') define stream s (g string, x double, ts long);\n"


def _oracle(levels: list[tuple[str, int]], batches: list[list[dict[str, Any]]]) -> list[tuple[Any, ...]]:
    """Each emitted row from the raw events the reference rule (``tests/tilt_oracle.py``) says it covers; a
    micro-batch is taken in event-time order (stable: arrival order among equal times)."""
    taken = [e for batch in batches for e in sorted(batch, key=lambda e: e["ts"])]
    out: list[tuple[Any, ...]] = []
    for emission in tilt_frames(levels, [(e["g"], e["ts"], e) for e in taken]):
        frame = pd.DataFrame(list(emission.items))
        out.append((emission.group, len(frame), round(frame["x"].sum(), 9), frame["x"].max(), frame["ts"].min(),
                    frame["ts"].max()))
    return out


@pytest.mark.parametrize(
    ("written", "levels"),
    [
        ("[size 3, interval 1s]", [("size", 3), ("interval", 1000)]),
        ("[interval 400ms, size 3]", [("interval", 400), ("size", 3)]),
        (
            "[size 2, interval 700ms, size 2, interval 3s]",
            [("size", 2), ("interval", 700), ("size", 2), ("interval", 3000)],
        ),
    ],
)
@pytest.mark.parametrize("seed", [1, 2])
def test_tilt_frame_against_oracle(written: str, levels: list[tuple[str, int]], seed: int) -> None:
    rng = random.Random(seed)
    t, batches = 0, []
    for _ in range(25):
        batch = []
        for _ in range(rng.randint(0, 6)):
            batch.append({"g": rng.choice("ab"), "x": float(rng.randint(0, 9)), "ts": t + rng.randint(0, 150)})
        t += rng.randint(50, 300)
        batches.append(batch)
    sim = Sim.of(S + "@info(name='q') select g, count() as n, sum(x) as total, max(x) as top, window_start, "
                 f"window_end from tumble(s, {written}) group by g;", buckets=2)
    got: list[tuple[Any, ...]] = []
    for batch in batches:
        got += [(r["g"], r["n"], round(r["total"], 9), r["top"], r["window_start"], r["window_end"])
                for r in sim.step(batch, now=0)]
    expected = _oracle(levels, batches)
    assert len(expected) > 5
    for g in "ab":  # each group in Tremor's order (groups of one micro-batch may come in any order)
        assert [r for r in got if r[0] == g] == [r for r in expected if r[0] == g]


@pytest.mark.parametrize(
    ("source", "message", "column"),
    [
        ("tumble(s, [size 2, siz 3])", "unknown tilt frame window 'siz'", 43),
        ("tumble(s, [size 0])", "a size must be greater than 0", 35),
        ("tumble(s, [size 2s])", "a size window counts inputs, write size 2", 35),
        ("hop(s, [size 2])", "a tilt frame is the only size of a tumble window", 31),
        ("tumble(s, [size 2]) group by g emit periodic 1s", "EMIT PERIODIC is not supported on a tilt frame", 60),
        ("tumble(s, [size 2]) group by g emit changelog", "EMIT CHANGELOG is not supported on a tilt frame", 55),
        ("tumble(s, [size 2]) partition by g", "not a tilt window", 57),
    ],
)
def test_tilt_frame_refusals(source: str, message: str, column: int) -> None:
    tail = "" if "group by" in source else " group by g"
    with pytest.raises(DefinitionError, match=message) as info:
        parse_app(S + f"select g, count() from {source}{tail};")
    assert (info.value.line, info.value.column) == (2, column)
