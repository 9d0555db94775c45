"""Timeplus Proton's own test cases, run through tiltframe as a user would (``tf.load_app`` / ``tf.run``).

Each case is data: the query as Proton's users write it (a stream declared in SiddhiQL in front, since
tiltframe apps declare their streams), the inserts in order (one file each, read one file per micro-batch
as Proton reads one insert after another), and the rows Proton's test expects, with the place in
timeplus-io/proton it comes from.  Proton prints times as text; the expected rows here keep them as text
and the test turns tiltframe's epoch milliseconds into the same text.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import tiltframe as tf
from tiltframe.engine.sinks import CallbackSink

pytestmark = pytest.mark.slow

FIRST_INSERT_NS = 1_600_000_000 * 10**9
STREAM = "@eventTime('timestamp') define stream {name} (id string, location string, value double, timestamp string);\n"

CASES: dict[str, dict[str, Any]] = {
    # tests/stream/test_stream_smoke/0018_query_state3_window.json, id 67: the event at 20:00:04 comes after
    # 20:00:06 (watermark 20:00:04 with the delay) but its window [20:00:00, 20:00:05) is still open, so it
    # counts; 20:00:08 closes that window, the query's first emit.
    "tumble_delay_out_of_order_emit_version": {
        "stream": "test19_state_stream3",
        "query": "select emit_version() as emit_version, id, count(*), window_start, window_end "
        "from tumble(test19_state_stream3, timestamp, 5s) group by id, window_start, window_end "
        "emit after window close with delay 2s",
        "inserts": [
            [("dev1", "ca", 57.3, "2020-02-02 20:00:00")],
            [("dev1", "ca", 66, "2020-02-02 20:00:01")],
            [("dev2", "ca", 58.3, "2020-02-02 20:00:02")],
            [("dev8", "ca", 67, "2020-02-02 20:00:06")],
            [("dev2", "ca", 58.3, "2020-02-02 20:00:04")],
            [("dev8", "ca", 67, "2020-02-02 20:00:08")],
        ],
        "expected": [
            [0, "dev1", 2, "2020-02-02 20:00:00", "2020-02-02 20:00:05"],
            [0, "dev2", 2, "2020-02-02 20:00:00", "2020-02-02 20:00:05"],
        ],
    },
    # tests/stream/test_stream_smoke/0000_smoke_case.json, id 8: each window closes in its own emit, and
    # emit_version() counts the emits 0, 1, 2.
    "tumble_emit_version_per_window": {
        "stream": "test_smoke",
        "query": "select emit_version() as emit_version, window_start, window_end, count(*) "
        "from tumble(test_smoke, timestamp, 3s) where value > 50 group by window_start, window_end",
        "inserts": [
            [("dev1", "ca", 57.3, "2020-02-02 20:00:50")],
            [("dev1", "ca", 57.3, "2020-02-02 20:00:51")],
            [("dev2", "ca", 58.3, "2020-02-02 20:00:55")],
            [("dev2", "ca", 58.3, "2020-02-02 20:00:57")],
        ],
        "expected": [
            [0, "2020-02-02 20:00:48", "2020-02-02 20:00:51", 1],
            [1, "2020-02-02 20:00:51", "2020-02-02 20:00:54", 1],
            [2, "2020-02-02 20:00:54", "2020-02-02 20:00:57", 1],
        ],
    },
    # tests/stream/test_stream_smoke/0006_session_window.json, id 5: PARTITION BY id gives each device its
    # own watermark, so dev2's event at 20:00:05 neither closes dev1's session nor makes dev1's 20:00:03 late.
    "session_partition_by_own_watermark": {
        "stream": "test7_session",
        "query": "select max(value) as m, window_start, window_end, id from session(test7_session, timestamp, 2s) "
        "partition by id group by window_start, window_end",
        "inserts": [
            [("dev1", "ca", 57.3, "2020-02-02 20:00:00"), ("dev2", "ca", 58.3, "2020-02-02 20:00:01")],
            [("dev1", "ca", 66, "2020-02-02 20:00:01"), ("dev2", "ca", 60, "2020-02-02 20:00:02")],
            [("dev2", "ca", 67, "2020-02-02 20:00:05")],
            [("dev1", "ca", 68, "2020-02-02 20:00:03")],
            [("dev1", "ca", 69, "2020-02-02 20:00:06")],
        ],
        # Proton lists dev2's row first; each row is emitted in the micro-batch that closes it.
        "expected": [
            [60, "2020-02-02 20:00:01", "2020-02-02 20:00:04", "dev2"],
            [66, "2020-02-02 20:00:00", "2020-02-02 20:00:03", "dev1"],
            [68, "2020-02-02 20:00:03", "2020-02-02 20:00:05", "dev1"],
        ],
    },
    # tests/stream/test_stream_smoke/0006_session_window.json, id 15: session(5s, 10s); the event at 10.263 is
    # past 00.262 + 10s, so the first session ends at 10.262 and the next starts at that event; 21.262 cuts
    # the second at 20.263 (the max length is checked before the gap) and its own session stays open.
    "session_max_length_cuts_at_the_event": {
        "stream": "test7_session",
        "query": "select max(value) as m, window_start, window_end, id from session(test7_session, timestamp, 5s, "
        "10s) partition by id group by window_start, window_end",
        "inserts": [
            [("dev1", "ca", v, f"2020-02-02 20:00:{t}") for v, t in (
                (57.3, "00.262"), (58.3, "05.261"), (59.3, "08.262"), (66, "10.263"), (67, "13.262"),
                (68, "16.262"), (69, "21.262"))]
        ],
        "expected": [
            [59.3, "2020-02-02 20:00:00.262", "2020-02-02 20:00:10.262", "dev1"],
            [68, "2020-02-02 20:00:10.263", "2020-02-02 20:00:20.263", "dev1"],
        ],
    },
    # tests/stream/test_stream_smoke/0006_session_window.json, id 0, with Proton's default max length (5 x
    # the gap) written out, since tiltframe has none: 20:00:15 is past the second session's max length, which
    # then decides its end (20:00:12) rather than its gap.
    "session_max_length_before_gap": {
        "stream": "test7_session",
        "query": "select max(value) as m, window_start, window_end, id from session(test7_session, timestamp, 2s, "
        "10s) partition by id group by window_start, window_end",
        "inserts": [
            [("dev1", "ca", 57.3, "2020-02-02 20:00:00"), ("dev2", "ca", 58.3, "2020-02-02 20:00:00")],
            [("dev1", "ca", 66, "2020-02-02 20:00:02")],
            [("dev1", "ca", 67, "2020-02-02 20:00:15")],
        ],
        "expected": [
            [57.3, "2020-02-02 20:00:00", "2020-02-02 20:00:02", "dev1"],
            [66, "2020-02-02 20:00:02", "2020-02-02 20:00:12", "dev1"],
        ],
    },
}


def _text(value: Any) -> Any:
    """Epoch milliseconds as Proton prints a datetime(3) (milliseconds only when not whole seconds, as the
    cases write them); other values as they are."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and value > 10**12:
        text = pd.Timestamp(value, unit="ms").strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
        return text.removesuffix(".000")
    return value


def run_case(case: dict[str, Any], folder: Path, spark: Any) -> list[list[Any]]:
    """The case's query in an app, its inserts as files read one per micro-batch, the rows emitted."""
    name = case["stream"]
    (folder / "app.siddhi").write_text(STREAM.format(name=name) + f"@info(name='q')\n{case['query']};\n")
    inbox = folder / "in"
    inbox.mkdir()
    for i, insert in enumerate(case["inserts"]):
        rows = [dict(zip(("id", "location", "value", "timestamp"), r, strict=True)) for r in insert]
        part = inbox / f"part-{i:04d}.json"
        part.write_text("".join(json.dumps(r) + "\n" for r in rows))
        # One insert after another: Spark's file source takes files by modification time, and files written
        # in the same instant go into micro-batches in no set order.
        os.utime(part, ns=(FIRST_INSERT_NS + i * 10**9, FIRST_INSERT_NS + i * 10**9))
    app = tf.load_app(folder / "app.siddhi")
    got: list[pd.DataFrame] = []
    tf.run(app, {name: str(inbox)}, data_dir=folder / "data", spark=spark, max_files_per_trigger=1,
           outputs={"q": CallbackSink(lambda _s, rows: got.append(rows.copy()))})
    frame = pd.concat(got, ignore_index=True) if got else pd.DataFrame()
    return [[_text(v.item() if hasattr(v, "item") else v) for v in row] for row in frame.itertuples(index=False)]


@pytest.mark.parametrize("name", CASES)
def test_proton_case(name: str, tmp_path: Path, spark: Any) -> None:
    case = CASES[name]
    assert run_case(case, tmp_path, spark) == case["expected"]
