"""The continuous-query processor without Spark (``continuous_sim.Sim`` calls it as the engine does):
window and policy rules that need many steps or many examples, in milliseconds.  ``test_continuous.py``
runs the main sequences on Spark."""

from __future__ import annotations

import itertools
import json
from collections import Counter
from dataclasses import dataclass
from typing import Any

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.engine.continuous_sim import Sim
from tests.seed003 import SEED_OTEL
from tiltframe.engine.continuous.columns import OUT_KIND, REASON
from tiltframe.retrieval.pandas_states import TS

S = "@eventTime('ts') define stream s (k string, v double, ts long, end_time long);\n"


def e(k: Any, v: float, ts: Any, end_time: int | None = None) -> dict[str, Any]:
    return {"k": k, "v": v, "ts": ts, "end_time": end_time}


def test_periodic_repeat_window_changelog() -> None:
    """REPEAT emits every open window at each boundary; in a changelog each repetition retracts the row
    before; a window's final value when it closes, if it changed since."""
    sim = Sim.of(
        S + "SELECT k, window_start, count() AS n FROM tumble(s, 10s) GROUP BY k EMIT CHANGELOG PERIODIC 1s REPEAT;"
    )
    assert sim.step([e("a", 1, 1000)], now=500) == []
    assert sim.step(now=1000) == [{"k": "a", "window_start": 0, "n": 1, "_tp_delta": 1}]
    assert sim.step(now=2000) == [
        {"k": "a", "window_start": 0, "n": 1, "_tp_delta": -1},
        {"k": "a", "window_start": 0, "n": 1, "_tp_delta": 1},
    ]
    assert sim.step([e("a", 1, 2000)], now=2500) == []
    assert sim.step([e("a", 1, 12_000)], now=2600) == [
        {"k": "a", "window_start": 0, "n": 1, "_tp_delta": -1},
        {"k": "a", "window_start": 0, "n": 2, "_tp_delta": 1},
    ]
    assert sim.step(now=3000) == [{"k": "a", "window_start": 10_000, "n": 1, "_tp_delta": 1}]


def test_periodic_boundary_includes_the_events_of_its_micro_batch() -> None:
    """A period where anything arrived emits every group (the seed's "emit the aggregation periodically"),
    not only the groups that changed; a period where nothing arrived emits nothing."""
    sim = Sim.of(S + "SELECT k, count() AS n FROM s GROUP BY k EMIT PERIODIC 1s;", buckets=4)
    assert sim.step([e("a", 1, 1)], now=900) == []
    assert sim.step([e("a", 1, 2)], now=1000) == [{"k": "a", "n": 2}]
    # 2000 passed: one row per group, not two; 'a' had no news but 'b' did.
    assert sim.step([e("b", 1, 3)], now=2999) == [{"k": "a", "n": 2}, {"k": "b", "n": 1}]
    assert sim.step(now=3000) == []
    assert sim.step(now=4000) == []


def test_periodic_window_emits_every_open_group_and_final_rows() -> None:
    """PERIODIC on windows, checked against pandas: at each period where any event arrived (in any bucket)
    every group of the open windows, with its count so far; at a window's close its final row, even when
    the last period already showed the same values."""
    sim = Sim.of(S + "SELECT window_start, k, count() AS n FROM tumble(s, 10s) GROUP BY window_start, k "
                 "EMIT PERIODIC 1s;", buckets=3)
    events = [e(k, 1, ts) for k, ts in [("a", 1000), ("b", 2000), ("c", 3000), ("a", 4000)]]
    seen: list[dict[str, Any]] = []

    def expected() -> list[dict[str, Any]]:
        frame = pd.DataFrame(seen)
        frame["window_start"] = frame["ts"] // 10_000 * 10_000
        out = frame.groupby(["window_start", "k"]).size().rename("n").reset_index()
        return out.to_dict("records")

    sim.step(events[:3], now=500)
    seen += events[:3]
    assert sim.step(now=1000) == expected()
    assert sim.step(now=2000) == []  # nothing arrived
    sim.step(events[3:], now=2500)
    seen += events[3:]
    assert sim.step(now=3000) == expected()  # 'b' and 'c' unchanged, emitted all the same
    assert sim.step([e("z", 1, 12_000)], now=3100) == expected()  # [0, 10s) closes: its final rows


def test_count_windows_on_update_changelog() -> None:
    """An incomplete count window is a group like any other: ON UPDATE emits it as it grows."""
    sim = Sim.of(
        S + "SELECT k, window_start, window_end, count() AS n, sum(v) AS t FROM tumble(s, 3 events) GROUP BY k "
        "EMIT CHANGELOG ON UPDATE;"
    )
    assert sim.step([e("a", i, 1000 * i) for i in range(4)], now=100) == [
        {"k": "a", "window_start": 0, "window_end": 2000, "n": 3, "t": 3.0, "_tp_delta": 1},
        {"k": "a", "window_start": 3000, "window_end": 3000, "n": 1, "t": 3.0, "_tp_delta": 1},
    ]
    assert sim.step([e("a", 1, 9000)]) == [
        {"k": "a", "window_start": 3000, "window_end": 3000, "n": 1, "t": 3.0, "_tp_delta": -1},
        {"k": "a", "window_start": 3000, "window_end": 9000, "n": 2, "t": 4.0, "_tp_delta": 1},
    ]
    # 500 fills the open window (its earliest time becomes 500); 600 opens the next one.
    assert sim.step([e("a", 1, 500), e("a", 7, 600)]) == [
        {"k": "a", "window_start": 3000, "window_end": 9000, "n": 2, "t": 4.0, "_tp_delta": -1},
        {"k": "a", "window_start": 500, "window_end": 9000, "n": 3, "t": 5.0, "_tp_delta": 1},
        {"k": "a", "window_start": 600, "window_end": 600, "n": 1, "t": 7.0, "_tp_delta": 1},
    ]


def test_count_windows_arrival_time() -> None:
    sim = Sim.of(
        "define stream c (k string);\n"
        "SELECT k, window_start, window_end, count() AS n FROM tumble(c, 2 events) GROUP BY k;"
    )
    assert sim.step([{"k": "a"}], now=1000) == []
    assert sim.step([{"k": "a"}, {"k": "a"}, {"k": "b"}], now=2000) == [
        {"k": "a", "window_start": 1000, "window_end": 2000, "n": 2}
    ]
    assert sim.step([{"k": "b"}], now=3000) == [{"k": "b", "window_start": 2000, "window_end": 3000, "n": 2}]


def test_after_key_expire_only() -> None:
    """With ONLY, a key that times out without passing MAXSPAN is forgotten silently."""
    sim = Sim.of(
        S + "SELECT k, max(end_time) AS b, count() AS n FROM s GROUP BY k "
        "EMIT CHANGELOG AFTER KEY EXPIRE IDENTIFIED BY end_time WITH ONLY MAXSPAN 500ms AND TIMEOUT 2s;"
    )
    assert sim.step([e("a", 1, 0, 100), e("a", 1, 0, 300), e("b", 1, 0, 300)], now=1000) == []
    assert sim.step([e("a", 1, 0, 601)], now=1500) == [{"k": "a", "b": 601, "n": 3, "_tp_delta": 1}]
    assert sim.step(now=4000) == []
    assert sim.step([e("b", 1, 0, 300)], now=4100) == []  # b started anew: one event, no span yet
    assert sim.step([e("b", 1, 0, 900)], now=4200) == [{"k": "b", "b": 900, "n": 2, "_tp_delta": 1}]


def test_after_key_expire_without_timeout_keeps_short_keys() -> None:
    sim = Sim.of(
        S + "SELECT k, count() AS n FROM s GROUP BY k EMIT AFTER KEY EXPIRE IDENTIFIED BY end_time WITH MAXSPAN 1s;"
    )
    assert sim.step([e("a", 1, 0, 0), e("a", 1, 0, 1000)], now=1000) == []  # a span of 1s does not exceed 1s
    assert sim.step(now=10**9) == []
    assert sim.step([e("a", 1, 0, 1001)]) == [{"k": "a", "n": 3}]


def test_session_timeout_ends_the_session() -> None:
    sim = Sim.of(
        S + "SELECT k, window_start, window_end, count() AS n FROM session(s, 2s) GROUP BY k "
        "EMIT AFTER WINDOW CLOSE WITH DELAY 1m AND TIMEOUT 5s;"
    )
    assert sim.step([e("a", 1, 1000), e("a", 1, 2000)], now=0) == []
    # Proton: a session TIMEOUT closes ends 1 ms after its last event (0006_session_window.json, id 23).
    assert sim.step(now=5000) == [{"k": "a", "window_start": 1000, "window_end": 2001, "n": 2}]
    # 3000 is on time (the watermark is a minute back) and within 2s of 2000: a new session all the same.
    assert sim.step([e("a", 1, 3000)], now=6000) == []
    assert sim.step(now=11_000) == [{"k": "a", "window_start": 3000, "window_end": 3001, "n": 1}]


def test_hop_slide_longer_than_size_samples() -> None:
    sim = Sim.of(S + "SELECT k, window_start, count() AS n FROM hop(s, 10s, 2s) GROUP BY k;")
    # Windows [0, 2s) and [10s, 12s): 5000 is in none; the watermark 11500 closes the first.
    assert sim.step([e("a", 1, 1000), e("a", 1, 5000), e("a", 1, 11_500)], now=0) == [
        {"k": "a", "window_start": 0, "n": 1}
    ]
    assert sim.step([e("a", 1, 30_000)]) == [{"k": "a", "window_start": 10_000, "n": 1}]
    # The event between the windows is recorded, not lost: in none of the windows, and said why.
    assert [(r[OUT_KIND], r[TS]) for r in sim.records] == [("unwindowed", 5000)]
    assert sim.records[0][REASON] == (
        "event time 5000 falls between the windows ending at 2000 and starting at 10000 (the hop's slide 10000 ms "
        "is longer than its size 2000 ms: it samples); not aggregated")


def test_missing_event_time_and_null_keys() -> None:
    sim = Sim.of(S + "SELECT k, window_start, count() AS n FROM tumble(s, 1s) GROUP BY k;")
    sim.step([e("a", 1, None), e(None, 1, 100), e(None, 1, 200)], now=0)
    assert sim.step([e("a", 1, 5000)]) == [{"k": None, "window_start": 0, "n": 2}]
    assert [(r["tf_out"], r["tf_reason"]) for r in sim.records] == [("rejected", "missing field 'ts'")]


# --- sessions against an oracle ---------------------------------------------------------------------------

GAP, MAX_LENGTH = 1000, 2500

session_event = st.tuples(st.sampled_from("ab"), st.integers(0, 1500), st.integers(0, 4000), st.integers(0, 9))
sessions_case = st.tuples(
    st.lists(session_event, min_size=1, max_size=40),
    st.lists(st.integers(1, 39), max_size=6),
    st.sampled_from([None, MAX_LENGTH]),
    st.sampled_from([1000, 3000]),
)


def proton_sessions(times: list[int], max_length: int | None) -> list[tuple[list[int], int, bool]]:
    """Proton's rule (``SessionWindowHelper.cpp``) over sorted times: an event at or past start + max length
    ends the session there, else one at or past last + ``GAP`` ends it at last + ``GAP``; either starts the
    next session.  Each session: its times, its end, and whether a later event closed it."""
    out: list[tuple[list[int], int, bool]] = []
    members: list[int] = []
    for t in times:
        if members and max_length and t >= members[0] + max_length:
            out.append((members, members[0] + max_length, True))
            members = []
        elif members and t >= members[-1] + GAP:
            out.append((members, members[-1] + GAP, True))
            members = []
        members.append(t)
    return [*out, (members, members[-1] + GAP, False)] if members else out


def session_oracle(batches: list[list[tuple[str, int, float]]], max_length: int | None) -> list[dict[str, Any]]:
    """Sessions of on-time events (key, time, value) arriving in batches: after each batch, Proton's sessions
    of each key's pending events; those whose end the watermark reached close, so a later event no longer
    changes them.  At the end TIMEOUT closes the rest: a session no later event closed ends at last + 1 ms."""
    pending: dict[str, list[tuple[int, float]]] = {}
    rows: list[dict[str, Any]] = []

    def close(k: str, done: list[int], end: int) -> None:
        values = [v for t, v in sorted(pending[k]) if t in done]
        rows.append({"k": k, "window_start": done[0], "window_end": end, "n": len(done), "t": sum(values)})

    for batch, watermark in batches:
        for k, t, v in batch:
            pending.setdefault(k, []).append((t, v))
        for k in list(pending):
            for done, end, _ in proton_sessions(sorted(t for t, _ in pending[k]), max_length):
                if end <= (watermark if watermark is not None else -(10**18)):
                    close(k, done, end)
                    pending[k] = [(t, v) for t, v in pending[k] if t not in done]
    for k in pending:
        for done, end, followed in proton_sessions(sorted(t for t, _ in pending[k]), max_length):
            close(k, done, end if followed else done[-1] + 1)
    return sorted(rows, key=lambda r: (r["k"], r["window_start"]))


@settings(max_examples=60, deadline=None)
@given(sessions_case)
def test_sessions_match_their_definition(case) -> None:
    """Out-of-order events, sessions extended on both sides, bridged, cut by max length: the rows closed
    sessions emit (AFTER WINDOW CLOSE), and the view a changelog of ON UPDATE rows leaves, equal Proton's
    sessions of the on-time events (those still open at the end closed by TIMEOUT)."""
    steps, cuts, max_length, delay = case
    size = f", {max_length}ms" if max_length else ""
    text = (
        S + "SELECT k, window_start, window_end, count() AS n, sum(v) AS t "
        f"FROM session(s, {GAP}ms{size}) GROUP BY k EMIT {{policy}} WITH DELAY {delay}ms AND TIMEOUT 1h;"
    )
    replayed = replay_sessions(text, steps, cuts, delay)
    replayed.check(session_oracle(replayed.arrived, max_length))


@dataclass
class Replay:
    """A session query replayed by ``replay_sessions``: the rows AFTER WINDOW CLOSE emitted, the view a
    changelog of ON UPDATE rows left, the on-time events of each batch with the watermark after it, and how
    many events were late."""

    rows: list[dict[str, Any]]
    view: Counter[tuple[Any, ...]]
    arrived: list[tuple[list[tuple[str, int, float]], int]]
    late: int
    counted_late: int

    def check(self, expected: list[dict[str, Any]]) -> None:
        """Both policies give ``expected`` (rows ordered by key and window start), and every late event was
        counted."""
        assert sorted(self.rows, key=lambda r: (r["k"], r["window_start"])) == expected
        assert sorted(self.view.elements()) == sorted(tuple(r.values()) for r in expected)
        assert self.counted_late == self.late


def replay_sessions(text: str, steps: list[tuple[str, int, int, int]], cuts: list[int], delay: int) -> Replay:
    """``text`` (a query with ``{policy}``) under AFTER WINDOW CLOSE and CHANGELOG ON UPDATE over generated
    events: each step (key, time moved on, lag behind that time, value), cut into micro-batches at ``cuts``;
    at the end TIMEOUT closes what is open."""
    closed = Sim.of(text.format(policy="AFTER WINDOW CLOSE"))
    updates = Sim.of(text.format(policy="CHANGELOG ON UPDATE"))
    times = list(itertools.accumulate(moved for _, moved, _, _ in steps))
    events = [e(k, float(v), t - lag) for (k, _, lag, v), t in zip(steps, times, strict=True)]
    bounds = sorted({0, len(events), *(min(c, len(events)) for c in cuts)})
    batches = [events[a:b] for a, b in itertools.pairwise(bounds) if b > a]
    rows: list[dict[str, Any]] = []
    view: Counter[tuple[Any, ...]] = Counter()
    on_time, greatest, arrived = 0, None, []
    for i, batch in enumerate(batches):
        fresh = [x for x in batch if greatest is None or x["ts"] >= greatest - delay]
        on_time += len(fresh)
        greatest = max([x["ts"] for x in batch] + ([greatest] if greatest is not None else []))
        arrived.append(([(x["k"], x["ts"], x["v"]) for x in fresh], greatest - delay))
        rows += closed.step(batch, now=i)
        apply(view, updates.step(batch, now=i))
    rows += closed.step(now=10**8)
    apply(view, updates.step(now=10**8))
    counted = sum(r["tf_out"] == "late" for r in closed.records)
    return Replay(rows, view, arrived, len(events) - on_time, counted)


def apply(view: Counter[tuple[Any, ...]], rows: list[dict[str, Any]]) -> None:
    """Apply changelog rows to a multiset of rows; a retraction must remove a row that is there."""
    for row in rows:
        values = tuple(v for k, v in row.items() if k != "_tp_delta")
        if row["_tp_delta"] < 0:
            assert view[values] > 0, f"retracted a row that is not in the view: {row}"
            view[values] -= 1
            if not view[values]:
                del view[values]
        else:
            view[values] += 1


@pytest.mark.parametrize("delay", [0, 2000])
def test_session_bridge_retracts_both_sessions(delay: int) -> None:
    sim = Sim.of(
        S + "SELECT k, window_start, window_end, count() AS n FROM session(s, 2s) GROUP BY k "
        f"EMIT CHANGELOG ON UPDATE WITH DELAY {delay + 10_000}ms;"
    )
    assert sim.step([e("a", 1, 1000), e("a", 1, 4000)], now=0) == [
        {"k": "a", "window_start": 1000, "window_end": 3000, "n": 1, "_tp_delta": 1},
        {"k": "a", "window_start": 4000, "window_end": 4001, "n": 1, "_tp_delta": 1},
    ]
    # 4000 closed the first session (Proton: at last + gap); the open one ends 1 ms after its last event.
    assert sim.step([e("a", 1, 2500)]) == [
        {"k": "a", "window_start": 1000, "window_end": 3000, "n": 1, "_tp_delta": -1},
        {"k": "a", "window_start": 4000, "window_end": 4001, "n": 1, "_tp_delta": -1},
        {"k": "a", "window_start": 1000, "window_end": 4001, "n": 3, "_tp_delta": 1},
    ]


def test_null_and_integer_keys_on_update_changelog() -> None:
    """Keys with nulls (integers among them) find their last row again after the state's Arrow trip."""
    sim = Sim.of(
        "@eventTime('ts') define stream n (id int, tag string, ts long);\n"
        "SELECT id, tag, count() AS c FROM tumble(n, 10s) GROUP BY id, tag EMIT CHANGELOG ON UPDATE;"
    )
    assert sim.step([{"id": 1, "tag": None, "ts": 1}, {"id": None, "tag": "x", "ts": 2}], now=0) == [
        {"id": 1, "tag": None, "c": 1, "_tp_delta": 1},
        {"id": None, "tag": "x", "c": 1, "_tp_delta": 1},
    ]
    assert sim.step([{"id": 1, "tag": None, "ts": 3}, {"id": None, "tag": "x", "ts": 4}]) == [
        {"id": 1, "tag": None, "c": 1, "_tp_delta": -1},
        {"id": None, "tag": "x", "c": 1, "_tp_delta": -1},
        {"id": 1, "tag": None, "c": 2, "_tp_delta": 1},
        {"id": None, "tag": "x", "c": 2, "_tp_delta": 1},
    ]


def row(start: int, n: int) -> dict[str, Any]:
    return {"window_start": start, "k": "a", "n": n}


SEED_EMITS = {
    "EMIT STREAM AFTER WINDOW CLOSE WITH DELAY 1s AND TIMEOUT 5s": [[], [], [], [row(0, 2)], [], [row(5000, 2)], []],
    "EMIT STREAM PERIODIC 1s REPEAT WITH DELAY 1s AND TIMEOUT 5s": (
        [[], [], [row(0, 2), row(5000, 1)], [row(0, 2)], [row(5000, 2)], [row(5000, 2)], []]
    ),
    "EMIT ON UPDATE WITH DELAY 1s AND TIMEOUT 5s": [[row(0, 2)], [row(5000, 1)], [], [row(5000, 2)], [], [], []],
    "EMIT ON UPDATE WITH BATCH 1s WITH DELAY 1s AND TIMEOUT 5s": (
        [[], [], [row(0, 2), row(5000, 1)], [], [row(5000, 2)], [], []]
    ),
}


@pytest.mark.parametrize("emit", SEED_EMITS)
def test_seed_emit_examples(emit: str) -> None:
    """The seed's four EMIT examples over one sequence: events at processing times 0, 500 and 1200, clock
    moves to 1000 and 2000 (periodic boundaries), 6500 (TIMEOUT of the window last reached at 1200)."""
    sim = Sim.of(S + f"SELECT window_start, k, count() AS n FROM tumble(s, 5s) GROUP BY window_start, k {emit};")
    steps = [
        sim.step([e("a", 1, 1000), e("a", 1, 2000)], now=0),
        sim.step([e("a", 1, 5500)], now=500),  # watermark 4500: [0, 5s) stays open
        sim.step(now=1000),
        sim.step([e("a", 1, 6500)], now=1200),  # watermark 5500 closes [0, 5s)
        sim.step(now=2000),
        sim.step(now=6500),
        sim.step(now=8000),
    ]
    assert steps == SEED_EMITS[emit]


OTEL = (
    "@eventTime('end_time') define stream otel_traces (trace_id string, span_id string, parent_span_id string, "
    "name string, start_time long, end_time long, attributes string);\n"
)


def span(trace: str, span_id: str, start: int, end: int, parent: str | None = None) -> dict[str, Any]:
    return {"trace_id": trace, "span_id": span_id, "parent_span_id": parent, "name": "op", "start_time": start,
            "end_time": end, "attributes": "{}"}


def test_seed_trace_query_emits_each_trace_when_it_expires() -> None:
    """The seed's WITH ... SETTINGS query: a trace whose end times span more than 500ms is emitted as soon as
    they do; another after 2s of processing time without its events."""
    sim = Sim.of(OTEL + SEED_OTEL)
    assert sim.step([span("t1", "a", 0, 100), span("t1", "b", 50, 300, "a"), span("t2", "c", 10, 20)], now=1000) == []
    [row] = sim.step([span("t1", "d", 200, 700, "a")], now=1500)
    event = json.loads(row["event"])
    assert {k: event[k] for k in ("trace_id", "start_ts", "end_ts", "span_ms")} == {
        "trace_id": "t1", "start_ts": 0, "end_ts": 700, "span_ms": 700,
    }
    assert sorted(json.loads(s)["span_id"] for s in event["trace_events"]) == ["a", "b", "d"]
    assert json.loads(event["trace_events"][0]) == {
        "span_id": "a", "parent_span_id": None, "name": "op", "start_time": 0, "end_time": 100, "attributes": "{}",
    }
    assert sim.step(now=2999) == []
    [row] = sim.step(now=3000)
    assert json.loads(row["event"])["trace_id"] == "t2" and json.loads(row["event"])["span_ms"] == 10


def test_with_query_filter_and_changelog() -> None:
    """WHERE over the rows of a WITH query drops rows; a changelog row carries its delta."""
    sim = Sim.of(
        OTEL + "WITH g AS (SELECT trace_id, min(start_time) AS s, max(end_time) AS e, date_diff('ms', s, e) AS d "
        "FROM otel_traces GROUP BY trace_id EMIT CHANGELOG AFTER KEY EXPIRE WITH MAXSPAN 1s AND TIMEOUT 1s) "
        "SELECT trace_id, d FROM g WHERE d >= 100 SETTINGS default_hash_table='hybrid';"
    )
    sim.step([span("t1", "a", 0, 150), span("t2", "b", 0, 50)], now=0)
    assert sim.step(now=1000) == [{"trace_id": "t1", "d": 150, "_tp_delta": 1}]


@pytest.mark.parametrize("window", ["tumble(s, 5s)", "hop(s, 5s, 10s)"])
def test_an_event_below_the_aligned_watermark_is_late(window: str) -> None:
    """Proton's lateness (``TumbleWatermarkStamper``, ``HopWatermarkStamper``): the watermark is the end of the
    last window that the greatest event time minus the delay closed, and an event below it is late, for a hop
    even when some of its windows are still open (it goes into none of them); an event at or above it is
    aggregated into all its windows, out of order or not."""
    sim = Sim.of(S + f"SELECT k, window_start, count() AS n FROM {window} GROUP BY k, window_start;")
    first = -5000 if window.startswith("hop") else 0  # [0, 5s) of the tumble, [-5s, 5s) of the hop
    assert sim.step([e("a", 1, 1000), e("a", 1, 9000)], now=0) == [{"k": "a", "window_start": first, "n": 1}]
    # 9000 closed [0, 5s) of the tumble and [-5s, 5s) of the hop: the watermark is 5000 for both.  6000 is
    # behind the greatest event time but not below the watermark: on time.
    sim.step([e("a", 1, 6000)])
    # 4000 is below it: late for both, though the hop's [0, 10s) is still open.
    sim.step([e("a", 1, 4000)])
    late = [(r["tf_ts"], r["tf_reason"]) for r in sim.records if r["tf_out"] == "late"]
    rows = sim.step([e("a", 1, 30_000)])
    which = "its window [0, 5000)" if window.startswith("tumble") else "its earliest window [-5000, 5000)"
    into = "" if window.startswith("tumble") else " into none of its windows"
    assert late == [(4000, f"{which} has closed: event time 4000 is below the watermark 5000, the end of the last "
                           f"window closed by the greatest event time 9000 minus delay 0 ms; not aggregated{into}")]
    if window.startswith("tumble"):
        assert rows == [{"k": "a", "window_start": 5000, "n": 2}]
    else:
        assert rows == [
            {"k": "a", "window_start": 0, "n": 3},
            {"k": "a", "window_start": 5000, "n": 2},
        ]


def test_emit_version_counts_the_emits() -> None:
    """emit_version(): 0 for the query's first emit, one more at each emit after it (all rows of one emit,
    a changelog's retractions too, share it); ON UPDATE compares rows without it."""
    sim = Sim.of(S + "SELECT emit_version() AS v, k, count() AS n FROM tumble(s, 5s) GROUP BY k "
                 "EMIT CHANGELOG ON UPDATE;")
    assert sim.step([e("a", 1, 1000), e("b", 1, 1000)], now=0) == [
        {"v": 0, "k": "a", "n": 1, "_tp_delta": 1},
        {"v": 0, "k": "b", "n": 1, "_tp_delta": 1},
    ]
    assert sim.step([e("a", 1, 2000)]) == [
        {"v": 1, "k": "a", "n": 1, "_tp_delta": -1},
        {"v": 1, "k": "a", "n": 2, "_tp_delta": 1},
    ]
    assert sim.step(now=10) == []  # nothing changed: no emit, no number taken
    assert sim.step([e("b", 1, 3000)]) == [
        {"v": 2, "k": "b", "n": 1, "_tp_delta": -1},
        {"v": 2, "k": "b", "n": 2, "_tp_delta": 1},
    ]
