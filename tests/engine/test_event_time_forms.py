"""Every form docs/time.md lists for an event time written as text, through every reader of one: a continuous
query's ``@eventTime`` string on Spark (``tf.run``) and in ``tiltframe replay``, a trickle window's
``script`` on Spark (``tf.start_trickle``) and in ``tiltframe replay``, and a ``within`` bound; each gives
the instant the text names (worked out here with ``datetime``), and a text that is no time is rejected with
its reason."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

import tiltframe as tf
from tiltframe.cli.commands import app as cli
from tiltframe.engine.sinks import CallbackSink
from tiltframe.timeutil.parse import FORMATS
from tiltframe.timeutil.ranges import within_range

pytestmark = pytest.mark.slow
runner = CliRunner()
MS = 1_000_000


def _ms(*args: int, offset: timedelta = timedelta(0)) -> int:
    return int(datetime(*args, tzinfo=timezone(offset)).timestamp() * 1000)  # type: ignore[misc]


#: (text, the instant it names): each row of docs/time.md's table of text forms, and its variants.
FORMS: list[tuple[str, int]] = [
    ("1704448800000", 1_704_448_800_000),
    (" 1704448800000 ", 1_704_448_800_000),
    ("2024-01-05 10:00:00", _ms(2024, 1, 5, 10)),
    ("2024-01-05 10:00", _ms(2024, 1, 5, 10)),
    ("2024-01-05 10:00:00 +05:30", _ms(2024, 1, 5, 10, offset=timedelta(hours=5, minutes=30))),
    ("2024-01-05 10:00:00 +0530", _ms(2024, 1, 5, 10, offset=timedelta(hours=5, minutes=30))),
    ("2024-01-05T10:00:00Z", _ms(2024, 1, 5, 10)),
    ("2024-01-05T10:30:00.250+00:00", _ms(2024, 1, 5, 10, 30) + 250),
    ("2024-01-05T10:00+0530", _ms(2024, 1, 5, 10, offset=timedelta(hours=5, minutes=30))),
    ("2024-01-05T23:00:00-02", _ms(2024, 1, 5, 23, offset=timedelta(hours=-2))),
    ("2024-01-05T10:00:00.123456789Z", _ms(2024, 1, 5, 10) + 123),
    ("2024-01-05T10:00:00,5Z", _ms(2024, 1, 5, 10) + 500),
    ("2024-01-05", _ms(2024, 1, 5)),
    ("1900-03-01T00:00:00Z", int((datetime(1900, 3, 1, tzinfo=UTC) - datetime(1970, 1, 1, tzinfo=UTC))
                                 / timedelta(milliseconds=1))),
]
#: Texts that name no time (an impossible date, an hour past 23, words).
BAD = ["2024-02-30", "2024-01-05T25:00:00Z", "yesterday"]
#: Forms in the order of their instants (a replay takes them one at a time: none must be late).
ORDERED = sorted(FORMS, key=lambda f: f[1])


def not_a_time(where: str, text: str) -> str:
    return f"{where}: value '{text}' is not a timestamp (expected {FORMATS})"


# --- continuous queries ---------------------------------------------------------------------------------

APP = (
    "@eventTime('ts') define stream s (k string, ts string);\n"
    "@info(name='q') SELECT k, window_start, count() AS n FROM tumble(s, 1ms) GROUP BY k, window_start "
    "EMIT ON UPDATE;\n"
)


def continuous_events() -> list[dict[str, str]]:
    return [{"k": f"f{i}", "ts": text} for i, (text, _) in enumerate(ORDERED)] + [
        {"k": f"bad{i}", "ts": text} for i, text in enumerate(BAD)]


def expected_rows() -> list[tuple[str, int]]:
    return sorted((f"f{i}", ms) for i, (_, ms) in enumerate(ORDERED))


def test_continuous_event_time_on_spark(spark, tmp_path: Path) -> None:
    (tmp_path / "app.siddhi").write_text(APP, encoding="utf-8")
    inbox = tmp_path / "in"
    inbox.mkdir()
    (inbox / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in continuous_events()))
    got: list[pd.DataFrame] = []
    tf.run(tf.load_app(tmp_path / "app.siddhi"), {"s": str(inbox)}, data_dir=tmp_path / "data", spark=spark,
           outputs={"q": CallbackSink(lambda _s, rows: got.append(rows.copy()))})
    rows = pd.concat(got, ignore_index=True)
    assert sorted(zip(rows["k"], rows["window_start"].astype("int64"), strict=True)) == expected_rows()
    files = (tmp_path / "data" / "continuous").glob("*/rejected/*.jsonl")
    records = [json.loads(line) for f in files for line in f.read_text().splitlines()]
    assert sorted((r["kind"], r["reason"]) for r in records) == sorted(
        ("rejected", not_a_time("field 'ts'", text)) for text in BAD)


def test_continuous_event_time_in_replay(spark, tmp_path: Path) -> None:
    (tmp_path / "app.siddhi").write_text(APP, encoding="utf-8")
    lines = [json.dumps({"ingest_ns": (1000 + i) * MS, "event": e}) for i, e in enumerate(continuous_events())]
    (tmp_path / "in.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = runner.invoke(cli, ["replay", str(tmp_path / "app.siddhi"), f"s={tmp_path / 'in.jsonl'}"])
    assert result.exit_code == 0, result.output
    outputs = [json.loads(line) for line in result.stdout.splitlines()]
    rows = [o["event"] for o in outputs if o["stream"] == "q"]
    assert sorted((r["k"], r["window_start"]) for r in rows) == expected_rows()
    assert [o["error"] for o in outputs if o["stream"] == "err"] == [
        "q: rejected: " + not_a_time("field 'ts'", text) for text in BAD]


# --- trickle windows over an event's own time --------------------------------------------------------------

TRICKLE = (
    "define window w from tumbling with interval = nanos::from_millis(1) script event.ts end;\n"
    'select {"g": group[0], "n": aggr::stats::count()} from in[w] group by set(event.g) into out;\n'
)


#: Tremor's script times are nanoseconds of at least 0: the forms of instants before 1970 are left out.
TRICKLE_FORMS = [(text, ms) for text, ms in FORMS if ms >= 0]


def trickle_events() -> list[object]:
    """Per form, a group of three events: the text, then 1 ns short of 1 ms after its instant (in Tremor's
    nanoseconds), then 1 ms after it, which alone makes the window emit, holding two events; a text off by
    a millisecond either way emits at the second event, or at none."""
    events: list[object] = []
    for g, (text, ms) in enumerate(TRICKLE_FORMS):
        events += [{"g": g, "ts": text}, {"g": g, "ts": ms * MS + MS - 1}, {"g": g, "ts": (ms + 1) * MS}]
    return [*events, *({"g": 100 + i, "ts": text} for i, text in enumerate(BAD))]


def check_trickle(outputs: list[object], errors: list[str]) -> None:
    assert sorted(outputs, key=lambda o: o["g"]) == [{"g": g, "n": 2} for g in range(len(TRICKLE_FORMS))]  # type: ignore[index]
    assert errors == [not_a_time("the script of window w", text) for text in BAD]


def test_trickle_window_time_in_replay(tmp_path: Path) -> None:
    (tmp_path / "q.trickle").write_text(TRICKLE, encoding="utf-8")
    lines = [json.dumps({"ingest_ns": i, "event": e}) for i, e in enumerate(trickle_events())]
    (tmp_path / "in.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = runner.invoke(cli, ["replay", str(tmp_path / "q.trickle"), f"in={tmp_path / 'in.jsonl'}"])
    assert result.exit_code == 0, result.output
    outputs = [json.loads(line) for line in result.stdout.splitlines()]
    check_trickle([o["event"] for o in outputs if o["stream"] == "out"],
                  [o["error"] for o in outputs if o["stream"] == "err"])


def test_trickle_window_time_on_spark(spark, tmp_path: Path) -> None:
    inbox = tmp_path / "in"
    inbox.mkdir()
    path = inbox / "events.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in trickle_events()), encoding="utf-8")
    os.utime(path, ns=(1_700_000_000_000 * MS,) * 2)
    seen: list[object] = []
    run = tf.start_trickle(tf.load_trickle(TRICKLE), inbox, data_dir=tmp_path / "data", spark=spark,
                           outputs={"err": tmp_path / "err"},
                           on_output=lambda _s, lines: seen.extend(json.loads(x) for x in lines))
    run.wait()
    errors = [json.loads(line) for p in sorted((tmp_path / "err").glob("err-batch-*.jsonl"))
              for line in p.read_text(encoding="utf-8").splitlines()]
    first_bad = 3 * len(TRICKLE_FORMS) + 1
    assert [e["event"] for e in errors] == [{"g": 100 + i, "ts": text} for i, text in enumerate(BAD)]
    check_trickle(seen, [e["error"].removeprefix(f"{path}, line {first_bad + i}: ") for i, e in enumerate(errors)])


# --- within bounds ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "ms"), FORMS)
def test_within_bounds(text: str, ms: int) -> None:
    assert within_range(text, "2100-01-01T00:00:00Z") == (ms, _ms(2100, 1, 1))
