"""PARTITION BY: substreams, each with its own watermark (Proton), checked step by step against the rows
Proton's own tests expect (tests/stream/test_stream_smoke/0006_session_window.json in timeplus-io/proton)."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest

from tests.engine.continuous_sim import Sim
from tiltframe.errors import DefinitionError
from tiltframe.lang import parse_app

S = "@eventTime('ts') define stream s (id string, location string, value double, ts long);\n"
T0 = int(pd.Timestamp("2020-02-02 20:00:00").value // 10**6)


def _ms(text: str) -> int:
    return int(pd.Timestamp(f"2020-02-02 {text}").value // 10**6)


def _run(query: str, inserts: list[list[tuple[str, float, str]]]) -> list[tuple[Any, ...]]:
    """Each insert one micro-batch; the rows emitted, window times as text, in a set order."""
    sim = Sim.of(S + f"@info(name='q') {query};", buckets=3)
    rows: list[dict[str, Any]] = []
    for insert in inserts:
        events = [{"id": i, "location": "ca", "value": v, "ts": _ms(t)} for i, v, t in insert]
        rows += sim.step(events, now=T0)
    text = [
        tuple(pd.Timestamp(v, unit="ms").strftime("%H:%M:%S.%f")[:-3] if k.startswith("window") else v
              for k, v in r.items())
        for r in rows
    ]
    return sorted(text, key=repr)


def test_each_key_closes_its_own_sessions() -> None:
    # Proton 0006 id 3: three devices in step, a fourth that moves ahead; each device's sessions close by
    # its own events only.
    inserts = [[(d, 57.3, t)] for t in ("20:00:00", "20:00:01") for d in ("dev1", "dev2", "dev3")]
    inserts += [[("dev4", 58.3, "20:00:05")]]
    inserts += [[(d, 57.3, t)] for t in ("20:00:06", "20:00:07") for d in ("dev1", "dev2", "dev3")]
    inserts += [[("dev4", 58.3, "20:00:11")]]
    got = _run("select count() as n, window_start, window_end, id from session(s, ts, 2s) partition by id "
               "group by window_start, window_end", inserts)
    expected = [(2, "20:00:00.000", "20:00:03.000", d) for d in ("dev1", "dev2", "dev3")]
    expected += [(1, "20:00:05.000", "20:00:07.000", "dev4")]
    assert got == sorted(expected, key=repr)


def test_out_of_order_key_keeps_its_open_session() -> None:
    # Proton 0006 id 5: dev2 at 20:00:05 does not make dev1's 20:00:03 late.
    inserts = [
        [("dev1", 57.3, "20:00:00"), ("dev2", 58.3, "20:00:01")],
        [("dev1", 66, "20:00:01"), ("dev2", 60, "20:00:02")],
        [("dev2", 67, "20:00:05")],
        [("dev1", 68, "20:00:03")],
        [("dev1", 69, "20:00:06")],
    ]
    got = _run("select max(value) as m, window_start, window_end, id from session(s, ts, 2s) partition by id "
               "group by window_start, window_end", inserts)
    expected = [
        (60.0, "20:00:01.000", "20:00:04.000", "dev2"),
        (66.0, "20:00:00.000", "20:00:03.000", "dev1"),
        (68.0, "20:00:03.000", "20:00:05.000", "dev1"),
    ]
    assert got == sorted(expected, key=repr)


def test_one_watermark_without_partition_by() -> None:
    # The same inserts grouped by id without PARTITION BY: dev2's 20:00:05 closes dev1's session at
    # 20:00:03 (the watermark is the query's), so dev1's event at 20:00:03 is late.
    inserts = [
        [("dev1", 57.3, "20:00:00"), ("dev2", 58.3, "20:00:01")],
        [("dev1", 66, "20:00:01"), ("dev2", 60, "20:00:02")],
        [("dev2", 67, "20:00:05")],
        [("dev1", 68, "20:00:03")],
    ]
    got = _run("select max(value) as m, window_start, window_end, id from session(s, ts, 2s) "
               "group by id, window_start, window_end", inserts)
    assert got == sorted([(60.0, "20:00:01.000", "20:00:04.000", "dev2"),
                          (66.0, "20:00:00.000", "20:00:03.000", "dev1")], key=repr)


def test_tumble_per_partition() -> None:
    inserts = [[("a", 1, "20:00:01")], [("b", 1, "20:00:02")], [("a", 1, "20:00:07")], [("b", 2, "20:00:04")]]
    got = _run("select sum(value) as total, window_start, window_end, id from tumble(s, ts, 5s) partition by id "
               "group by window_start, window_end", inserts)
    assert got == [(1.0, "20:00:00.000", "20:00:05.000", "a")]


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("select count() from s partition by id", "global aggregation"),
        ("select count() from tumble(s, 3 events) partition by id", "count window"),
        ("select count() from tumble(s, ts, 5s) partition by nope group by window_start", "nope"),
        ("select count() from tumble(s, ts, 5s) partition by value + 1 group by window_start", "stream attributes"),
    ],
)
def test_partition_by_refused(query: str, message: str) -> None:
    with pytest.raises(DefinitionError, match=message) as err:
        parse_app(S + f"{query};")
    assert "line 2" in str(err.value)


def test_session_ends_at_last_event_plus_gap() -> None:
    # Proton 0006 id 14: one insert, millisecond times; a session closed by the gap ends at its last event
    # plus the gap (20:00:05.261 + 5s), the next starts at 20:00:10.263.
    insert = [("dev1", 57.3, "20:00:00.262"), ("dev1", 58.3, "20:00:05.261"), ("dev1", 66, "20:00:10.263"),
              ("dev1", 67, "20:00:20")]
    got = _run("select max(value) as m, window_start, window_end, id from session(s, ts, 5s) partition by id "
               "group by window_start, window_end", [insert])
    assert got == [(58.3, "20:00:00.262", "20:00:10.261", "dev1"), (66.0, "20:00:10.263", "20:00:15.263", "dev1")]


# --- Proton's session ends (SessionWindowHelper.cpp), cases of 0006_session_window.json ----------------------


def test_max_length_starts_the_next_session_at_the_cutting_event() -> None:
    # Proton 0006 id 15 (one insert): session(5s, 10s); 20:00:10.263 is past 00.262 + 10s, so the first
    # session ends at 10.262 and the next starts at 10.263 itself (not at 20.262); 21.262 cuts that one at
    # 20.263, checked before its gap (16.262 + 5s), and stays open.
    times = ["20:00:00.262", "20:00:05.261", "20:00:08.262", "20:00:10.263", "20:00:13.262", "20:00:16.262",
             "20:00:21.262"]
    values = [57.3, 58.3, 59.3, 66, 67, 68, 69]
    got = _run("select max(value) as m, window_start, window_end, id from session(s, ts, 5s, 10s) "
               "partition by id group by window_start, window_end",
               [[("dev1", v, t) for v, t in zip(values, times, strict=True)]])
    assert got == [(59.3, "20:00:00.262", "20:00:10.262", "dev1"), (68.0, "20:00:10.263", "20:00:20.263", "dev1")]


def test_max_length_checked_before_the_gap() -> None:
    # Proton 0006 id 0, with its default max length (5 x 2s) written out: 20:00:15 is past both the gap of
    # the session at 20:00:02 and its max length, and the max length decides its end (20:00:12).
    got = _run("select max(value) as m, window_start, window_end, id from session(s, ts, 2s, 10s) "
               "partition by id group by window_start, window_end",
               [[("dev1", 57.3, "20:00:00"), ("dev2", 58.3, "20:00:00")], [("dev1", 66, "20:00:02")],
                [("dev1", 67, "20:00:15")]])
    assert got == [(57.3, "20:00:00.000", "20:00:02.000", "dev1"), (66.0, "20:00:02.000", "20:00:12.000", "dev1")]


def test_timeout_closes_a_session_1ms_after_its_last_event() -> None:
    # Proton 0006 id 23: session(10s) ... EMIT TIMEOUT 1s, inserts more than 1s apart: each event's session
    # times out alone and ends 1 ms after it.
    sim = Sim.of(S + "@info(name='q') select id, window_start, window_end, sum(value) as t from session(s, ts, 10s) "
                 "group by id, window_start, window_end emit timeout 1s;")
    rows = []
    for i, (key, value, at) in enumerate([("dev1", 1, "20:00:00"), ("dev1", 2, "20:00:02"), ("dev2", 3, "20:00:04")]):
        rows += sim.step(now=T0 + 2000 * i)  # the clock moves on between inserts, as Proton's wall time does
        rows += sim.step([{"id": key, "location": "ca", "value": value, "ts": _ms(at)}])
    rows += sim.step(now=T0 + 10_000)
    assert [(r["id"], r["window_start"] - T0, r["window_end"] - T0, r["t"]) for r in rows] == [
        ("dev1", 0, 1, 1.0), ("dev1", 2000, 2001, 2.0), ("dev2", 4000, 4001, 3.0)
    ]
