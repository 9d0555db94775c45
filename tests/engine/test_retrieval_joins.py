"""Retrieval joins whose request streams hold requests that cannot be answered: each such request is recorded
with its reason, field and value (``tf.rejected``, kind ``request``) and counted, every other request of the
same micro-batch is answered as DuckDB answers it from the raw events, and the app goes on, in one run and
in the runs after it over the same checkpoint, a replayed batch included."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pytest

import tiltframe as tf
from tiltframe.engine.sinks import CallbackSink

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]

APP = """define stream S (symbol string, price double, ts long);
define aggregation A from S select symbol, sum(price) as total, count() as n
  group by symbol aggregate by ts every sec ... min;
define stream Req (id int, symbol string, startTime string, endTime string, per string);
@info(name='q')
from Req join A on A.symbol == Req.symbol within Req.startTime, Req.endTime per Req.per
select Req.id as rid, AGG_TIMESTAMP, A.symbol, total, n insert into Out;
"""

T0 = 1_704_067_200_000  # 2024-01-01 00:00:00 GMT
WIDTH = {"seconds": 1_000, "minutes": 60_000, "sec": 1_000, "min": 60_000}


def _text(ms: int) -> str:
    return pd.Timestamp(ms, unit="ms").strftime("%Y-%m-%d %H:%M:%S")


def _events(seed: int, n: int = 300) -> pd.DataFrame:
    rng = random.Random(seed)
    return pd.DataFrame([{"symbol": rng.choice("abc"), "price": rng.randint(1, 40) / 2,
                          "ts": T0 + rng.randrange(240_000)} for _ in range(n)])


@dataclass(frozen=True)
class Bad:
    """A request that cannot be answered: the field the record must name and words of its reason."""

    row: dict[str, Any]
    field: str | None
    said: str


def _good(rng: random.Random, rid: int) -> dict[str, Any]:
    start = T0 + rng.randrange(-10_000, 240_000)
    end = start + rng.randrange(1, 200_000)
    return {"id": rid, "symbol": rng.choice("abcd"), "startTime": _text(start // 1000 * 1000),
            "endTime": _text((end // 1000 + 1) * 1000), "per": rng.choice(list(WIDTH))}


def _bad(rng: random.Random, rid: int) -> Bad:
    row = _good(rng, rid)
    kind = rng.randrange(7)
    if kind == 0:
        return Bad({**row, "per": "fortnights"}, "per", "value 'fortnights' is not a duration aggregation A keeps")
    if kind == 1:
        return Bad({**row, "per": "days"}, "per", "is not aggregated per days (it keeps: seconds, minutes)")
    if kind == 2:
        return Bad({**row, "startTime": row["endTime"], "endTime": row["startTime"]}, "startTime, endTime",
                   "the start must be before the end")
    if kind == 3:
        return Bad({k: v for k, v in row.items() if k != "startTime"}, "startTime", "missing field 'startTime'")
    if kind == 4:
        return Bad({**row, "endTime": "2024-13-01 00:00:00"}, "endTime", "value '2024-13-01 00:00:00' is not a time")
    if kind == 5:
        return Bad({**row, "id": "seven"}, "id", "value 'seven' is not a int")
    return Bad({**row, "per": None}, "per", "missing field 'per'")


def _requests(seed: int, n: int, first_id: int) -> tuple[list[dict[str, Any]], list[Bad]]:
    """``n`` requests in random order, about a third of them bad."""
    rng = random.Random(seed)
    good: list[dict[str, Any]] = []
    bad: list[Bad] = []
    for rid in range(first_id, first_id + n):
        if rng.random() < 0.35:
            bad.append(_bad(rng, rid))
        else:
            good.append(_good(rng, rid))
    return good, bad


def _write(folder: Path, name: str, good: list[dict[str, Any]], bad: list[Bad], seed: int) -> None:
    rows = [*good, *(b.row for b in bad)]
    random.Random(seed).shuffle(rows)
    folder.mkdir(exist_ok=True)
    (folder / name).write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def _oracle(events: pd.DataFrame, good: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """Per good request, the buckets that start in its range and hold its symbol's events, by DuckDB."""
    req = pd.DataFrame([{"rid": r["id"], "symbol": r["symbol"], "w": WIDTH[r["per"]],
                         "s": int(pd.Timestamp(r["startTime"]).value // 1_000_000),
                         "e": int(pd.Timestamp(r["endTime"]).value // 1_000_000)} for r in good])
    con = duckdb.connect()
    con.register("ev", events)
    con.register("req", req)
    rows = con.execute("""
        SELECT rid, ts // w * w AS bucket, ev.symbol, sum(price) AS total, count(*) AS n
        FROM req JOIN ev ON ev.symbol = req.symbol AND ts // w * w >= s AND ts // w * w < e
        GROUP BY ALL ORDER BY ALL""").fetchall()
    return [(int(r), int(b), s, float(t), int(n)) for r, b, s, t, n in rows]


def _answers(frames: list[pd.DataFrame]) -> list[tuple[Any, ...]]:
    if not frames:
        return []
    out = pd.concat(frames, ignore_index=True)
    return sorted((int(r), int(b), s, float(t), int(n))
                  for r, b, s, t, n in out[["rid", "AGG_TIMESTAMP", "symbol", "total", "n"]].itertuples(index=False))


def _as_read(row: dict[str, Any]) -> str:
    """A request as the rejected-events table keeps it (its values as read, text; absent ones left out)."""
    return json.dumps({k: str(v) for k, v in row.items() if v is not None}, sort_keys=True)


def _check_rejected(app: Any, data: Path, bad: list[Bad]) -> None:
    """Every bad request recorded once, as a request of stream Req, with its field and reason."""
    recorded = tf.rejected(app, "A", data_dir=data, limit=10_000)
    recorded = recorded[recorded["kind"] == "request"]
    assert (recorded["stream"] == "Req").all()
    found = sorted((_as_read(json.loads(raw)), field, reason)
                   for raw, field, reason in recorded[["raw", "field", "reason"]].itertuples(index=False))
    want = sorted((_as_read(b.row), b.field, b.said) for b in bad)
    assert [(r, f) for r, f, _ in found] == [(r, f) for r, f, _ in want]
    for (_, _, reason), (_, _, said) in zip(found, want, strict=True):
        assert said in reason, (reason, said)


def _drop_last_commit(checkpoint: Path) -> int:
    """Forget that Spark committed the last batch of a query's checkpoint, as a process stopped after the
    batch's work and before its commit leaves it: the next run replays that batch."""
    commits = checkpoint / "commits"
    last = max(int(p.name) for p in commits.iterdir() if p.name.isdigit())
    for name in (str(last), f".{last}.crc"):
        (commits / name).unlink(missing_ok=True)
    return last


def test_bad_requests_are_recorded_and_the_others_answered_across_batches_and_runs(spark, tmp_path: Path) -> None:
    app = tf.load_app(APP)
    events = _events(1)
    (tmp_path / "s").mkdir()
    events.to_json(tmp_path / "s" / "events.jsonl", orient="records", lines=True)
    good: list[dict[str, Any]] = []
    bad: list[Bad] = []
    for i in range(3):  # three files: three micro-batches of the join, each with good and bad requests
        g, b = _requests(10 + i, 14, 100 * i)
        _write(tmp_path / "r", f"r{i}.jsonl", g, b, i)
        good, bad = good + g, bad + b
    got: list[pd.DataFrame] = []
    inputs = {"S": str(tmp_path / "s"), "Req": str(tmp_path / "r")}
    out = {"Out": CallbackSink(lambda _s, r: got.append(r.copy()))}
    result = tf.run(app, inputs, data_dir=tmp_path / "data", spark=spark, outputs=out, max_files_per_trigger=1)
    totals = result.requests["q"]
    assert (totals.batches, totals.answered, totals.rejected) == (3, len(good), len(bad))
    assert result.requests_rejected == len(bad)
    assert _answers(got) == _oracle(events, good)
    _check_rejected(app, tmp_path / "data", bad)

    # The next run over the same checkpoint: Spark replays the last batch (as after a crash before its
    # commit), then reads a new file.  Replayed requests are answered again and recorded once.
    checkpoint = next((tmp_path / "data" / "checkpoints").glob("query-q-*"))
    last = _drop_last_commit(checkpoint)
    g, b = _requests(20, 10, 1000)
    _write(tmp_path / "r", "r3.jsonl", g, b, 3)
    replayed = json.loads(f"[{','.join((tmp_path / 'r' / f'r{last}.jsonl').read_text().splitlines())}]")
    replayed_good = [r for r in replayed if r in good]
    got.clear()
    result = tf.run(app, inputs, data_dir=tmp_path / "data", spark=spark, outputs=out, max_files_per_trigger=1)
    totals = result.requests["q"]
    replayed_bad = [x for x in bad if x.row in replayed]
    assert (totals.batches, totals.answered, totals.rejected) == (2, len(replayed_good) + len(g),
                                                                  len(replayed_bad) + len(b))
    assert _answers(got) == _oracle(events, replayed_good + g)
    _check_rejected(app, tmp_path / "data", bad + b)


def _tiltframe(args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tiltframe", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=600, check=False, env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_the_cli_goes_on_past_bad_requests_and_its_restart_too(tmp_path: Path) -> None:
    """``tiltframe run`` with one bad request among good ones: answered, recorded, exit 0; run again with
    more requests (a bad one among them), again; ``inspect`` lists them with their stream and reason."""
    app_file = tmp_path / "app.siddhi"
    app_file.write_text(APP, encoding="utf-8")
    events = _events(2, 60)
    (tmp_path / "s").mkdir()
    events.to_json(tmp_path / "s" / "events.jsonl", orient="records", lines=True)
    good = [_good(random.Random(i), i) for i in range(4)]
    bad = [Bad({**good[0], "id": 9, "per": "fortnights"}, "per", "is not a duration aggregation A keeps")]
    _write(tmp_path / "r", "r0.jsonl", good, bad, 0)
    args = ["run", str(app_file), "-i", f"S={tmp_path / 's'}", "-i", f"Req={tmp_path / 'r'}",
            "-d", str(tmp_path / "data"), "-o", f"Out={tmp_path / 'out'}"]
    done = _tiltframe(args)
    assert done.returncode == 0, done.stderr
    assert "query q: 4 requests answered, 1 rejected (see tiltframe inspect -a A)" in done.stdout
    assert "field 'per': value 'fortnights' is not a duration aggregation A keeps" in done.stderr

    more = [_good(random.Random(i), i) for i in range(10, 12)]
    late = Bad({**more[0], "id": 19, "startTime": more[0]["endTime"], "endTime": more[0]["startTime"]},
               "startTime, endTime", "the start must be before the end")
    _write(tmp_path / "r", "r1.jsonl", more, [late], 1)
    done = _tiltframe(args)
    assert done.returncode == 0, done.stderr
    assert "query q: 2 requests answered, 1 rejected" in done.stdout
    files = sorted((tmp_path / "out").rglob("*.jsonl"))
    rows = [json.loads(line) for f in files for line in f.read_text().splitlines()]
    assert sorted((r["rid"], r["AGG_TIMESTAMP"], r["symbol"], r["total"], r["n"]) for r in rows) == _oracle(
        events, good + more)
    _check_rejected(tf.load_app(APP), tmp_path / "data", [*bad, late])
    shown = _tiltframe(["inspect", str(app_file), "-d", str(tmp_path / "data"), "--format", "json"])
    assert shown.returncode == 0, shown.stderr
    (doc,) = json.loads(shown.stdout)
    assert dict((k, n) for k, n in doc["recorded_by_kind"])["request"] == 2
    requests = [r for r in doc["latest_rejected"] if r["kind"] == "request"]
    assert sorted(r["field"] for r in requests) == ["per", "startTime, endTime"]
    assert all(r["stream"] == "Req" for r in requests)
