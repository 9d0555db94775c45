"""``tiltframe replay``: the seed's first trickle example run as written over a generated metrics stream,
each output equal to pandas over the events; bad input lines come out on err and the replay goes on."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from tests.lang.trickle.test_trickle_parser import SEED_TUMBLING
from tiltframe.cli.commands import app

runner = CliRunner()
SECOND = 1_000_000_000


def test_the_seed_tumbling_example_equals_pandas(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    ingest = np.cumsum(rng.integers(0, 4 * SECOND, size=400))
    values = rng.normal(50, 20, size=400).round(3)
    (tmp_path / "q.trickle").write_text(SEED_TUMBLING, encoding="utf-8")
    lines = [json.dumps({"ingest_ns": int(t), "event": {"value": float(v), "host": "a"}})
             for t, v in zip(ingest, values, strict=True)]
    (tmp_path / "in.jsonl").write_text("\n".join([*lines[:200], "{oops", *lines[200:]]) + "\n", encoding="utf-8")
    result = runner.invoke(app, ["replay", str(tmp_path / "q.trickle"), f"in={tmp_path / 'in.jsonl'}"])
    assert result.exit_code == 0, result.output
    outputs = [json.loads(line) for line in result.stdout.splitlines()]
    errors = [o for o in outputs if "error" in o]
    assert errors == [{"stream": "err", "event": "{oops", "error": f"{tmp_path / 'in.jsonl'}, line 201: not JSON "
                                                                     "(Expecting property name enclosed in double "
                                                                     "quotes at column 2)"}]
    # The oracle: a window starts at an event and holds the events before the first one 15 s or more after
    # its start, which emits it and starts the next; the last window is still open.
    df = pd.DataFrame({"t": ingest, "v": values})
    expected, start = [], 0
    while True:
        end = int(np.searchsorted(df["t"].to_numpy(), df["t"][start] + 15 * SECOND, side="left"))
        if end >= len(df):
            break
        w = df["v"].iloc[start:end]
        expected.append({"count": len(w), "min": w.min(), "max": w.max(), "mean": w.mean(),
                         "stdev": w.std(ddof=1) if len(w) > 1 else 0.0, "var": w.var(ddof=1) if len(w) > 1 else 0.0})
        start = end
    got = [o["event"] for o in outputs if "error" not in o]
    assert [o["stream"] for o in outputs if "error" not in o] == ["out"] * len(expected)
    assert len(got) == len(expected) > 10
    for g, e in zip(got, expected, strict=True):
        assert g["count"] == e["count"] and isinstance(g["count"], int)
        for k in ("min", "max", "mean", "stdev", "var"):
            assert isinstance(g[k], float) and math.isclose(g[k], e[k], rel_tol=1e-9, abs_tol=1e-9), (k, g, e)
    assert f"401 inputs, {len(expected)} outputs, 1 on err (inputs not taken)" in result.stderr


def test_replay_names_a_wrong_input_and_an_app_it_cannot_replay(tmp_path: Path) -> None:
    (tmp_path / "q.trickle").write_text(SEED_TUMBLING, encoding="utf-8")
    wrong = runner.invoke(app, ["replay", str(tmp_path / "q.trickle"), f"events={tmp_path / 'x.jsonl'}"])
    assert wrong.exit_code == 2 and "a trickle query reads the stream 'in': give in=FILE" in wrong.stderr
    missing = runner.invoke(app, ["replay", str(tmp_path / "q.trickle"), f"in={tmp_path / 'x.jsonl'}"])
    assert missing.exit_code == 2 and "cannot be read" in missing.stderr
    (tmp_path / "a.siddhi").write_text("define stream S (a long);", encoding="utf-8")
    other = runner.invoke(app, ["replay", str(tmp_path / "a.siddhi"), f"S={tmp_path / 'x.jsonl'}"])
    assert other.exit_code == 2 and "has no continuous query to replay" in other.stderr


DEVICES = ("@eventTime('ts') define stream device_utils (device string, cpu_usage double, ts long);\n"
           "@info(name='per_window')\n"
           "SELECT window_start, device, count() AS n FROM tumble(device_utils, 5s) GROUP BY window_start, device "
           "EMIT CHANGELOG AFTER WINDOW CLOSE WITH DELAY 1s AND TIMEOUT 3s;\n")
MS = 1_000_000


def at(now_ms: int, device: str, cpu: object, ts: int) -> str:
    return json.dumps({"ingest_ns": now_ms * MS, "event": {"device": device, "cpu_usage": cpu, "ts": ts}})


@pytest.mark.slow
def test_a_continuous_query_is_replayed_an_input_at_a_time_with_its_ticks(spark, tmp_path: Path) -> None:
    """A window closes by TIMEOUT (3 s of processing time after its last event: the ingest times and the
    ticks), or when the watermark (greatest event time minus 1 s) passes its end; a late event and a bad
    value come out on err with the query's name and the reason."""
    (tmp_path / "app.siddhi").write_text(DEVICES, encoding="utf-8")
    lines = [
        at(100_000, "d1", 1, 1000), at(100_000, "d2", 1, 2000),
        at(102_000, "d1", 1, 3000),
        json.dumps({"tick": 103_000 * MS}),  # d2's window: 3 s without an event
        json.dumps({"tick": 105_000 * MS}),  # d1's
        at(106_000, "d1", 1, 4000),  # on time (watermark 2000): the window opens again
        at(106_000, "d3", 1, 9000),  # the watermark passes 5000: d1's window closes
        at(107_000, "d4", 1, 1000),  # late: its window ended at or before the watermark 8000
        at(107_000, "d4", "abc", 9500),
        "not an input",
        json.dumps({"tick": 109_000 * MS}),  # d3's window: 3 s without an event
        json.dumps({"tick": 300_000 * MS}),
    ]
    (tmp_path / "in.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = runner.invoke(app, ["replay", str(tmp_path / "app.siddhi"), f"device_utils={tmp_path / 'in.jsonl'}"])
    assert result.exit_code == 0, result.output
    got = [json.loads(line) for line in result.stdout.splitlines()]
    rows = [(o["stream"], o["event"]) for o in got if "error" not in o]
    assert rows == [
        ("per_window", {"window_start": 0, "device": "d2", "n": 1, "_tp_delta": 1}),
        ("per_window", {"window_start": 0, "device": "d1", "n": 2, "_tp_delta": 1}),
        ("per_window", {"window_start": 0, "device": "d1", "n": 1, "_tp_delta": 1}),
        ("per_window", {"window_start": 5000, "device": "d3", "n": 1, "_tp_delta": 1}),
    ]
    errors = [o for o in got if "error" in o]
    assert [o["error"].split(":")[:2] for o in errors[:2]] == [["per_window", " late"], ["per_window", " rejected"]]
    assert errors[0]["event"] == {"device": "d4", "cpu_usage": "1", "ts": "1000"}
    assert errors[1]["error"] == "per_window: rejected: field 'cpu_usage': value 'abc' is not a double"
    assert errors[2] == {"stream": "err", "event": "not an input",
                         "error": f"{tmp_path / 'in.jsonl'}, line 10: not JSON (Expecting value at column 1)"}
    # The order: each output after the input that made it.
    assert [o["event"].get("device") if "error" not in o else "err" for o in got] == [
        "d2", "d1", "d1", "err", "err", "err", "d3"]
    assert "12 inputs, 4 outputs, 3 on err (inputs not taken)" in result.stderr


@pytest.mark.slow
def test_two_periodic_queries_are_replayed_side_by_side_the_same_on_every_run(spark, tmp_path: Path) -> None:
    """The seed's global aggregation without EMIT (PERIODIC 2s) and with EMIT PERIODIC 5s over one stream: at
    each multiple of its interval where anything arrived, every group; WHERE leaves 50 out; each step's rows
    query by query."""
    stream = "@eventTime('ts') define stream device_utils (device string, cpu_usage double, ts long);\n"
    seed = "SELECT device, count(*) FROM device_utils WHERE cpu_usage > 99 GROUP BY device"
    (tmp_path / "app.siddhi").write_text(f"{stream}{seed};\n{seed} EMIT PERIODIC 5s;\n", encoding="utf-8")
    lines = [at(10_000, "d1", 100, 1), at(10_000, "d1", 50, 2), at(10_000, "d2", 100, 3),
             *(json.dumps({"tick": t * MS}) for t in (11_000, 12_000, 14_000)),
             at(14_000, "d1", 99.5, 4),
             *(json.dumps({"tick": t * MS}) for t in (16_500, 20_000))]
    (tmp_path / "in.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    runs = [runner.invoke(app, ["replay", str(tmp_path / "app.siddhi"), f"device_utils={tmp_path / 'in.jsonl'}"])
            for _ in range(2)]
    assert runs[0].exit_code == 0, runs[0].output
    assert runs[0].stdout == runs[1].stdout
    outputs = map(json.loads, runs[0].stdout.splitlines())
    got = [(o["stream"], o["event"]["device"], o["event"]["count()"]) for o in outputs]
    assert got == [
        ("continuous0", "d1", 1), ("continuous0", "d2", 1),  # at 12 s
        ("continuous0", "d1", 2), ("continuous0", "d2", 1),  # at 16.5 s, query by query
        ("continuous1", "d1", 2), ("continuous1", "d2", 1),
    ]


def test_inputs_of_several_streams_merge_by_time_each_file_in_its_order() -> None:
    from tiltframe.engine.continuous.replay import merged
    from tiltframe.engine.replay_inputs import BadLine, Event, Tick

    got = merged({"a": [Event("a1", 5), Event("a2", 3), BadLine("?", "bad"), Tick(6)],
                  "b": [Event("b1", 4), Event("b2", 5)]})
    assert [(f.stream, getattr(f.item, "value", getattr(f.item, "text", None))) for f in got] == [
        ("b", "b1"), ("a", "a1"), ("a", "a2"), ("a", "?"), ("b", "b2"), (None, None)]


DERIVED = ("@eventTime('ts') define stream S (symbol string, price double, ts long);\n"
           "from S[price > 10] select symbol, price * 2 as p, ts insert into T;\n"
           "@info(name='on_t') SELECT window_start, symbol, count() AS n, sum(p) AS total FROM tumble(T, ts, 1s) "
           "GROUP BY window_start, symbol EMIT AFTER WINDOW CLOSE;\n"
           "@info(name='on_s') SELECT window_start, count() AS n FROM tumble(S, ts, 1s) GROUP BY window_start "
           "EMIT AFTER WINDOW CLOSE;\n")


@pytest.mark.slow
def test_a_query_of_a_stream_a_stream_query_makes_is_replayed_from_its_input_stream(spark, tmp_path: Path) -> None:
    """The inputs are the input stream's; the stream query keeps prices over 10 and doubles them for the
    query reading its stream (an event it leaves out moves none of that query's clocks), while the query
    reading the input stream sees every event; a value that cannot be typed is rejected by both, named by
    each query."""
    (tmp_path / "app.siddhi").write_text(DERIVED, encoding="utf-8")

    def trade(now_ms: int, symbol: str, price: object, ts: int) -> str:
        return json.dumps({"ingest_ns": now_ms * MS, "event": {"symbol": symbol, "price": price, "ts": ts}})

    lines = [trade(1_000, "a", 11, 100), trade(1_000, "a", 5, 200), trade(1_001, "b", 20, 300),
             trade(1_002, "a", "x", 400), trade(1_003, "a", 30, 900),
             trade(1_004, "b", 12, 1500),  # the watermark passes 1000: the first windows close
             trade(1_005, "a", 1, 2600)]  # filtered out of T: only on_s's watermark passes 2000
    (tmp_path / "in.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = runner.invoke(app, ["replay", str(tmp_path / "app.siddhi"), f"S={tmp_path / 'in.jsonl'}"])
    assert result.exit_code == 0, result.output
    got = [json.loads(line) for line in result.stdout.splitlines()]
    rows = [(o["stream"], o["event"]) for o in got if "error" not in o]
    assert rows == [  # the queries in the app's order, each one's rows in its order
        ("on_t", {"window_start": 0, "symbol": "a", "n": 2, "total": 82.0}),
        ("on_t", {"window_start": 0, "symbol": "b", "n": 1, "total": 40.0}),
        ("on_s", {"window_start": 0, "n": 4}),
        ("on_s", {"window_start": 1000, "n": 1}),
    ]
    errors = sorted(o["error"] for o in got if "error" in o)
    assert errors == ["on_s: rejected: field 'price': value 'x' is not a double",
                      "on_t: rejected: field 'price': value 'x' is not a double"]


def test_a_streaming_sql_hdr_is_the_exact_percentile_within_a_bin(tmp_path: Path) -> None:
    """``hdr`` in a continuous query (its states built and merged in pandas): each window's percentile is the
    whole value of the target rank ``max(floor(q n + 0.5), 1)``, raised to its bin's top (within 1/128)."""
    (tmp_path / "q.sql").write_text(
        "@eventTime('ts') define stream calls (svc string, ms double, ts long);\n"
        "SELECT window_start, svc, hdr(ms, [0.5, 0.99]) AS h, count() AS n FROM tumble(calls, 10s) "
        "GROUP BY window_start, svc EMIT AFTER WINDOW CLOSE;\n", encoding="utf-8")
    rng = np.random.default_rng(11)
    calls = pd.DataFrame({"svc": rng.choice(["a", "b"], 160), "ms": rng.lognormal(4.0, 1.5, 160).round(2),
                          "ts": np.sort(rng.integers(0, 60_000, 160))})
    calls.loc[::23, "ms"] = -1.0  # not counted by the histogram, counted by count()
    lines = [json.dumps({"ingest_ns": int(i) * MS, "event": {"svc": s, "ms": m, "ts": int(t)}})
             for i, (s, m, t) in enumerate(calls.itertuples(index=False))]
    (tmp_path / "in.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = runner.invoke(app, ["replay", str(tmp_path / "q.sql"), f"calls={tmp_path / 'in.jsonl'}"])
    assert result.exit_code == 0, result.output
    events = [json.loads(line)["event"] for line in result.stdout.splitlines()]
    got = {(e["window_start"], e["svc"]): e for e in events}
    calls["window_start"] = calls["ts"] // 10_000 * 10_000
    closed = calls[calls["window_start"] < calls["window_start"].max()]  # the last window never closes
    assert len(got) == closed.groupby(["window_start", "svc"]).ngroups > 8
    for (start, svc), rows in closed.groupby(["window_start", "svc"]):
        out = got[(start, svc)]
        assert out["n"] == len(rows)
        whole = np.sort(np.trunc(rows["ms"][rows["ms"] >= 0].to_numpy()))
        for q, name in ((0.5, "h_p50"), (0.99, "h_p99")):
            exact = whole[max(int(q * len(whole) + 0.5), 1) - 1]
            assert exact <= out[name] < exact + max(1.0, exact / 128), (start, svc, q, out[name], exact)


def test_a_window_without_values_answers_null_in_every_sketch(tmp_path: Path) -> None:
    """A window whose values are all missing (null, or NaN written as a string the double takes): every
    sketch NULL, the distinct count 0 (its documented empty value) and count() its events; a window that
    mixes them counts only the values."""
    (tmp_path / "q.sql").write_text(
        "@eventTime('ts') define stream calls (svc string, ms double, ts long);\n"
        "SELECT window_start, svc, count() AS n, kll(ms, [0.5]) AS k, dds(ms, [0.5]) AS d, hdr(ms, [0.5]) AS h, "
        "uniq(ms) AS u, avg(ms) AS m FROM tumble(calls, 10s) GROUP BY window_start, svc EMIT AFTER WINDOW CLOSE;\n",
        encoding="utf-8")
    events = [("a", None, 1_000), ("b", 12.0, 2_000), ("a", "NaN", 3_000), ("b", None, 4_000), ("b", 30.0, 5_000),
              ("a", 5.0, 25_000)]
    lines = [json.dumps({"ingest_ns": i * MS, "event": {"svc": s, "ms": m, "ts": t}})
             for i, (s, m, t) in enumerate(events)]
    (tmp_path / "in.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = runner.invoke(app, ["replay", str(tmp_path / "q.sql"), f"calls={tmp_path / 'in.jsonl'}"])
    assert result.exit_code == 0, result.output
    got = {e["svc"]: e for e in (json.loads(line)["event"] for line in result.stdout.splitlines())}
    assert got["a"] == {"window_start": 0, "svc": "a", "n": 2, "k_p50": None, "d_p50": None, "h_p50": None,
                        "u": 0, "m": None}
    b = got["b"]
    assert (b["n"], b["h_p50"], b["u"], b["m"]) == (3, 12.0, 2, 21.0)
    assert b["k_p50"] in (12.0, 30.0)  # either has rank 1/2 of two values
    assert b["d_p50"] == pytest.approx(12.0, rel=0.01)
