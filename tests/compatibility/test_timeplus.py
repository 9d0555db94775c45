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
    # tests/stream/test_stream_smoke/0018_query_state3_window.json, id 73 ("hopping_window_aggr_with_delay_interval"),
    # written `hop(..., interval 3 second, interval 5 second) ... emit stream after watermark with delay interval 2
    # second` there.  Proton's hop watermark is the end of the last closed window (HopWatermarkStamper): 20:00:08
    # takes it to 20:00:05, so dev2's 20:00:04 that comes next is late and counts in none of its windows, not
    # even [20:00:03, 20:00:08), which is still open: dev2 counts 1 there, not 2.
    "hop_delay_late_event_in_no_window": {
        "stream": "test19_state_stream3",
        "query": "select emit_version() as emit_version, id, count(*), window_start, window_end "
        "from hop(test19_state_stream3, timestamp, 3s, 5s) group by id, window_start, window_end "
        "emit after window close with delay 2s",
        "inserts": [
            [("dev1", "ca", 51, "2020-02-02 20:00:00")],
            [("dev1", "ca", 52, "2020-02-02 20:00:02")],
            [("dev1", "ca", 53, "2020-02-02 20:00:05")],
            [("dev2", "ca", 54, "2020-02-02 20:00:03")],
            [("dev1", "ca", 55, "2020-02-02 20:00:08")],
            [("dev2", "ca", 67, "2020-02-02 20:00:04")],
            [("dev1", "ca", 55, "2020-02-02 20:00:06")],
            [("dev2", "ca", 67, "2020-02-02 20:00:11")],
        ],
        "expected": [
            [0, "dev1", 1, "2020-02-02 19:59:57", "2020-02-02 20:00:02"],
            [1, "dev1", 2, "2020-02-02 20:00:00", "2020-02-02 20:00:05"],
            [1, "dev2", 1, "2020-02-02 20:00:00", "2020-02-02 20:00:05"],
            [2, "dev1", 2, "2020-02-02 20:00:03", "2020-02-02 20:00:08"],
            [2, "dev2", 1, "2020-02-02 20:00:03", "2020-02-02 20:00:08"],
        ],
        "late": 1,
    },
    # tests/stream/test_stream_smoke/0000_smoke_case.json, id 14 ("stream hopping window count(*) w/delay"): the
    # same hop with inserts of several rows; each insert is judged against the watermark before it (20:00:05
    # after 20:00:07 is on time: not below the watermark 20:00:05), and no event is late.
    "hop_delay_multi_row_inserts": {
        "stream": "test_smoke",
        "query": "select location, count(*), window_start, window_end from hop(test_smoke, timestamp, 3s, 5s) "
        "group by location, window_start, window_end emit after window close with delay 2s",
        "inserts": [
            [("dev1", "ca", 51, "2020-02-02 20:00:00"), ("dev1", "ca", 99, "2020-02-02 20:00:02"),
             ("dev1", "ca", 87, "2020-02-02 20:00:01"), ("dev2", "ca", 66, "2020-02-02 20:00:03")],
            [("dev2", "ca", 33, "2020-02-02 20:00:07")],
            [("dev2", "ca", 46, "2020-02-02 20:00:06")],
            [("dev2", "ca", 98, "2020-02-02 20:00:05")],
            [("dev2", "ca", 101, "2020-02-02 20:00:08")],
            [("dev2", "ca", 101, "2020-02-02 20:00:07")],
            [("dev2", "ca", 56, "2020-02-02 20:00:10")],
            [("dev1", "ca", 22, "2020-02-02 20:00:11"), ("dev1", "ca", 51, "2020-02-02 20:00:14"),
             ("dev2", "ca", 62, "2020-02-02 20:00:11"), ("dev2", "ca", 47, "2020-02-02 20:00:15")],
        ],
        "expected": [
            ["ca", 2, "2020-02-02 19:59:57", "2020-02-02 20:00:02"],
            ["ca", 4, "2020-02-02 20:00:00", "2020-02-02 20:00:05"],
            ["ca", 5, "2020-02-02 20:00:03", "2020-02-02 20:00:08"],
            ["ca", 5, "2020-02-02 20:00:06", "2020-02-02 20:00:11"],
        ],
        "late": 0,
    },
    # tests/stream/test_stream_smoke/0000_smoke_case.json, id 7 ("stream tumble late events drop w/ window delay
    # interval - #107"): 20:00:50 takes the watermark to 20:00:45 (the start of the window holding 20:00:48), so
    # 20:00:34 and 20:00:37 are late; 20:00:45 is not.
    "tumble_delay_late_events_dropped": {
        "stream": "test_smoke",
        "query": "select window_start, window_end, count(*) from tumble(test_smoke, timestamp, 5s) "
        "group by window_start, window_end, value emit after window close with delay 2s",
        "inserts": [
            [("dev1", "ca", 57.3, "2020-02-02 20:00:30")],
            [("dev1", "ca", 57.3, "2020-02-02 20:00:31")],
            [("dev2", "ca", 57.3, "2020-02-02 20:00:32")],
            [("dev2", "ca", 59.3, "2020-02-02 20:00:50")],
            [("dev2", "ca", 58.3, "2020-02-02 20:00:34")],
            [("dev2", "ca", 58.3, "2020-02-02 20:00:37")],
            [("dev2", "ca", 58.3, "2020-02-02 20:00:45")],
        ],
        "expected": [["2020-02-02 20:00:30", "2020-02-02 20:00:35", 3]],
        "late": 2,
    },
    # tests/stream/test_stream_smoke/0018_query_state5_substream.json, id 106
    # ("tumble_window_aggr_in_substream_with_delay_interval"): each id has its own watermark; dev2's 20:00:07 takes
    # dev2's to 20:00:05, so dev2's 20:00:04 is late while dev1's 20:00:04 (its watermark 20:00:00) is not.
    # Rows in emission order (dev2's window closes first; Proton's test lists dev1 first and compares the rows
    # regardless of order).
    "tumble_partition_by_delay_late_per_substream": {
        "stream": "test19_state_stream5",
        "query": "select id, count(*), min(value), max(value), window_start, window_end "
        "from tumble(test19_state_stream5, timestamp, 5s) partition by id group by window_start, window_end "
        "emit after window close with delay 2s",
        "inserts": [
            [(dev, "ca", v, f"2020-02-02 20:00:{t}")] for dev, v, t in (
                ("dev1", 57.3, "00"), ("dev2", 58.3, "02"), ("dev1", 67, "03"), ("dev2", 69, "03"),
                ("dev1", 77, "06"), ("dev2", 69, "07"), ("dev1", 55, "04"), ("dev2", 66, "04"), ("dev1", 67, "07"))
        ],
        "expected": [
            ["dev2", 2, 58.3, 69, "2020-02-02 20:00:00", "2020-02-02 20:00:05"],
            ["dev1", 3, 55, 67, "2020-02-02 20:00:00", "2020-02-02 20:00:05"],
        ],
        "late": 1,
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
    # tests/stream/test_stream_smoke/0006_session_window.json, ids 17 to 20: start and end conditions, each
    # bracket kept ([, ]) or left out ((, )).  The event before the first 'ca' starts no session; 'sh' ends one.
    **{
        f"session_conditions_{name}": {
            "stream": "test7_session",
            "query": "select min(value) as lo, max(value) as hi, count(location) as n, window_start, window_end, id "
            f"from session(test7_session, 5s, {bounds}) partition by id group by window_start, window_end",
            "inserts": [
                [("dev1", loc, v, f"2020-02-02 {t}") for loc, v, t in (
                    ("sh", 60.3, "19:59:55.262"), ("ca", 57.3, "20:00:00.261"), ("ca", 58.3, "20:00:05.260"),
                    ("sh", 59.3, "20:00:08.262"), ("ca", 66, "20:00:10.263"), ("da", 67, "20:00:13.262"),
                    ("ca", 68, "20:00:16.262"), ("sh", 69, last))]
            ],
            "expected": expected,
        }
        for name, bounds, last, expected in (
            ("closed", "[location='ca', location='sh']", "20:00:18.261", [
                [57.3, 59.3, 3, "2020-02-02 20:00:00.261", "2020-02-02 20:00:08.263", "dev1"],
                [66, 69, 4, "2020-02-02 20:00:10.263", "2020-02-02 20:00:18.262", "dev1"]]),
            ("end_left_out", "[location='ca', location='sh')", "20:00:18.262", [
                [57.3, 58.3, 2, "2020-02-02 20:00:00.261", "2020-02-02 20:00:08.262", "dev1"],
                [66, 68, 3, "2020-02-02 20:00:10.263", "2020-02-02 20:00:18.262", "dev1"]]),
            ("start_left_out", "(location='ca', location='sh']", "20:00:18.262", [
                [58.3, 59.3, 2, "2020-02-02 20:00:05.260", "2020-02-02 20:00:08.263", "dev1"],
                [67, 69, 3, "2020-02-02 20:00:13.262", "2020-02-02 20:00:18.263", "dev1"]]),
            ("open", "(location='ca', location='sh')", "20:00:18.262", [
                [58.3, 58.3, 1, "2020-02-02 20:00:05.260", "2020-02-02 20:00:08.262", "dev1"],
                [67, 68, 2, "2020-02-02 20:00:13.262", "2020-02-02 20:00:18.262", "dev1"]]),
        )
    },
    # tests/stream/test_stream_smoke/0006_session_window.json, id 16: conditions without brackets keep both
    # events; the second session's end, 21.261, is less than the gap after 16.262.
    "session_conditions_without_brackets": {
        "stream": "test7_session",
        "query": "select max(value) as m, window_start, window_end, id from session(test7_session, timestamp, 5s, "
        "location='ca', location<>'ca') partition by id group by window_start, window_end",
        "inserts": [
            [("dev1", loc, v, f"2020-02-02 {t}") for loc, v, t in (
                ("sh", 60.3, "19:59:55.262"), ("ca", 57.3, "20:00:00.261"), ("ca", 58.3, "20:00:05.260"),
                ("sh", 59.3, "20:00:08.262"), ("ca", 66, "20:00:10.263"), ("ca", 67, "20:00:13.262"),
                ("ca", 68, "20:00:16.262"), ("sh", 69, "20:00:21.261"))]
        ],
        "expected": [
            [59.3, "2020-02-02 20:00:00.261", "2020-02-02 20:00:08.263", "dev1"],
            [69, "2020-02-02 20:00:10.263", "2020-02-02 20:00:21.262", "dev1"],
        ],
    },
    # tests/stream/test_stream_smoke/0006_session_window.json, id 21: no PARTITION BY and no key in GROUP BY, so
    # the sessions are shared by every event of the stream.
    "session_conditions_shared_by_all_keys": {
        "stream": "test7_session",
        "query": "select window_start, window_end, date_diff('second', window_start, window_end) as s "
        "from session(test7_session, 5s, [location='ca', location='sh')) group by window_start, window_end",
        "inserts": [
            [("dev1", loc, v, f"2020-02-02 {t}") for loc, v, t in (
                ("sh", 60.3, "19:59:55.262"), ("ca", 57.3, "20:00:00.261"), ("ca", 58.3, "20:00:05.260"),
                ("sh", 59.3, "20:00:08.262"), ("ca", 66, "20:00:10.263"), ("da", 67, "20:00:13.262"),
                ("ca", 68, "20:00:16.262"), ("sh", 69, "20:00:18.262"))]
        ],
        "expected": [
            ["2020-02-02 20:00:00.261", "2020-02-02 20:00:08.262", 8],
            ["2020-02-02 20:00:10.263", "2020-02-02 20:00:18.262", 8],
        ],
    },
    # tests/stream/test_stream_smoke/0006_session_window.json, id 22: one row per insert, as Proton takes the rows
    # of an insert one after another; the events at 01.263 come after 02.262 and are late (the watermark is the
    # query's), and a value <= 50 both starts and ends, so it ends the session it is in.  Proton's test sums
    # with `sum(value) over (partition by id)`, which is each row's own sum here.
    "session_conditions_late_events": {
        "stream": "test7_session",
        "query": "select id, window_start, window_end, sum(value) as total "
        "from session(test7_session, timestamp, 2s, [value>0, value<=50]) group by id, window_start, window_end",
        "inserts": [
            [(dev, "ca", v, f"2020-02-02 20:00:{t}")] for dev, v, t in (
                ("dev1", 100, "01.262"), ("dev2", 100, "02.262"), ("dev1", 100, "02.262"), ("dev1", 100, "01.263"),
                ("dev2", 100, "01.263"), ("dev1", 50, "03.262"), ("dev2", 50, "03.262"), ("dev2", 100, "04.262"),
                ("dev1", 100, "04.262"))
        ],
        "expected": [
            ["dev1", "2020-02-02 20:00:01.262", "2020-02-02 20:00:03.263", 250],
            ["dev2", "2020-02-02 20:00:02.262", "2020-02-02 20:00:03.263", 150],
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


def run_case(case: dict[str, Any], folder: Path, spark: Any) -> tuple[list[list[Any]], int]:
    """The case's query in an app, its inserts as files read one per micro-batch: the rows emitted and how
    many events were recorded late."""
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
    rows = [[_text(v.item() if hasattr(v, "item") else v) for v in row] for row in frame.itertuples(index=False)]
    return rows, _late_records(folder / "data")


def _late_records(data_dir: Path) -> int:
    """How many events the run recorded as late (Proton drops them silently; tiltframe keeps them)."""
    files = (data_dir / "continuous").glob("*/rejected/**/*.jsonl")
    return sum(json.loads(line)["kind"] == "late" for f in files for line in f.read_text().splitlines() if line)


@pytest.mark.parametrize("name", CASES)
def test_proton_case(name: str, tmp_path: Path, spark: Any) -> None:
    case = CASES[name]
    rows, late = run_case(case, tmp_path, spark)
    assert rows == case["expected"]
    if "late" in case:
        assert late == case["late"]
