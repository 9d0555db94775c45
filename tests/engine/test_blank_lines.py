"""Blank and whitespace-only lines of CSV and JSON Lines files are no events, as pandas reads the same
files: not read, not rejected; a row of empty fields (``,,``) is a row.  The oracle is pandas' read_csv /
read_json of each file."""

from __future__ import annotations

import io
import uuid
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from tests.bad_input.harness import run
from tiltframe.engine.inputs.file_reads import read_files
from tiltframe.lang.siddhiql.parser import parse_app

APP = """
define stream S (k string, v double, ts long);
define stream One (k string);
define aggregation A from S
select k, sum(v) as total, count() as events
group by k
aggregate by ts every sec ... day;
"""
T0 = 1704412800000
#: Blank-looking lines: pandas skips all but the form feed, which it reads as a value (so does Spark).
BLANKS = ["", " ", "   ", "\t", " \t ", "\r", "\f"]

ROW = st.tuples(st.sampled_from(["x", "y", "z", ""]), st.integers(0, 99), st.integers(0, 86_399))
LINES = st.lists(st.one_of(ROW, st.sampled_from(BLANKS)), min_size=1, max_size=25)


def csv_text(lines: list, header: bool, line_break: str) -> str:
    out = ["k,v,ts"] if header else []
    for line in lines:
        out.append(line if isinstance(line, str) else f"{line[0]},{line[1]},{T0 + 1000 * line[2]}")
    return line_break.join(out) + line_break


def pandas_rows(text: str, header: bool) -> list[tuple]:
    df = pd.read_csv(io.StringIO(text), header=0 if header else None, names=None if header else ["k", "v", "ts"],
                     dtype=str, keep_default_na=False)
    return sorted(tuple(r) for r in df[["k", "v", "ts"]].itertuples(index=False))


@pytest.mark.slow
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture],
          phases=[Phase.explicit, Phase.reuse, Phase.generate])  # a Spark read per example: no slow shrinking
@given(lines=LINES, header=st.booleans(), line_break=st.sampled_from(["\n", "\r\n"]))
@example(lines=["\f", " \t ", "\t", " "], header=False, line_break="\n")  # a form feed alone is a row
def test_csv_rows_are_pandas_rows(spark, tmp_path: Path, lines: list, header: bool, line_break: str) -> None:
    """The rows Spark reads of a CSV file with blank lines here and there are the rows pandas reads.  (A
    lone CR line in a CRLF file would make it a file of mixed line breaks, whose short rows keep their CR:
    docs/bad-input.md.)"""
    if line_break == "\r\n":
        lines = [line for line in lines if line != "\r"]
    text = csv_text(lines, header, line_break)
    path = tmp_path / f"{uuid.uuid4().hex}.csv"  # a new name: Spark caches a path's listing
    path.write_text(text, newline="")
    stream = parse_app(APP).stream("S")
    frames, problems = read_files(spark, [f"file:{path}"], "csv", stream)
    assert not problems
    got = sorted((r.k or "", r.v or "", r.ts or "") for df in frames for r in df.collect())
    # pandas refuses a file with no field at all; Python's strip() would take the form feed for one.
    assert got == (pandas_rows(text, header) if text.strip(" \t\r\n") else [])


@pytest.mark.slow
def test_one_column_csv_and_json_lines(spark, tmp_path: Path) -> None:
    """In a file of one column a line of spaces is blank (pandas skips it); JSON Lines' blank lines are
    skipped by Spark's reader itself."""
    app = parse_app(APP)
    one = tmp_path / "one.csv"
    one.write_text("k\nx\n   \n\n\t\ny\n")
    frames, _ = read_files(spark, [f"file:{one}"], "csv", app.stream("One"))
    assert sorted(r.k for df in frames for r in df.collect()) == sorted(pd.read_csv(one)["k"])
    lines = tmp_path / "e.jsonl"
    lines.write_text('{"k": "x", "v": 1, "ts": 1}\n\n   \n\t\n{"k": "y", "v": 2, "ts": 2}\n\n')
    frames, _ = read_files(spark, [f"file:{lines}"], "json", app.stream("S"))
    assert sorted(r.k for df in frames for r in df.collect()) == sorted(pd.read_json(lines, lines=True)["k"])


@pytest.mark.slow
def test_blank_lines_are_neither_read_nor_rejected(spark, tmp_path: Path) -> None:
    """A run over files with blank lines: events read = the rows pandas reads; the row of empty fields
    is read and rejected (no key), as pandas reads it as a row of missing values."""
    inbox = tmp_path / "in"
    inbox.mkdir()
    texts = {
        "a.csv": f"k,v,ts\nx,1.5,{T0}\n\n   \n\t\n \t \ny,2,{T0 + 1000}\n,,\n\r\nz,3,{T0 + 2000}\n  \n",
        "b.csv": f"x,4,{T0 + 3000}\r\n\r\n  \r\ny,5,{T0 + 4000}\r\n",
    }
    for name, text in texts.items():
        (inbox / name).write_bytes(text.encode())
    frames = [pd.read_csv(io.StringIO(texts["a.csv"])),
              pd.read_csv(io.StringIO(texts["b.csv"]), header=None, names=["k", "v", "ts"])]
    df = pd.concat(frames)
    out = run(spark, APP, {"S": inbox}, tmp_path / "data")
    t = out.totals["A"]
    assert (t.events_read, t.events_rejected) == (len(df), int(df["k"].isna().sum()))
    rows = out.recorded("A")
    assert list(rows["reason"]) == ["missing field 'k'"]
    valid = df.dropna(subset=["k"])
    got = out.query('from A within "2024-01-05", "2024-01-06" per "days" select k, total, events')
    expected = valid.groupby("k").agg(total=("v", "sum"), events=("v", "size"))
    assert {r.k: (r.total, r.events) for r in got.itertuples()} == {
        k: (float(r.total), int(r.events)) for k, r in expected.iterrows()}
