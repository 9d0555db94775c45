"""Readable window times in continuous-query sinks: ``window_start``/``window_end`` stay epoch ms, and each
gets an ``_time`` twin in the app's zone, written as ISO-8601 with the offset of its instant by text sinks
and as a timestamp by Parquet and SQL tables; a callback keeps the rows as computed."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import sqlalchemy as sa
from rich.console import Console

import tiltframe as tf
from tiltframe.engine.continuous.query import window_outputs
from tiltframe.engine.sinks import (
    CallbackSink,
    ConsoleSink,
    CsvSink,
    JsonLinesSink,
    ParquetSink,
    StoreTableSink,
    readable_times,
)

WINTER, SUMMER = 1711845000000, 1711848600000  # 2024-03-31 00:30 and 01:30 GMT: Berlin moves to +02:00 between
ROWS = pd.DataFrame({"ws": [WINTER, SUMMER], "device": ["d1", "d2"], "window_end": [SUMMER, SUMMER + 3_600_000],
                     "n": [3, 4]})
COLUMNS = ("ws", "window_end")
ISO_START = ["2024-03-31T01:30:00.000+01:00", "2024-03-31T03:30:00.000+02:00"]
ISO_END = ["2024-03-31T03:30:00.000+02:00", "2024-03-31T04:30:00.000+02:00"]


def test_text_sinks_write_iso_twins_beside_the_numbers(tmp_path: Path) -> None:
    readable_times(JsonLinesSink(tmp_path / "j"), COLUMNS, "Europe/Berlin").write("s", 0, ROWS)
    lines = [json.loads(x) for x in (tmp_path / "j" / "s-batch-000000.jsonl").read_text().splitlines()]
    assert list(lines[0]) == ["ws", "ws_time", "device", "window_end", "window_end_time", "n"]
    assert [r["ws"] for r in lines] == [WINTER, SUMMER]
    assert [r["ws_time"] for r in lines] == ISO_START and [r["window_end_time"] for r in lines] == ISO_END
    readable_times(CsvSink(tmp_path / "c"), COLUMNS, "Europe/Berlin").write("s", 0, ROWS)
    csv = pd.read_csv(tmp_path / "c" / "s-batch-000000.csv")
    assert list(csv["ws_time"]) == ISO_START and list(csv["ws"]) == [WINTER, SUMMER]
    console = Console(record=True, width=200)
    readable_times(ConsoleSink(console), COLUMNS, "Europe/Berlin").write("s", 0, ROWS)
    assert ISO_START[1] in console.export_text()


def test_parquet_and_sql_tables_get_timestamps(tmp_path: Path) -> None:
    readable_times(ParquetSink(tmp_path / "p"), COLUMNS, "Europe/Berlin").write("s", 0, ROWS)
    back = pq.read_table(tmp_path / "p" / "s-batch-000000.parquet").to_pandas()
    assert list(back["ws_time"]) == [pd.Timestamp(ms, unit="ms", tz="UTC") for ms in (WINTER, SUMMER)]
    assert str(back["ws_time"].dt.tz) == "Europe/Berlin"
    with StoreTableSink(tmp_path / "out.db", "alerts") as sink:
        readable_times(sink, COLUMNS, "Europe/Berlin").write("s", 0, ROWS)
        with sink._engine.connect() as conn:
            stored = conn.execute(sa.text("SELECT ws, ws_time FROM alerts ORDER BY ws")).fetchall()
    assert [(ms, pd.Timestamp(t, tz="UTC")) for ms, t in stored] == [
        (ms, pd.Timestamp(ms, unit="ms", tz="UTC")) for ms in (WINTER, SUMMER)]


def test_a_table_made_by_an_earlier_version_keeps_its_columns(tmp_path: Path) -> None:
    with StoreTableSink(tmp_path / "out.db", "alerts") as sink:
        sink.write("s", 0, ROWS)  # as before: no _time columns
        readable_times(sink, COLUMNS, "UTC").write("s", 1, ROWS)
        assert sink.stored_columns() == [*ROWS.columns, "_stream", "_batch_id"]
        with sink._engine.connect() as conn:
            assert conn.execute(sa.text("SELECT count(*) FROM alerts")).scalar() == 4


def test_a_callback_and_frames_without_window_columns_are_left_alone() -> None:
    seen: list[pd.DataFrame] = []
    callback = CallbackSink(lambda _s, rows: seen.append(rows))
    assert readable_times(callback, COLUMNS, "UTC") is callback
    plain = JsonLinesSink("unused")
    assert readable_times(plain, (), "UTC") is plain


def test_window_outputs_are_the_selected_window_columns() -> None:
    app = tf.load_app("""
        @eventTime('ts') define stream s (device string, window_end long, ts long);
        SELECT window_start AS ws, device, max(window_end) AS window_end FROM tumble(s, 5s)
        GROUP BY window_start, device;
        SELECT device, count() AS n FROM s GROUP BY device;
    """)
    windowed, global_ = app.continuous
    assert window_outputs(app, windowed) == ("ws",)  # this window_end is of the stream
    assert window_outputs(app, global_) == ()
