"""Both implementations of Tremor's tilt frames against the one reference (``tests/tilt_oracle.py``), end to
end: random chains of size and interval windows over random groups and times, run as a trickle query
(``engine/trickle``: inputs one at a time in arrival order, ingest times in any order) and as a streaming SQL
``tumble(s, [...])`` query (``engine/continuous``: micro-batches, each taken in event-time order, times in
any order across them)."""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.engine.continuous_sim import Sim
from tests.tilt_oracle import INTERVAL, SIZE, tilt_frames
from tiltframe.engine.replay_inputs import Event
from tiltframe.engine.trickle.graph_replay import replay
from tiltframe.lang.trickle.trickle_parser import parse_trickle

levels_st = st.lists(st.one_of(st.tuples(st.just(SIZE), st.integers(1, 3)),
                               st.tuples(st.just(INTERVAL), st.integers(1, 8))), min_size=1, max_size=4)
#: (group, time step from the input before: negative ones go back in time, value)
inputs_st = st.lists(st.tuples(st.sampled_from("abc"), st.integers(-3, 6), st.integers(-20, 20)),
                     min_size=1, max_size=50)


def times(steps: list[int]) -> list[int]:
    out, t = [], 100
    for step in steps:
        t = max(0, t + step)
        out.append(t)
    return out


# --- trickle ------------------------------------------------------------------------------------------------

TRICKLE = ('select {{"g": group[0], "w": window, "items": aggr::win::collect_flattened(event.i), '
           '"n": aggr::stats::count(), "s": aggr::stats::sum(event.v), "lo": aggr::stats::min(event.v), '
           '"first": aggr::win::first(event.i), "last": aggr::win::last(event.i)}} '
           "from in[{windows}] group by event.g into out;")


def trickle(levels: list[tuple[str, int]], inputs: list[tuple[str, int, int]]) -> list[dict[str, Any]]:
    defs = "".join(f"define window w{k} from tumbling with {kind} = {n} end;\n" for k, (kind, n) in enumerate(levels))
    query = parse_trickle(defs + TRICKLE.format(windows=", ".join(f"w{k}" for k in range(len(levels)))))
    ts = times([step for _, step, _ in inputs])
    events = [Event({"g": g, "i": i, "v": v}, t) for i, ((g, _, v), t) in enumerate(zip(inputs, ts, strict=True))]
    outputs = list(replay(query, events))
    assert all(o.error is None for o in outputs)
    return [o.event for o in outputs]


@settings(max_examples=150, deadline=None)
@given(levels=levels_st, inputs=inputs_st)
def test_trickle_tilt_frames_follow_the_rule(levels: list[tuple[str, int]], inputs: list[tuple[str, int, int]]) -> None:
    ts = times([step for _, step, _ in inputs])
    emissions = tilt_frames(levels, [(g, t, i) for i, ((g, _, _), t) in enumerate(zip(inputs, ts, strict=True))])
    values = [v for _, _, v in inputs]
    expected = [{"g": e.group, "w": f"w{e.level}", "items": list(e.items), "n": len(e.items),
                 "s": float(sum(values[i] for i in e.items)), "lo": float(min(values[i] for i in e.items)),
                 "first": e.items[0], "last": e.items[-1]} for e in emissions]
    assert trickle(levels, inputs) == expected  # in Tremor's order: input by input, group by group, window by window


# --- streaming SQL ------------------------------------------------------------------------------------------

STREAM = "@eventTime('ts') define stream s (g string, x double, i long, ts long);\n"


def written(levels: list[tuple[str, int]]) -> str:
    return ", ".join(f"size {n}" if kind == SIZE else f"interval {n}ms" for kind, n in levels)


@settings(max_examples=100, deadline=None)
@given(levels=levels_st, inputs=inputs_st, cuts=st.lists(st.integers(0, 50), max_size=6))
def test_streaming_sql_tilt_frames_follow_the_rule(levels: list[tuple[str, int]], inputs: list[tuple[str, int, int]],
                                                   cuts: list[int]) -> None:
    ts = times([step for _, step, _ in inputs])
    events = [{"g": g, "x": float(v), "i": i, "ts": t} for i, ((g, _, v), t) in enumerate(zip(inputs, ts, strict=True))]
    bounds = sorted({0, len(events), *(c for c in cuts if c < len(events))})
    batches = [events[lo:hi] for lo, hi in itertools.pairwise(bounds)]
    sim = Sim.of(STREAM + "@info(name='q') select g, count() as n, sum(x) as total, min(x) as lo, "
                 f"group_array(i) as items, window_start, window_end from tumble(s, [{written(levels)}]) group by g;",
                 buckets=2)
    got = []
    for batch in batches:
        got += [(r["g"], r["n"], r["total"], r["lo"], sorted(r["items"]), r["window_start"], r["window_end"])
                for r in sim.step(batch, now=0)]
    taken = [e for batch in batches for e in sorted(batch, key=lambda e: e["ts"])]  # stable: arrival among ties
    by_i = {e["i"]: e for e in events}
    expected = []
    for e in tilt_frames(levels, [(e["g"], e["ts"], e["i"]) for e in taken]):
        held = [by_i[i] for i in e.items]
        expected.append((e.group, len(held), sum(h["x"] for h in held), min(h["x"] for h in held), sorted(e.items),
                         min(h["ts"] for h in held), max(h["ts"] for h in held)))
    for g in "abc":  # each group in Tremor's order (the groups of one micro-batch may come in any order)
        assert [r for r in got if r[0] == g] == [r for r in expected if r[0] == g]
