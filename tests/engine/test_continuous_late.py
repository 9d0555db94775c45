"""The late rule of each window kind (docs/continuous.md, "Late events": Proton's watermark per kind), with and
without a delay, against pandas over the raw events, through a real Spark run (``tf.run``, one event a
micro-batch) and through ``tiltframe replay`` (one event an input), which must agree row for row and on
which events were late."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

import tiltframe as tf
from tiltframe.cli.commands import app as cli
from tiltframe.engine.sinks import CallbackSink

pytestmark = pytest.mark.slow
runner = CliRunner()
SIZE, SLIDE, GAP, DELAY = 1000, 300, 500, 400
WINDOWS = {"tumble": "tumble(s, 1s)", "hop": "hop(s, 300ms, 1s)", "session": "session(s, 500ms)"}
#: (query name, window kind, delay in ms)
QUERIES = [(f"{kind}{delay}", kind, delay) for kind in WINDOWS for delay in (0, DELAY)]
FIRST_FILE_NS = 1_600_000_000 * 10**9


def queries_of(kind: str) -> list[tuple[str, str, int]]:
    return [q for q in QUERIES if q[1] == kind]


def app_text(kind: str) -> str:
    """An app with the two queries of ``kind``, without and with the delay (two streaming queries a run: more
    at once starve each other's Python workers on a busy machine)."""
    lines = ["@eventTime('ts') define stream s (k string, v long, ts long);"]
    for name, _, delay in queries_of(kind):
        emit = f" EMIT AFTER WINDOW CLOSE WITH DELAY {delay}ms" if delay else ""
        lines.append(f"@info(name='{name}') SELECT window_start, window_end, k, count() AS n, sum(v) AS total "
                     f"FROM {WINDOWS[kind]} GROUP BY window_start, k{emit};")
    return "\n".join(lines) + "\n"


def events(seed: int, n: int = 18) -> pd.DataFrame:
    """Keys, values and times that move on with lags behind the true time of up to three delays: some
    events in order, some out of order but on time, some late by each kind's rule."""
    rng = np.random.default_rng(seed)
    truth = 1_000_000 + np.cumsum(rng.integers(0, 500, size=n))
    lag = np.where(rng.random(n) < 0.4, rng.integers(0, 3 * DELAY, size=n), 0)
    return pd.DataFrame({"k": rng.choice(["k1", "k2"], size=n), "v": rng.integers(1, 100, size=n),
                         "ts": (truth - lag).astype("int64")})


# --- the oracle -------------------------------------------------------------------------------------------


def windows_of(kind: str, ts: int) -> list[tuple[int, int]]:
    """The windows [start, end) holding ``ts``, by enumeration."""
    if kind == "tumble":
        return [(ts // SIZE * SIZE, ts // SIZE * SIZE + SIZE)]
    starts = range((ts - SIZE) // SLIDE * SLIDE, ts + 1, SLIDE)
    return [(s, s + SIZE) for s in starts if s <= ts < s + SIZE]


def oracle(frame: pd.DataFrame, kind: str, delay: int) -> tuple[list[tuple[Any, ...]], list[int]]:
    """The rows a query emits and the event times found late, one event a micro-batch: the watermark before an
    event is the greatest event time before it minus the delay; a tumble or hop event is late when its
    earliest window ends at or before it, a session event when its time is below it; a window (or session)
    is emitted once its end is at or before the last watermark."""
    greatest: int | None = None
    kept, late = [], []
    for k, v, ts in frame[["k", "v", "ts"]].itertuples(index=False):
        mark = None if greatest is None else greatest - delay
        if mark is not None and (ts < mark if kind == "session" else min(e for _, e in windows_of(kind, ts)) <= mark):
            late.append(int(ts))
            continue
        kept.append((k, int(v), int(ts)))
        greatest = int(ts) if greatest is None else max(greatest, int(ts))
    final = (greatest or 0) - delay
    on_time = pd.DataFrame(kept, columns=["k", "v", "ts"])
    if kind == "session":  # per key in time order: a gap of GAP or more starts a new session
        on_time = on_time.sort_values(["k", "ts"], kind="stable")
        new = on_time.groupby("k")["ts"].diff().isna() | (on_time.groupby("k")["ts"].diff() >= GAP)
        on_time["sid"] = new.cumsum()
        spans = on_time.groupby(["k", "sid"]).agg(window_start=("ts", "min"), last=("ts", "max"), n=("v", "size"),
                                                   total=("v", "sum")).reset_index()
        spans["window_end"] = spans["last"] + GAP
    else:
        spread = pd.DataFrame([(s, e, k, v) for k, v, ts in kept for s, e in windows_of(kind, ts)],
                              columns=["window_start", "window_end", "k", "v"])
        spans = spread.groupby(["window_start", "window_end", "k"]).agg(n=("v", "size"), total=("v", "sum"))
        spans = spans.reset_index()
    closed = spans[spans["window_end"] <= final]
    rows = sorted(zip(closed["window_start"].astype(int), closed["window_end"].astype(int), closed["k"],
                      closed["n"].astype(int), closed["total"].astype(int), strict=True))
    return rows, late


# --- the two engines --------------------------------------------------------------------------------------


def spark_run(frame: pd.DataFrame, folder: Path, spark: Any, names: list[str]
              ) -> tuple[dict[str, list[Any]], dict[str, list[int]]]:
    inbox = folder / "in"
    inbox.mkdir()
    for i, event in enumerate(frame.to_dict("records")):
        part = inbox / f"part-{i:04d}.json"
        part.write_text(json.dumps({k: (int(v) if k != "k" else v) for k, v in event.items()}) + "\n")
        os.utime(part, ns=(FIRST_FILE_NS + i * 10**9,) * 2)  # one event after another
    got: dict[str, list[pd.DataFrame]] = {name: [] for name in names}
    sinks = {name: CallbackSink(lambda _q, rows, name=name: got[name].append(rows.copy())) for name in got}
    tf.run(tf.load_app(folder / "app.siddhi"), {"s": str(inbox)}, data_dir=folder / "data", spark=spark,
           max_files_per_trigger=1, outputs=sinks)
    rows = {}
    for name, frames in got.items():
        out = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["window_start"])
        rows[name] = sorted(zip(*(out[c].astype(object).map(lambda x: x if isinstance(x, str) else int(x))
                                  for c in ("window_start", "window_end", "k", "n", "total")), strict=True))
    late: dict[str, list[int]] = {}
    for name in got:
        (query_dir,) = (folder / "data" / "continuous").glob(f"{name}-*")
        records = [json.loads(line) for f in sorted((query_dir / "rejected").glob("*.jsonl"))
                   for line in f.read_text().splitlines()]
        late[name] = sorted(r["event_time"] for r in records if r["kind"] == "late")
    return rows, late


def replay(frame: pd.DataFrame, folder: Path, names: list[str]
           ) -> tuple[dict[str, list[Any]], dict[str, list[int]], list[str]]:
    lines = [json.dumps({"ingest_ns": (1000 + i) * 10**6, "event": {"k": k, "v": int(v), "ts": int(ts)}})
             for i, (k, v, ts) in enumerate(frame[["k", "v", "ts"]].itertuples(index=False))]
    (folder / "in.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = runner.invoke(cli, ["replay", str(folder / "app.siddhi"), f"s={folder / 'in.jsonl'}"])
    assert result.exit_code == 0, result.output
    outputs = [json.loads(line) for line in result.stdout.splitlines()]
    rows: dict[str, list[Any]] = {name: [] for name in names}
    late: dict[str, list[int]] = {name: [] for name in names}
    errors = []
    for o in outputs:
        if o["stream"] == "err":
            name, kind, _ = o["error"].split(": ", 2)
            assert kind == "late", o
            late[name].append(int(o["event"]["ts"]))
            errors.append(o["error"])
        else:
            r = o["event"]
            rows[o["stream"]].append((r["window_start"], r["window_end"], r["k"], r["n"], r["total"]))
    return {n: sorted(r) for n, r in rows.items()}, {n: sorted(t) for n, t in late.items()}, errors


@pytest.mark.parametrize("kind", list(WINDOWS))
def test_each_kind_late_rule_on_spark_and_in_replay_equals_pandas(kind: str, spark, tmp_path: Path) -> None:
    frame = events(3)
    (tmp_path / "app.siddhi").write_text(app_text(kind), encoding="utf-8")
    names = [name for name, _, _ in queries_of(kind)]
    on_spark, late_on_spark = spark_run(frame, tmp_path, spark, names)
    replayed, late_replayed, errors = replay(frame, tmp_path, names)
    for name, _, delay in queries_of(kind):
        rows, late = oracle(frame, kind, delay)
        assert rows, name  # each query emits something
        assert on_spark[name] == rows, name
        assert replayed[name] == rows, name
        assert late_on_spark[name] == late_replayed[name] == sorted(late), name
        assert late, name  # the events exercise the rule
    # Each late event's error names its query once and says "late: " once.
    assert errors and all(e.count("late: ") == 1 for e in errors)
