"""Bad-input catalogue, files: folders as real systems fill them (headers here and not there, odd names,
old modification times, files that grow, files that are not what their name says), each file read exactly
once or recorded with its reason, never a silent loss or a stuck pipeline."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

import tiltframe as tf
from tests.bad_input.harness import T0, TOTALS_APP, Outcome, run
from tiltframe.cli.commands import app as cli
from tiltframe.errors import TiltframeError

pytestmark = pytest.mark.slow



def totals(outcome: Outcome) -> dict[str, tuple[float, int]]:
    """Per key over the whole day: sum and count, from the store."""
    got = outcome.query('from A within "2024-01-05", "2024-01-06" per "days" select k, total, events')
    return {r.k: (r.total, r.events) for r in got.itertuples()}


def oracle(events: list[tuple[str, float]]) -> dict[str, tuple[float, int]]:
    out: dict[str, tuple[float, int]] = {}
    for k, v in events:
        total, n = out.get(k, (0.0, 0))
        out[k] = (total + v, n + 1)
    return out


def csv_lines(events: list[tuple[str, float]], start: int = 0) -> str:
    return "".join(f"{k},{v},{T0 + 1000 * (start + i)}\n" for i, (k, v) in enumerate(events))


def recorded(outcome: Outcome, kind: str) -> list[tuple[str, str]]:
    rows = outcome.recorded("A")
    rows = rows[rows["kind"] == kind]
    return sorted(zip(rows["value"], rows["reason"], strict=True))


# --- CSV: header, BOM, quoting -------------------------------------------------------------------------------


def test_csv_header_is_decided_per_file(spark, tmp_path: Path) -> None:
    """The first file has a header, the second none, the third another column order and an extra column:
    every event is read, none is taken for a header and no header for an event."""
    inbox = tmp_path / "in"
    inbox.mkdir()
    (inbox / "a.csv").write_text("k,v,ts\n" + csv_lines([("x", 1.0), ("y", 2.0)]))
    (inbox / "b.csv").write_text(csv_lines([("x", 4.0), ("z", 8.0)], 10))
    (inbox / "c.csv").write_text(f"TS,note,V,K\n{T0 + 50},hello,16.0,x\n")
    out = run(spark, TOTALS_APP, {"S": inbox}, tmp_path / "data")
    assert out.totals["A"].events_rejected == 0
    assert totals(out) == oracle([("x", 1.0), ("y", 2.0), ("x", 4.0), ("z", 8.0), ("x", 16.0)])


def test_a_byte_order_mark_is_not_data(spark, tmp_path: Path) -> None:
    inbox = tmp_path / "in"
    inbox.mkdir()
    (inbox / "a.csv").write_bytes(("\ufeffk,v,ts\n" + csv_lines([("x", 1.0)])).encode())
    (inbox / "b.csv").write_bytes(("\ufeff" + csv_lines([("x", 2.0)])).encode())
    out = run(spark, TOTALS_APP, {"S": inbox}, tmp_path / "data")
    assert out.totals["A"].events_rejected == 0
    assert totals(out) == oracle([("x", 1.0), ("x", 2.0)])


def test_quoted_newlines_and_crlf_keep_one_event_per_row(spark, tmp_path: Path) -> None:
    inbox = tmp_path / "in"
    inbox.mkdir()
    (inbox / "a.csv").write_bytes(f'"IB\nM",1.5,{T0}\r\n"A, Inc.",2.5,{T0}\r\nx,3.5,{T0}\r\n'.encode())
    out = run(spark, TOTALS_APP, {"S": inbox}, tmp_path / "data")
    assert totals(out) == oracle([("IB\nM", 1.5), ("A, Inc.", 2.5), ("x", 3.5)])


def test_a_quoted_carriage_return_at_the_end_of_the_last_field_is_kept(spark, tmp_path: Path) -> None:
    """The key is the last column; a quoted value ending in CR keeps it in files of line feeds and of CRLF
    (the file's own line break is given to Spark), and the CR of a CRLF line is no part of the value in a
    file that mixes both (read by line feeds, the CR taken off the last field)."""
    inbox = tmp_path / "in"
    inbox.mkdir()
    (inbox / "lf.csv").write_bytes(f'v,ts,k\n1.0,{T0},"a\r"\n2.0,{T0},b\n'.encode())
    (inbox / "crlf.csv").write_bytes(f'v,ts,k\r\n4.0,{T0},"a\r"\r\n8.0,{T0},b\r\n16.0,{T0},"c\r\n"\r\n'.encode())
    (inbox / "mixed.csv").write_bytes(f'v,ts,k\n32.0,{T0},b\r\n64.0,{T0},d\n'.encode())
    out = run(spark, TOTALS_APP, {"S": inbox}, tmp_path / "data")
    assert out.totals["A"].events_rejected == 0
    assert totals(out) == oracle([("a\r", 1.0), ("b", 2.0), ("a\r", 4.0), ("b", 8.0), ("c\r\n", 16.0), ("b", 32.0),
                                  ("d", 64.0)])


def test_csv_rows_with_missing_or_extra_fields_are_rejected(spark, tmp_path: Path) -> None:
    inbox = tmp_path / "in"
    inbox.mkdir()
    (inbox / "a.csv").write_text(f"x,1.0\nx,2.0,{T0},surplus\nx,4.0,{T0}\n")
    out = run(spark, TOTALS_APP, {"S": inbox}, tmp_path / "data")
    assert (out.totals["A"].events_aggregated, out.totals["A"].events_rejected) == (1, 2)
    assert set(out.recorded("A")["reason"]) == {"malformed record: cannot be read as a row of the stream"}
    assert totals(out) == oracle([("x", 4.0)])


def test_header_only_and_empty_files_hold_no_events(spark, tmp_path: Path) -> None:
    inbox = tmp_path / "in"
    inbox.mkdir()
    (inbox / "a.csv").write_text("k,v,ts\n")
    (inbox / "b.csv").write_text("")
    (inbox / "c.csv").write_text(csv_lines([("x", 1.0)]))
    out = run(spark, TOTALS_APP, {"S": inbox}, tmp_path / "data")
    assert (out.totals["A"].events_read, out.totals["A"].files_rejected) == (1, 0)


# --- names and times of files ---------------------------------------------------------------------------------

ODD_NAMES = ["x[1].csv", "x1.csv", "y{2}.csv", "y2.csv", "q?.csv", "star*.csv", "back\\slash.csv", "a:b.csv",
             "in box.csv", "per%20cent.csv", "hash#.csv", "é📈.csv", "UPPER.CSV"]


def test_every_file_is_read_once_whatever_its_name(spark, tmp_path: Path, store) -> None:
    """Names Spark would take for patterns (x[1] would match x1), a ':' Hadoop's checksums trip on,
    escapes, spaces, non-ASCII, an upper-case extension: each file read exactly once, on every store."""
    inbox = tmp_path / "in"
    inbox.mkdir()
    events = []
    for i, name in enumerate(ODD_NAMES):
        (inbox / name).write_text(csv_lines([(name, float(2**i))], i))
        events.append((name, float(2**i)))
    out = run(spark, TOTALS_APP, {"S": inbox}, tmp_path / "data", store=store)
    assert (out.totals["A"].events_read, out.totals["A"].files_rejected) == (len(ODD_NAMES), 0)
    assert totals(out) == oracle(events)


def test_a_backfilled_file_with_an_old_time_is_read(spark, tmp_path: Path) -> None:
    """A file added later with a modification time years back (cp -p, an unpacked archive)."""
    inbox = tmp_path / "in"
    inbox.mkdir()
    (inbox / "new.csv").write_text(csv_lines([("x", 1.0)]))
    run(spark, TOTALS_APP, {"S": inbox}, tmp_path / "data")
    old = inbox / "old.csv"
    old.write_text(csv_lines([("x", 2.0)], 5))
    os.utime(old, (1_000_000_000, 1_000_000_000))  # 2001
    out = run(spark, TOTALS_APP, {"S": inbox}, tmp_path / "data")
    assert out.totals["A"].events_read == 1
    assert totals(out) == oracle([("x", 1.0), ("x", 2.0)])


def test_files_in_subfolders_that_are_not_read_are_named(spark, tmp_path: Path, caplog) -> None:
    """A stream reads its folder's own files; files in a subfolder (an archive/, a 2024/01/ tree) are
    named at start, never skipped without a word."""
    inbox = tmp_path / "in"
    (inbox / "archive" / "2023").mkdir(parents=True)
    (inbox / "top.csv").write_text(csv_lines([("x", 1.0)]))
    (inbox / "archive" / "2023" / "old.csv").write_text(csv_lines([("x", 4.0)], 2))
    (inbox / "archive" / "2023" / "older.CSV").write_text(csv_lines([("x", 8.0)], 3))
    (inbox / "archive" / "notes.json").write_text("{}\n")  # another format: not the stream's files
    with caplog.at_level("WARNING", logger="tiltframe.engine.inputs.sources"):
        out = run(spark, TOTALS_APP, {"S": inbox}, tmp_path / "data")
    assert totals(out) == oracle([("x", 1.0)])
    (said,) = [r.getMessage() for r in caplog.records if r.name == "tiltframe.engine.inputs.sources"]
    assert f"2 csv files in its subfolders ('{inbox / 'archive' / '2023'}') are not read" in said
    assert "Give each folder its own input, or move the files into" in said


def test_partition_folders_are_read_with_every_file_below_them(spark, tmp_path: Path, caplog) -> None:
    """A folder of key=value partition folders is read as Spark reads it: every file below, plain folders
    inside a partition included; nothing to say."""
    inbox = tmp_path / "in"
    (inbox / "date=2024-01-05" / "plain").mkdir(parents=True)
    (inbox / "date=2024-01-05" / "p.csv").write_text(csv_lines([("x", 2.0)], 1))
    (inbox / "date=2024-01-05" / "plain" / "q.csv").write_text(csv_lines([("x", 8.0)], 3))
    with caplog.at_level("WARNING", logger="tiltframe.engine.inputs.sources"):
        out = run(spark, TOTALS_APP, {"S": inbox}, tmp_path / "data")
    assert totals(out) == oracle([("x", 2.0), ("x", 8.0)])
    assert not [r for r in caplog.records if r.name == "tiltframe.engine.inputs.sources"]


def refused_run(tmp_path: Path, inbox: Path) -> str:
    """What ``tiltframe run`` over ``inbox`` says when it refuses it as a usage error (exit 2), on one line."""
    app_file = tmp_path / "app.siddhi"
    app_file.write_text(TOTALS_APP)
    done = CliRunner().invoke(cli, ["run", str(app_file), "--input", f"S={inbox}", "--data-dir",
                                    str(tmp_path / "refused")])
    assert done.exit_code == 2, done.output
    return " ".join(done.output.split())


def test_a_folder_whose_files_are_all_in_subfolders_is_a_usage_error(tmp_path: Path) -> None:
    """Rather than a run that reads nothing: the error names the subfolder to give instead."""
    inbox = tmp_path / "in"
    (inbox / "2024" / "01").mkdir(parents=True)
    (inbox / "2024" / "01" / "a.csv").write_text(csv_lines([("x", 1.0)]))
    said = refused_run(tmp_path, inbox)
    assert f"no .csv, .json/.jsonl or .parquet files in '{inbox}' itself" in said
    assert f"--input S={inbox / '2024' / '01'}" in said


def test_a_folder_of_partition_folders_tells_its_format(spark, tmp_path: Path) -> None:
    """date=.../ folders are read by Spark, so their files tell the format as top-level files do."""
    inbox = tmp_path / "in"
    (inbox / "date=2024-01-05").mkdir(parents=True)
    (inbox / "date=2024-01-05" / "a.csv").write_text(csv_lines([("x", 1.0), ("y", 2.0)]))
    assert totals(run(spark, TOTALS_APP, {"S": inbox}, tmp_path / "data")) == oracle([("x", 1.0), ("y", 2.0)])


def test_partition_folders_beside_other_folders_with_files_are_a_usage_error(spark, tmp_path: Path) -> None:
    """Spark refuses such a folder (CONFLICTING_DIRECTORY_STRUCTURES) deep in its first batch; tiltframe
    says so at start, naming both kinds.  Files of its own beside the partitions are read."""
    inbox = tmp_path / "in"
    (inbox / "date=2024-01-05").mkdir(parents=True)
    (inbox / "date=2024-01-05" / "a.csv").write_text(csv_lines([("x", 1.0)]))
    (inbox / "top.csv").write_text(csv_lines([("y", 2.0)], 1))
    assert totals(run(spark, TOTALS_APP, {"S": inbox}, tmp_path / "data")) == oracle([("x", 1.0), ("y", 2.0)])
    (inbox / "docs").mkdir()
    (inbox / "docs" / "readme.txt").write_text("not events\n")
    said = refused_run(tmp_path, inbox)
    assert f"input of stream S: '{inbox}' holds key=value partition folders ('date=2024-01-05', ...)" in said
    assert f"'{inbox / 'docs'}'" in said


def test_hidden_files_wait_until_they_are_moved_in(spark, tmp_path: Path) -> None:
    """Files written under a hidden name ('.x', '_x') are not read until renamed: the atomic delivery
    docs/bad-input.md recommends."""
    inbox = tmp_path / "in"
    inbox.mkdir()
    (inbox / ".partial.csv").write_text(csv_lines([("x", 1.0)]))
    (inbox / "_copying.csv").write_text(csv_lines([("x", 2.0)]))
    (inbox / "done.csv").write_text(csv_lines([("x", 4.0)]))
    assert totals(run(spark, TOTALS_APP, {"S": inbox}, tmp_path / "data")) == oracle([("x", 4.0)])
    (inbox / ".partial.csv").rename(inbox / "partial.csv")
    assert totals(run(spark, TOTALS_APP, {"S": inbox}, tmp_path / "data")) == oracle([("x", 4.0), ("x", 1.0)])


def test_a_file_that_grows_after_it_was_read_is_reported(spark, tmp_path: Path) -> None:
    """The appended lines are not read (Spark reads a file once), but never silently: the run reports
    the file and the bytes not read, and so does ``changed_files`` (``tiltframe inspect``)."""
    inbox = tmp_path / "in"
    inbox.mkdir()
    log = inbox / "log.csv"
    log.write_text(csv_lines([("x", 1.0)]))
    size = log.stat().st_size
    app = tf.load_app(TOTALS_APP)
    tf.run(app, {"S": inbox}, data_dir=tmp_path / "data", spark=spark)
    with log.open("a") as fh:
        fh.write(csv_lines([("x", 2.0)], 3))
    result = tf.run(app, {"S": inbox}, data_dir=tmp_path / "data", spark=spark)
    [changed] = result.files_changed["A"]
    assert (changed.size_read, changed.size_now) == (size, log.stat().st_size)
    assert f"{log.stat().st_size - size} bytes" in changed.message
    assert [c.path for c in tf.changed_files(app, data_dir=tmp_path / "data")["A"]] == [changed.path]
    app_file = tmp_path / "app.siddhi"
    app_file.write_text(TOTALS_APP)
    shown = CliRunner().invoke(cli, ["inspect", str(app_file), "--data-dir", str(tmp_path / "data"),
                                     "--format", "json"])
    assert shown.exit_code == 0, shown.output
    [doc] = json.loads(shown.output)
    assert [(f["path"], f["size_read"]) for f in doc["files_changed"]] == [(changed.path, size)]


# --- files that cannot be read ---------------------------------------------------------------------------------


def _parquet(path: Path, rows: list[dict], schema: pa.Schema | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)
    return path


def test_unreadable_parquet_files_are_recorded_and_the_rest_is_read(spark, tmp_path: Path, store) -> None:
    """A truncated file, random bytes named .parquet and an empty file are each recorded with the reason;
    the good files before and after them are aggregated, on every store."""
    inbox = tmp_path / "in"
    _parquet(inbox / "a.parquet", [{"k": "x", "v": 1.0, "ts": T0}])
    whole = _parquet(tmp_path / "whole.parquet", [{"k": "x", "v": 2.0, "ts": T0}]).read_bytes()
    (inbox / "b-truncated.parquet").write_bytes(whole[: len(whole) // 2])
    (inbox / "c-random.parquet").write_bytes(os.urandom(3000))
    (inbox / "d-empty.parquet").write_bytes(b"")
    _parquet(inbox / "e.parquet", [{"k": "x", "v": 4.0, "ts": T0}])
    out = run(spark, TOTALS_APP, {"S": inbox}, tmp_path / "data", store=store)
    assert (out.totals["A"].events_read, out.totals["A"].files_rejected) == (2, 3)
    bad = recorded(out, "file")
    assert [Path(p).name for p, _ in bad] == ["b-truncated.parquet", "c-random.parquet", "d-empty.parquet"]
    assert all(reason.startswith("not a readable Parquet file: ") for _, reason in bad)
    assert totals(out) == oracle([("x", 1.0), ("x", 4.0)])
    info = out.info("A")
    assert dict(info.recorded_by_kind)["file"] == 3


def test_a_later_parquet_file_with_other_column_types_is_read_as_it_is(spark, tmp_path: Path) -> None:
    """One writer wrote v as double, a later one as int32 and ts as a timestamp, a third v as text: each
    file is read with its own schema and typed like the others."""
    inbox = tmp_path / "in"
    _parquet(inbox / "a.parquet", [{"k": "x", "v": 1.5, "ts": T0}])
    _parquet(inbox / "b.parquet", [{"k": "x", "v": 2, "ts": T0}],
             pa.schema([("k", pa.string()), ("v", pa.int32()), ("ts", pa.int64())]))
    _parquet(inbox / "c.parquet", [{"k": "x", "v": "4.25", "ts": T0}, {"k": "x", "v": "abc", "ts": T0}])
    out = run(spark, TOTALS_APP, {"S": inbox}, tmp_path / "data")
    assert (out.totals["A"].events_aggregated, out.totals["A"].events_rejected) == (3, 1)
    assert list(out.recorded("A")["reason"]) == ["field 'v': value 'abc' is not a double"]
    assert totals(out) == oracle([("x", 1.5), ("x", 2.0), ("x", 4.25)])


def test_parquet_nanosecond_timestamps_are_instants(spark, tmp_path: Path) -> None:
    """pandas writes nanosecond timestamps, which Spark reads only as longs of nanoseconds."""
    inbox = tmp_path / "in"
    table = pa.table({"k": ["x", "y"], "v": [1.0, 2.0],
                      "ts": pa.array([T0 * 1_000_000 + 1_999_999, (T0 + 86_399_000) * 1_000_000],
                                     pa.timestamp("ns", tz="UTC"))})
    inbox.mkdir()
    pq.write_table(table, inbox / "a.parquet")
    out = run(spark, TOTALS_APP, {"S": inbox}, tmp_path / "data")
    assert totals(out) == oracle([("x", 1.0), ("y", 2.0)])
    seconds = out.query('from A within "2024-01-05", "2024-01-06" per "seconds" select AGG_TIMESTAMP, k')
    assert sorted(seconds["AGG_TIMESTAMP"]) == [T0, T0 + 86_399_000]


def test_random_bytes_and_invalid_utf8_in_json_are_rejected_line_by_line(spark, tmp_path: Path, store) -> None:
    """A JSON Lines file with an invalid UTF-8 line, a file of random bytes named .json (NUL bytes
    included) and a string value holding a NUL: the bad lines are rejected with the text as read, on
    every store (PostgreSQL's text holds no NUL); the good lines are aggregated."""
    inbox = tmp_path / "in"
    inbox.mkdir()
    good = [json.dumps({"k": "x", "v": 1.0, "ts": T0}).encode(), json.dumps({"k": "x", "v": 2.0, "ts": T0}).encode()]
    (inbox / "a.json").write_bytes(good[0] + b'\n{"k": "b\xff\xfe", "v": 1, "ts": 1\n' + good[1] + b"\n")
    (inbox / "b.json").write_bytes(b"\x00\x01garbage\x00\n\xff\xfe\xfd\n")
    (inbox / "c.json").write_text(json.dumps({"k": "nul\u0000key", "v": 3.0, "ts": T0}) + "\n")
    out = run(spark, TOTALS_APP, {"S": inbox}, tmp_path / "data", store=store)
    assert (out.totals["A"].events_aggregated, out.totals["A"].events_rejected) == (2, 4)
    reasons = sorted(out.recorded("A")["reason"])
    assert reasons.count("malformed record: cannot be read as a row of the stream") == 3
    assert any("NUL character" in r for r in reasons)
    assert totals(out) == oracle([("x", 1.0), ("x", 2.0)])


def test_on_bad_file_fail_stops_at_the_first_unreadable_file(spark, tmp_path: Path) -> None:
    inbox = tmp_path / "in"
    _parquet(inbox / "a.parquet", [{"k": "x", "v": 1.0, "ts": T0}])
    (inbox / "b.parquet").write_bytes(b"PAR1 not really")
    with pytest.raises(TiltframeError, match=r"aggregation A, batch 0: .*b\.parquet: not a readable Parquet file"):
        tf.run(tf.load_app(TOTALS_APP), {"S": inbox}, data_dir=tmp_path / "data", spark=spark, on_bad_file="fail")


def test_a_file_gone_before_its_batch_is_recorded(spark, tmp_path: Path) -> None:
    """A file listed, then removed before it was read (a cleaner, a moved file): recorded, the rest read."""
    inbox = tmp_path / "in"
    inbox.mkdir()
    (inbox / "a.csv").write_text(csv_lines([("x", 1.0)]))
    (inbox / "b.csv").write_text(csv_lines([("x", 2.0)]))
    app = tf.load_app(TOTALS_APP)
    seen: list[int] = []

    def remove_b(report: object) -> None:  # after the first batch (a.csv), b.csv vanishes
        seen.append(1)
        if (inbox / "b.csv").exists():
            shutil.move(str(inbox / "b.csv"), tmp_path / "b.csv")

    result = tf.run(app, {"S": inbox}, data_dir=tmp_path / "data", spark=spark, max_files_per_trigger=1,
                    on_batch=remove_b)
    totals_ = result.aggregations["A"]
    assert (totals_.events_read, totals_.files_rejected) == (1, 1)
    [(path, reason)] = recorded(Outcome(app, tmp_path / "data", result.aggregations), "file")
    assert path.endswith("b.csv") and "file cannot be read" in reason


def test_a_parquet_file_whose_pages_are_corrupt_is_found_and_set_aside(spark, tmp_path: Path) -> None:
    """The footer reads but the data does not: the batch fails, each file is read alone, the one that fails
    alone is recorded, and the batch runs again without it."""
    inbox = tmp_path / "in"
    _parquet(inbox / "a.parquet", [{"k": "x", "v": 1.0, "ts": T0}])
    rows = [{"k": f"k{i}", "v": float(i), "ts": T0 + i} for i in range(2000)]
    broken = bytearray(_parquet(inbox / "b.parquet", rows).read_bytes())
    broken[4:2004] = os.urandom(2000)  # the first column chunk; the footer at the end stays whole
    (inbox / "b.parquet").write_bytes(bytes(broken))
    _parquet(inbox / "c.parquet", [{"k": "x", "v": 4.0, "ts": T0}])
    out = run(spark, TOTALS_APP, {"S": inbox}, tmp_path / "data")
    assert (out.totals["A"].events_read, out.totals["A"].files_rejected) == (2, 1)
    [(path, reason)] = recorded(out, "file")
    assert path.endswith("b.parquet") and reason.startswith("file cannot be read: ")
    assert totals(out) == oracle([("x", 1.0), ("x", 4.0)])
