"""A trickle query on Spark (``tf.start_trickle``): the seed's tilt frame over folders of JSON-lines files,
its outputs against pandas over the raw events; a line that is not JSON and an event an aggregate cannot take
are recorded with file, line and reason, and taken by no group; a second run on the same checkpoint goes on
where the first stopped (each output once); a select that counts its groups runs on Spark as in Tremor."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import tiltframe as tf
from tests.compatibility.test_tremor_cases_parse import CASES
from tests.engine.trickle.test_seed_tilt_frame import check_against_pandas, metrics
from tests.lang.trickle.test_trickle_parser import SEED_TILT, SEED_TUMBLING, TILT_WINDOWS
from tiltframe.engine.trickle.spark_run import Downstream
from tiltframe.errors import UsageError

pytestmark = pytest.mark.slow
MS = 1_000_000
START_MS = 1_700_000_000_000


def write_files(inbox: Path, df: pd.DataFrame, files: range, per_file: int, extra: dict[int, list[str]]) -> None:
    """Files ``files`` of ``df``'s events, ``per_file`` a file, each file's modification time its events'
    ingest time ``t``; ``extra`` lines go first in the files it names."""
    inbox.mkdir(parents=True, exist_ok=True)
    for k in files:
        rows = df.iloc[k * per_file:(k + 1) * per_file]
        lines = [*extra.get(k, []), *(json.dumps(event(r)) for r in rows.itertuples())]
        path = inbox / f"metrics {k:04d}.jsonl"  # a space in the name: Spark gives it as %20
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        os.utime(path, ns=(int(rows["t"].iloc[0]), int(rows["t"].iloc[0])))


def event(r: object) -> dict[str, object]:
    return {"measurement": r.measurement, "tags": {"host": r.host},  # type: ignore[attr-defined]
            "fields": {"latency": float(r.latency), "bytes": int(r.bytes)},  # type: ignore[attr-defined]
            "timestamp": int(r.timestamp)}  # type: ignore[attr-defined]


def outputs_of(folder: Path, stream: str) -> list[dict[str, object]]:
    return [json.loads(line) for p in sorted(folder.glob(f"{stream}-batch-*.jsonl"))
            for line in p.read_text(encoding="utf-8").splitlines()]


def test_the_seed_tilt_frame_on_spark_equals_pandas_across_batches_and_a_restart(spark, tmp_path: Path) -> None:
    per_file, files = 3, 240
    df = metrics(per_file * files, seed=11)
    # One ingest time per file (its modification time, whole milliseconds), 2 to 14 s apart.
    gaps = np.random.default_rng(5).integers(2_000, 14_000, size=files)
    df["t"] = np.repeat((START_MS + np.cumsum(gaps)) * MS, per_file)
    bad_event = {"measurement": "udp_lb_test", "tags": {"host": "a"}, "fields": {"latency": "n/a", "bytes": 1},
                 "timestamp": 1}
    extra = {7: ["{oops", "", json.dumps(bad_event)]}
    inbox, out, data = tmp_path / "in", tmp_path / "out", tmp_path / "data"
    query = tf.load_trickle(TILT_WINDOWS + SEED_TILT)

    write_files(inbox, df, range(0, 150), per_file, extra)
    first = tf.start_trickle(query, inbox, data_dir=data, spark=spark, outputs={"normalize": out},
                             max_files_per_trigger=60)
    totals = first.wait()
    assert (totals.events_read, totals.errors, totals.batches) == (150 * per_file + 2, 2, 3)
    recorded = [json.loads(line) for p in sorted((first.dir / "rejected").glob("*.jsonl"))
                for line in p.read_text(encoding="utf-8").splitlines()]
    where = f"{inbox / 'metrics 0007.jsonl'}, line"
    assert recorded == [
        {"error": f"{where} 1: not JSON (Expecting property name enclosed in double quotes at column 2)",
         "event": "{oops"},
        {"error": f"{where} 3: aggr::stats::hdr takes numbers, not string ('n/a')", "event": bad_event},
    ]

    write_files(inbox, df, range(150, files), per_file, {})
    before = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "3")  # the groups' buckets stay those of the first run
    try:
        second = tf.start_trickle(query, inbox, data_dir=data, spark=spark, outputs={"normalize": out},
                                  max_files_per_trigger=60)
        assert second.wait().events_read == (files - 150) * per_file
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", before)
    again = tf.start_trickle(query, inbox, data_dir=data, spark=spark, outputs={"normalize": out})
    assert again.wait().events_read == 0  # every file read once

    got = outputs_of(out, "normalize")
    assert got and totals.outputs["normalize"] + second.totals.outputs["normalize"] == len(got)
    want = check_against_pandas(got, df)
    assert sum(w[1] == 2 for w in want) >= 4  # the 10 min level emitted several times


def test_outputs_without_a_folder_go_to_the_caller_and_errors_to_err(spark, tmp_path: Path) -> None:
    inbox = tmp_path / "in"
    inbox.mkdir()
    values = [3, 1.5, 7, "x", 2]
    for k, v in enumerate(values):  # one event a file, 10 s apart: each closes the 15 s window or not
        path = inbox / f"{k}.json"
        path.write_text(json.dumps({"value": v}) + "\n", encoding="utf-8")
        os.utime(path, ns=((START_MS + 10_000 * k) * MS,) * 2)
    seen: list[tuple[str, list[str]]] = []
    run = tf.start_trickle(tf.load_trickle(SEED_TUMBLING), inbox, data_dir=tmp_path / "data", spark=spark,
                           outputs={"err": tmp_path / "err"}, on_output=lambda s, lines: seen.append((s, lines)))
    run.wait()
    # windows: [3, 1.5] closed by 7 (at 20 s >= 0 + 15 s); "x" not taken; [7] closed by 2 (40 s >= 20 + 15 s)
    (stream, lines), = seen
    assert stream == "out" and [json.loads(x) for x in lines] == [
        {"count": 2, "min": 1.5, "max": 3.0, "mean": 2.25, "stdev": 1.0606601717798212, "var": 1.125},
        {"count": 1, "min": 7.0, "max": 7.0, "mean": 7.0, "stdev": 0.0, "var": 0.0}]
    (err,) = outputs_of(tmp_path / "err", "err")
    assert err == {"error": f"{inbox / '3.json'}, line 1: aggr::stats::min takes numbers, not string ('x')",
                   "event": {"value": "x"}}


def test_events_come_out_as_they_went_in_and_a_follow_run_takes_new_files(spark, tmp_path: Path) -> None:
    """Events of any JSON shape collected whole: nested records, arrays, unicode, integers past 2^53, -0.0,
    numbers told apart from strings; a follow run reads files written while it runs."""
    inbox, out = tmp_path / "in", tmp_path / "out"
    inbox.mkdir()
    events = [{"a": {"b": [1, 2.5, None, True]}, "s": "é ✓ \u0000"}, 9007199254740993, -0.0, "1", [], {},
              [{"deep": {"x": [[]]}}], 1e-300]
    lines = [json.dumps(e, ensure_ascii=False) for e in events]
    query = tf.load_trickle("define window w from tumbling with size = 4 end;\n"
                            "select aggr::win::collect_flattened(event) from in[w] into out;")
    (inbox / "a.jsonl").write_text("\n".join(lines[:3]) + "\n", encoding="utf-8")
    run = tf.start_trickle(query, inbox, data_dir=tmp_path / "data", spark=spark, outputs={"out": out},
                           follow=True, trigger_seconds=0.2)
    try:
        run.process()
        assert outputs_of(out, "out") == []  # three events: the window of four is not full
        (inbox / "b.jsonl").write_text("\n".join(lines[3:]) + "\n", encoding="utf-8")
        run.process()
    finally:
        run.stop()
    got = [line for p in sorted(out.glob("out-batch-*.jsonl")) for line in p.read_text(encoding="utf-8").splitlines()]
    assert [json.loads(line) for line in got] == [events[:4], events[4:]]
    assert json.loads(got[0])[1] == 9007199254740993 and str(json.loads(got[0])[2]) == "-0.0"
    assert run.totals.events_read == len(events) and run.totals.errors == 0


def test_a_group_is_one_whatever_the_order_of_its_records_keys(spark, tmp_path: Path) -> None:
    inbox, out = tmp_path / "in", tmp_path / "out"
    inbox.mkdir()
    events = [{"t": {"a": 1, "b": 2}, "v": 1}, {"t": {"b": 2, "a": 1}, "v": 2}, {"t": {"a": 2}, "v": 3}]
    (inbox / "a.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    query = tf.load_trickle("define window w from tumbling with size = 2 end;\n"
                            "select {\"t\": event.t, \"n\": aggr::stats::count()} from in[w] group by set(event.t) "
                            "into out;")
    tf.start_trickle(query, inbox, data_dir=tmp_path / "data", spark=spark, outputs={"out": out}).wait()
    assert outputs_of(out, "out") == [{"t": {"a": 1, "b": 2}, "n": 2}]


CHAIN = """\
define window pairs from tumbling with size = 2 end;
define window two from tumbling with size = 2, max_groups = 1 end;
create stream mid;
select {"g": group[0], "s": aggr::stats::sum(event.v)} from in[pairs] group by set(event.g) into mid;
select {"n": aggr::stats::count(), "total": aggr::stats::sum(event.s), "first": aggr::win::first(event.g)}
from mid[two] where event.s >= 0 into out;
"""


def test_a_chain_of_selects_runs_the_later_ones_on_the_driver_exactly_once(spark, tmp_path: Path) -> None:
    """The first select on the executors (per group), the second over its outputs in emission order on the
    driver (``max_groups`` allowed there); micro-batches of two files and a second run on the same checkpoint
    give what pandas gives over all the events."""
    rng = np.random.default_rng(2)
    events = [{"g": str(rng.choice(["a", "b", "c"])), "v": int(rng.integers(-5, 50))} for _ in range(48)]
    inbox, out = tmp_path / "in", tmp_path / "out"
    inbox.mkdir()

    def write(files: range) -> None:
        for k in files:
            path = inbox / f"{k:02d}.jsonl"
            path.write_text("".join(json.dumps(e) + "\n" for e in events[3 * k:3 * k + 3]), encoding="utf-8")
            os.utime(path, ns=((START_MS + 1000 * k) * MS,) * 2)

    query = tf.load_trickle(CHAIN)
    write(range(0, 8))
    tf.start_trickle(query, inbox, data_dir=tmp_path / "data", spark=spark, outputs={"out": out},
                     max_files_per_trigger=2).wait()
    write(range(8, 16))
    tf.start_trickle(query, inbox, data_dir=tmp_path / "data", spark=spark, outputs={"out": out},
                     max_files_per_trigger=3).wait()
    # pandas: per group, each two events in arrival order make a sum; of those with a sum of 0 or more, each
    # two in the order they were made make an output.
    frame = pd.DataFrame(events)
    frame["pair"] = frame.groupby("g").cumcount() // 2
    frame["at"] = frame.index
    pairs = frame.groupby(["g", "pair"]).agg(total=("v", "sum"), n=("v", "size"), at=("at", "max"))
    pairs = pairs[pairs["n"] == 2].sort_values("at")
    kept = [(g, int(total)) for (g, _), total in zip(pairs.index, pairs["total"], strict=True) if total >= 0]
    want = [{"n": 2, "total": float(a[1] + b[1]), "first": a[0]} for a, b in zip(kept[0::2], kept[1::2], strict=False)]
    assert outputs_of(out, "out") == want and len(want) >= 8


def test_the_later_selects_state_is_the_same_when_spark_replays_a_batch(tmp_path: Path) -> None:
    """A micro-batch replayed after a crash (its state was kept, Spark had not committed it) starts from the
    state before it, not from the one it left; a new checkpoint (batch 0 again) starts from nothing."""
    after = Downstream(tf.load_trickle(CHAIN), tmp_path / "downstream.pickle")

    def run_batch(batch_id: int, sums: list[float]) -> list[object]:
        graph = after.before(batch_id)
        assert graph is not None
        made = [o.event for s in sums for o in graph.deliver("mid", {"g": "a", "s": s}, 0)]
        after.done(batch_id, graph)
        return made

    assert run_batch(0, [1.0]) == []
    assert run_batch(1, [2.0]) == [{"n": 2, "total": 3.0, "first": "a"}]
    assert run_batch(2, [4.0]) == []
    assert run_batch(2, [4.0]) == []  # replayed: 4.0 is not taken twice
    assert run_batch(3, [8.0]) == [{"n": 2, "total": 12.0, "first": "a"}]
    assert run_batch(4, [16.0]) == []  # the window holds 16.0
    assert run_batch(0, [32.0]) == []  # a new checkpoint: 32.0 alone


def _one_event_a_file(inbox: Path, events: list[object], start: int = 0) -> None:
    """One file per event from the ``start``-th, a second apart (arrival order), named so that path order is
    not that order."""
    inbox.mkdir(parents=True, exist_ok=True)
    for k, e in enumerate(events[start:], start=start):
        path = inbox / f"{(7 * k) % 100:02d}-{k}.json"
        path.write_text(json.dumps(e) + "\n", encoding="utf-8")
        os.utime(path, ns=((START_MS + 1000 * k) * MS,) * 2)


def test_win_cardinality_counts_every_group_of_the_select_on_spark(spark, tmp_path: Path) -> None:
    """Tremor's ``cardinality`` case on Spark, two events a micro-batch: the count of groups held is the
    select's, across batches (a sequential run, every group in one state)."""
    case = CASES / "queries" / "cardinality"
    events = [json.loads(line)["event"] for line in (case / "in.jsonl").read_text(encoding="utf-8").splitlines()]
    _one_event_a_file(tmp_path / "in", events)
    run = tf.start_trickle(tf.load_trickle((case / "query.trickle").read_text(encoding="utf-8")), tmp_path / "in",
                           data_dir=tmp_path / "data", spark=spark, outputs={"out": tmp_path / "out"},
                           max_files_per_trigger=2)
    assert run.wait().batches == len(events) // 2
    want = [json.loads(line)["event"] for line in (case / "out.jsonl").read_text(encoding="utf-8").splitlines()]
    assert outputs_of(tmp_path / "out", "out") == want == [{"g": 0, "c": 3.0, "n": 2}, {"g": 1, "c": 4.0, "n": 1}]


MAX_GROUPS = """\
define window w from tumbling with size = 2, max_groups = 2 end;
select {"all": aggr::stats::count()} from in[w] into out;
select {"g": group[0], "n": aggr::stats::count()} from in[w] group by set(event.g) into out;
"""


def test_max_groups_refuses_a_new_group_past_the_limit_across_batches_and_a_restart(spark, tmp_path: Path) -> None:
    """Two groups at most: the third group's event is recorded with Tremor's reason until a group emits and
    is deleted; the select written first does not see an event the one written last failed on."""
    events = [{"g": g} for g in ["a", "b", "c", "a", "c", "c", "b"]]
    inbox, out = tmp_path / "in", tmp_path / "out"
    _one_event_a_file(inbox, events[:4])
    query = tf.load_trickle(MAX_GROUPS)
    first = tf.start_trickle(query, inbox, data_dir=tmp_path / "data", spark=spark, outputs={"out": out, "err": out},
                             max_files_per_trigger=2)
    assert first.wait().errors == 1
    _one_event_a_file(inbox, events, start=4)
    tf.start_trickle(query, inbox, data_dir=tmp_path / "data", spark=spark, outputs={"out": out, "err": out},
                     max_files_per_trigger=3).wait()
    # a, b: groups a and b; c refused (and not counted by the other select); a: a emits and is deleted, so
    # c is taken next; c emits; b emits.  The ungrouped select counts pairs of the events taken.
    assert outputs_of(out, "out") == [{"all": 2}, {"g": "a", "n": 2}, {"all": 2}, {"g": "c", "n": 2},
                                      {"g": "b", "n": 2}, {"all": 2}]
    (err,) = outputs_of(out, "err")
    assert err == {"error": f"{inbox / '14-2.json'}, line 1: Maximum number of groups reached (2): the event's "
                            'group ["c"] is not taken', "event": {"g": "c"}}


def test_an_output_for_a_stream_the_query_does_not_write_is_refused(spark, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="unknown stream the query writes 'outt' — did you mean 'out'"):
        tf.start_trickle(tf.load_trickle(SEED_TUMBLING), tmp_path, data_dir=tmp_path / "data", spark=spark,
                         outputs={"outt": tmp_path / "o"})


TICKING = """\
define window two_secs from tumbling with interval = nanos::from_seconds(2) end;
create stream counted;
select {"g": group[0], "n": aggr::stats::count()} from in[two_secs] group by set(event.g) into counted;
select {"groups": aggr::stats::count(), "events": aggr::stats::sum(event.n)} from counted[two_secs] into out;
"""


@pytest.mark.parametrize("limit", ["", ", max_groups = 10"], ids=["by group", "sequential"])
def test_a_follow_run_closes_quiet_windows_on_timer_ticks(spark, tmp_path: Path, limit: str) -> None:
    """No event comes after the first file: the first select's windows (one per group) close on a tick once
    two seconds of wall time have passed, and the second select (on the driver) on a later tick; the same
    when ``max_groups`` makes the run sequential."""
    inbox = tmp_path / "in"
    inbox.mkdir()
    path = inbox / "now.jsonl"
    path.write_text("".join(json.dumps({"g": g}) + "\n" for g in "aab"), encoding="utf-8")
    now = time.time_ns()
    os.utime(path, ns=(now, now))  # arrived now: its windows close two seconds of wall time later
    seen: list[object] = []
    query = tf.load_trickle(TICKING.replace("from_seconds(2)", f"from_seconds(2){limit}"))
    run = tf.start_trickle(query, inbox, data_dir=tmp_path / "data", spark=spark, follow=True, trigger_seconds=0.5,
                           on_output=lambda stream, lines: seen.extend(json.loads(x) for x in lines))
    try:
        deadline = time.monotonic() + 120
        while not seen and time.monotonic() < deadline:
            run.wait(0.5)
    finally:
        run.stop()
    assert seen == [{"groups": 2, "events": 3.0}]  # both groups' windows closed, then the second select's
    assert time.time_ns() - now >= 4 * 10**9  # two windows of two seconds, one after the other
