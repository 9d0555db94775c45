"""Trickle windows against pandas: random groups, ingest times and values through a size window, an interval
window and a tilt frame of the two; the outputs (their order included) computed apart from the events."""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from tiltframe.engine.replay_inputs import Event
from tiltframe.engine.trickle.graph_replay import replay
from tiltframe.lang.trickle.trickle_parser import parse_trickle

SELECT = ('select {{"g": group[0], "n": aggr::stats::count(), "s": aggr::stats::sum(event.v), '
          '"lo": aggr::stats::min(event.v), "first": aggr::win::first(event.i)}} from in[{windows}] '
          "group by event.g into out;")

events_st = st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(-50, 50), st.integers(0, 5)),
                     min_size=1, max_size=60)


def frame(events: list[tuple[str, int, int]]) -> pd.DataFrame:
    """Events in arrival order: group, value, ingest time (non-decreasing: gaps of 0 to 5)."""
    df = pd.DataFrame(events, columns=["g", "v", "gap"])
    df["t"] = df["gap"].cumsum()
    df["i"] = np.arange(len(df))
    return df


def run(windows: str, df: pd.DataFrame, defs: str) -> list[dict[str, object]]:
    query = parse_trickle(defs + SELECT.format(windows=windows))
    inputs = [Event({"g": r.g, "v": int(r.v), "i": int(r.i)}, int(r.t)) for r in df.itertuples()]
    outputs = list(replay(query, inputs))
    assert all(o.error is None for o in outputs)
    return [o.event for o in outputs]


def summary(rows: pd.DataFrame, g: str) -> dict[str, object]:
    return {"g": g, "n": len(rows), "s": float(rows["v"].sum()), "lo": float(rows["v"].min()),
            "first": int(rows["i"].iloc[0])}


@settings(max_examples=60, deadline=None)
@given(events=events_st, size=st.integers(1, 4))
def test_a_size_window_emits_every_size_events_of_a_group(events: list[tuple[str, int, int]], size: int) -> None:
    df = frame(events)
    df["chunk"] = df.groupby("g").cumcount() // size
    expected = []
    for (g, _), rows in df.groupby(["g", "chunk"], sort=False):
        if len(rows) == size:  # a window still open at the end never emits
            expected.append((rows["i"].iloc[-1], summary(rows, g)))
    got = run("w", df, f"define window w from tumbling with size = {size} end;\n")
    assert got == [s for _, s in sorted(expected, key=lambda e: e[0])]


def interval_windows(times: np.ndarray, interval: int) -> list[tuple[int, int, int]]:
    """(first, end, emitted by) positions of a group's interval windows: a window starts at an input, ends
    before the first input at or past start + interval, which emits it and starts the next."""
    out, start = [], 0
    while start < len(times):
        end = int(np.searchsorted(times, times[start] + interval, side="left"))
        if end >= len(times):
            break  # no input closed it
        out.append((start, end, end))
        start = end
    return out


@settings(max_examples=60, deadline=None)
@given(events=events_st, interval=st.integers(1, 12))
def test_an_interval_window_is_anchored_at_its_first_event(events: list[tuple[str, int, int]],
                                                           interval: int) -> None:
    df = frame(events)
    expected = []
    for g, rows in df.groupby("g", sort=False):
        rows = rows.reset_index(drop=True)
        for first, end, by in interval_windows(rows["t"].to_numpy(), interval):
            expected.append((rows["i"].iloc[by], summary(rows.iloc[first:end], g)))
    got = run("w", df, f"define window w from tumbling with interval = {interval} end;\n")
    assert got == [s for _, s in sorted(expected, key=lambda e: e[0])]


@settings(max_examples=60, deadline=None)
@given(events=events_st, size=st.integers(1, 3), per=st.integers(1, 3))
def test_a_tilt_frame_merges_each_finer_window_into_the_coarser(events: list[tuple[str, int, int]], size: int,
                                                                per: int) -> None:
    """``[by_size, by_emissions]``: the second window takes ``per`` emissions of the first and emits their
    merged states right after the first's output that completes it."""
    df = frame(events)
    df["chunk"] = df.groupby("g").cumcount() // size
    expected = []
    for g, rows in df.groupby("g", sort=False):
        chunks = [c for _, c in rows.groupby("chunk") if len(c) == size]
        for k, chunk in enumerate(chunks):
            expected.append((chunk["i"].iloc[-1], 0, summary(chunk, g)))
            if (k + 1) % per == 0:
                merged = pd.concat(chunks[k + 1 - per: k + 1])
                expected.append((chunk["i"].iloc[-1], 1, summary(merged, g)))
    defs = (f"define window fine from tumbling with size = {size} end;\n"
            f"define window coarse from tumbling with size = {per} end;\n")
    got = run("fine, coarse", df, defs)
    assert got == [s for *_, s in sorted(expected, key=lambda e: (e[0], e[1]))]
