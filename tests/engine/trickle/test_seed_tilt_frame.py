"""The seed's tilt frame (002, "Aggregations") run as written over a generated metrics stream: measurement,
tags, fields and a timestamp per event; ``hdr`` over each field, grouped by measurement, tags and each field
name, through windows of 10 s, 1 min, 10 min and 1 h.  Every output against pandas over the raw events:
which events each window holds (each coarser window merging the finer one's emissions), the counts exactly,
min, max, mean and percentiles within the histogram's two significant figures."""

from __future__ import annotations

import numpy as np
import pandas as pd

from tests.lang.trickle.test_trickle_parser import SEED_TILT, TILT_WINDOWS
from tiltframe.engine.replay_inputs import Event
from tiltframe.engine.trickle.graph_replay import replay
from tiltframe.lang.trickle.trickle_parser import parse_trickle

SECOND = 1_000_000_000
LEVELS = (("10secs", 10 * SECOND), ("1min", 60 * SECOND), ("10min", 600 * SECOND), ("1h", 3600 * SECOND))
PERCENTILES = ("0.5", "0.9", "0.99", "0.999")


def metrics(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({
        "t": np.cumsum(rng.integers(SECOND // 2, 3 * SECOND, size=n)),
        "measurement": rng.choice(["udp_lb_test", "burrow_group", "cpu"], size=n),  # cpu: left out by where
        "host": rng.choice(["a", "b"], size=n),
        "latency": rng.lognormal(4, 1, size=n).round(2),
        "bytes": rng.integers(0, 100_000, size=n),
    })
    df["timestamp"] = 1_700_000_000_000 + df["t"] // 1_000_000
    return df


def events(df: pd.DataFrame) -> list[Event]:
    return [Event({"measurement": r.measurement, "tags": {"host": r.host},
                   "fields": {"latency": float(r.latency), "bytes": int(r.bytes)}, "timestamp": int(r.timestamp)},
                  int(r.t)) for r in df.itertuples()]


def windows(times: list[int], interval: int) -> list[tuple[int, int]]:
    """[start, end) positions of interval windows over input times: each starts at an input and is emitted
    by the first input at or past its start + interval (not taken), which starts the next."""
    out, start = [], 0
    while start < len(times):
        end = int(np.searchsorted(times, times[start] + interval, side="left"))
        if end >= len(times):
            break
        out.append((start, end))
        start = end
    return out


def expected(df: pd.DataFrame) -> list[tuple[int, int, dict[str, object], np.ndarray, int]]:
    """(emitting event's position in ``df``, level, identity, values, first timestamp) of every output, from
    the raw events (in arrival order)."""
    kept = df[df["measurement"].isin(["udp_lb_test", "burrow_group"])]
    out = []
    for field in ("latency", "bytes"):  # each(record::keys(event.fields)): one group per field
        for (measurement, host), rows in kept.groupby(["measurement", "host"], sort=False):
            positions = rows.index.to_numpy()
            rows = rows.reset_index(drop=True)
            # level 0 takes the events; level k the emissions of level k - 1 (their times, what they held, and
            # the event that made them)
            inputs = [(int(t), [i], int(positions[i])) for i, t in enumerate(rows["t"])]
            for level, (name, interval) in enumerate(LEVELS):
                emitted = []
                for start, end in windows([t for t, _, _ in inputs], interval):
                    held = [i for _, idx, _ in inputs[start:end] for i in idx]
                    by = inputs[end][2]
                    emitted.append((inputs[end][0], held, by))
                    values = np.trunc(rows[field].to_numpy()[held]).astype(np.int64)
                    tags = {"host": host, "window": name}
                    out.append((by, level, {"measurement": measurement, "tags": tags, "class": field},
                                values, int(rows["timestamp"].iloc[held[0]])))
                inputs = emitted
    return out


def rank(values: np.ndarray, q: float) -> int:
    """The percentile as an HDR histogram ranks it (its documented rule): the value at rank
    ``max(round-half-up(q * n), 1)`` of the sorted values."""
    return int(np.sort(values)[max(int(q * len(values) + 0.5), 1) - 1])


def test_the_seed_tilt_frame_equals_pandas_over_the_raw_events() -> None:
    df = metrics(4000, seed=3)
    query = parse_trickle(TILT_WINDOWS + SEED_TILT)
    outputs = list(replay(query, events(df)))
    assert [o.error for o in outputs if o.error] == []
    assert {o.stream for o in outputs} == {"normalize"}  # a stream no select reads: its rows come out
    want = check_against_pandas([o.event for o in outputs], df)
    assert sum(w[1] == 2 for w in want) >= 4  # the 10 min level emitted several times


def check_against_pandas(outputs: list[dict], df: pd.DataFrame) -> list[tuple[int, int, dict, np.ndarray, int]]:
    """``outputs`` (in emission order) are exactly the seed's outputs over ``df``'s events (in arrival order,
    ingest time ``t``); returns the expected outputs."""
    want = expected(df)
    assert sorted(o["tags"]["window"] for o in outputs) == sorted(LEVELS[w[1]][0] for w in want)
    got = {(o["measurement"], o["tags"]["host"], o["class"], o["tags"]["window"], o["timestamp"]): o
           for o in outputs}
    assert len(got) == len(outputs)
    # The order: by the emitting event; within it group by group (each field in the event's order), the
    # finer window's output before the coarser one's.
    fields = ("latency", "bytes")
    order = sorted(want, key=lambda w: (w[0], fields.index(str(w[2]["class"])), w[1]))
    assert [(o["tags"]["window"], o["class"], o["timestamp"]) for o in outputs] == [
        (LEVELS[level][0], ident["class"], first) for _, level, ident, _, first in order]
    for _, level, ident, values, first in want:
        out = got[(ident["measurement"], ident["tags"]["host"], ident["class"], LEVELS[level][0], first)]
        assert out["tags"] == ident["tags"]
        stats = out["stats"]
        assert stats["count"] == len(values)
        assert set(stats["percentiles"]) == set(PERCENTILES)
        for got_v, exact in [(stats["min"], values.min()), (stats["max"], values.max()),
                             (stats["mean"], values.mean()),
                             *[(stats["percentiles"][p], rank(values, float(p))) for p in PERCENTILES]]:
            assert abs(got_v - exact) <= 0.01 * abs(exact) + 1, (ident, level, got_v, exact)
    return want
