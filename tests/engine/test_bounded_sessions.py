"""Sessions with start and end conditions (``session(s, gap, [start, end])``), through the processor without
Spark (``continuous_sim.Sim``), against a sequential reading of the rule over the on-time events.
``tests/compatibility/test_timeplus.py`` runs Proton's own cases on Spark."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.engine.continuous_sim import Sim
from tests.engine.test_continuous_steps import S, e, replay_sessions
from tiltframe.errors import DefinitionError

GAP = 1000
#: The conditions over v: 0-1 end, 2-3 neither, 4-7 start, 8-9 both.
START, END = "v >= 4", "v <= 1 or v >= 8"
BRACKETS = {"closed": "[{}, {}]", "end_left_out": "[{}, {})", "start_left_out": "({}, {}]", "open": "({}, {})"}
#: The order of events at one time: starting first, then neither, both, and ending last.
RANK = {1: 0, 0: 1, 3: 2, 2: 3}


def flags(v: float) -> int:
    return (1 if v >= 4 else 0) + (2 if v <= 1 or v >= 8 else 0)


def bounded_sessions(events: list[tuple[int, float]], keep_start: bool, keep_end: bool) -> list[dict[str, Any]]:
    """The rule read event by event over (time, value) pairs: events of one time and the same flags act
    as one; a session opens at a start, takes what follows until an end (which does not end the session it
    starts) or until the next event is ``GAP`` or more after the last.  Each session: its members, its end
    as emitted when known (``None``: open), and the watermark that closes it."""
    units = itertools.groupby(sorted(events, key=lambda x: (x[0], RANK[flags(x[1])])), lambda x: (x[0], flags(x[1])))
    out: list[dict[str, Any]] = []
    current: dict[str, Any] | None = None
    previous = None
    for (t, flag), group in units:
        values = [v for _, v in group]
        if current is not None and t - previous >= GAP:
            current.update(end=None, close=previous + GAP, followed=True)
            out.append(current)
            current = None
        if current is None:
            if flag & 1:
                current = {"members": [(t, v) for v in values] if keep_start else [], "followed": False}
                previous = t
            continue
        previous = t
        if flag & 2:
            current["members"] += [(t, v) for v in values] if keep_end else []
            current.update(end=t + (1 if keep_end else 0), close=t, followed=True, ender=t)
            out.append(current)
            current = None
        else:
            current["members"] += [(t, v) for v in values]
    if current is not None:
        current.update(end=None, close=previous + GAP)
        out.append(current)
    for s in out:
        if s["end"] is None and s["members"]:
            s["close"] = max(t for t, _ in s["members"]) + GAP
    return [s for s in out if s["members"]]


def oracle(batches: list[tuple[list[tuple[str, int, float]], int]], keep: tuple[bool, bool]) -> list[dict[str, Any]]:
    """Rows of on-time events arriving in batches: after each batch, the sessions of each key's pending
    events whose close the watermark reached are emitted and their events (with the events before them
    in no session) forgotten; at the end the rest close by TIMEOUT (open ones end 1 ms after their last
    member)."""
    pending: dict[str, list[tuple[int, float]]] = {}
    rows: list[dict[str, Any]] = []

    def row(k: str, s: dict[str, Any], end: int) -> dict[str, Any]:
        first = min(t for t, _ in s["members"])
        return {"k": k, "window_start": first, "window_end": end, "n": len(s["members"]),
                "t": sum(v for _, v in s["members"])}

    for batch, watermark in batches:
        for k, t, v in batch:
            pending.setdefault(k, []).append((t, v))
        for k in list(pending):
            for s in bounded_sessions(pending[k], *keep):
                if s["close"] <= watermark:
                    last = s.get("ender", max(t for t, _ in s["members"]))
                    rows.append(row(k, s, s["end"] if s["end"] is not None else s["close"]))
                    pending[k] = [(t, v) for t, v in pending[k] if t > last]
    for k in pending:
        for s in bounded_sessions(pending[k], *keep):
            last = max(t for t, _ in s["members"])
            end = s["end"] if s["end"] is not None else (last + GAP if s["followed"] else last + 1)
            rows.append(row(k, s, end))
    return sorted(rows, key=lambda r: (r["k"], r["window_start"]))


bounded_event = st.tuples(st.sampled_from("ab"), st.integers(0, 800), st.integers(0, 3000), st.integers(0, 9))
bounded_case = st.tuples(
    st.lists(bounded_event, min_size=1, max_size=40),
    st.lists(st.integers(1, 39), max_size=6),
    st.sampled_from(sorted(BRACKETS)),
    st.sampled_from([1, 1000, 3000]),
)


@settings(max_examples=80, deadline=None)
@given(bounded_case)
def test_bounded_sessions_match_their_definition(case) -> None:
    """Out-of-order events, ties, sessions ended and started earlier by later arrivals, each bracket: the
    rows of AFTER WINDOW CLOSE and the view a changelog of ON UPDATE rows leaves equal the rule read event
    by event over the on-time events; late events are counted."""
    steps, cuts, brackets, delay = case
    bounds = BRACKETS[brackets].format(START, END)
    text = (
        S + "SELECT k, window_start, window_end, count() AS n, sum(v) AS t "
        f"FROM session(s, {GAP}ms, {bounds}) GROUP BY k EMIT {{policy}} WITH DELAY {delay}ms AND TIMEOUT 1h;"
    )
    replayed = replay_sessions(text, steps, cuts, delay)
    keep = (brackets in ("closed", "end_left_out"), brackets in ("closed", "start_left_out"))
    replayed.check(oracle(replayed.arrived, keep))


@pytest.mark.parametrize(("bracket", "end", "n"), [("]", 2501, 3), (")", 2500, 2)])
def test_a_later_end_event_splits_an_open_session(bracket: str, end: int, n: int) -> None:
    """An end event that arrives late but on time ends the session where its time puts it: the changelog
    retracts the longer session at once (also when the end event is left out), and the events after the
    end wait for a start."""
    sim = Sim.of(
        S + f"SELECT k, window_start, window_end, count() AS n FROM session(s, 5s, [{START}, {END}{bracket}) "
        "GROUP BY k EMIT CHANGELOG ON UPDATE WITH DELAY 10s;"
    )
    assert sim.step([e("a", 5, 1000), e("a", 3, 2000), e("a", 3, 3000)], now=0) == [
        {"k": "a", "window_start": 1000, "window_end": 3001, "n": 3, "_tp_delta": 1},
    ]
    assert sim.step([e("a", 0, 2500)]) == [
        {"k": "a", "window_start": 1000, "window_end": 3001, "n": 3, "_tp_delta": -1},
        {"k": "a", "window_start": 1000, "window_end": end, "n": n, "_tp_delta": 1},
    ]


def test_events_before_a_start_are_in_no_session() -> None:
    sim = Sim.of(
        S + f"SELECT k, window_start, window_end, count() AS n FROM session(s, 5s, [{START}, {END}]) GROUP BY k;"
    )
    assert sim.step([e("a", 2, 1000), e("a", 3, 2000)], now=0) == []
    assert sim.step([e("a", 5, 3000), e("a", 0, 4000), e("a", 3, 30_000)]) == [
        {"k": "a", "window_start": 3000, "window_end": 4001, "n": 2},
    ]


@pytest.mark.parametrize(
    ("window", "message"),
    [
        ("session(s, 5s, 1m, [v > 1, v < 0])", "takes no max length"),
        ("session(s, 5s, [sum(v) > 1, v < 0])", "aggregate sum() cannot be used in the session's start condition"),
        ("session(s, 5s, [v + 1, v < 0])", "the session's start condition needs a condition"),
        ("session(s, 5s, [v > 1, nope < 0])", "nope"),
        ("tumble(s, 5s, [v > 1, v < 0])", "start and end conditions are written once, last, in session()"),
        ("session(s, 5s, [v > 1, v < 0], 1m)", "the start and end conditions come last in session()"),
        ("session(s, 5s, v > 1)", "a session takes two conditions, last"),
    ],
)
def test_conditions_refused_with_their_place(window: str, message: str) -> None:
    with pytest.raises(DefinitionError, match=message.replace("(", r"\(").replace(")", r"\)")) as caught:
        Sim.of(S + f"SELECT k, count() AS n FROM {window} GROUP BY k;")
    assert caught.value.line == 2
