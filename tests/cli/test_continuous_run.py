"""The Timeplus seed's example queries end to end: ``tiltframe run`` on files, rows read back from the
``--output`` directories.  Expected rows are worked out by hand from the events below.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from tests.seed003 import (
    SEED_GLOBAL_PERIODIC,
    SEED_ON_UPDATE,
    SEED_OTEL,
    SEED_PERIODIC_HAVING,
    SEED_REPEAT,
    SEED_TUMBLE_DEFAULT,
    SEED_TUMBLE_DELAY_TYPO,
)
from tiltframe.cli.commands import app

runner = CliRunner()

# The seed's queries as written (tests/seed003.py), the typo `widnow_end` fixed; streams declare their
# event-time attribute, and the REPEAT example's stream `t` receives the cars.
APP = f"""\
@eventTime('ts') define stream device_utils (device string, cpu_usage double, ts long);
@eventTime('ts') define stream car_live_data (cid string, speed double, ts long);
@eventTime('ts') define stream t (cid string, speed double, ts long);

@info(name='hot_devices')
{SEED_GLOBAL_PERIODIC};

@info(name='max_cpu')
{SEED_TUMBLE_DEFAULT};

@info(name='max_cpu_delayed')
{SEED_TUMBLE_DELAY_TYPO.replace("widnow_end", "window_end")}

@info(name='busy_windows')
{SEED_PERIODIC_HAVING};

@info(name='watched_cars')
{SEED_ON_UPDATE};

@info(name='total')
{SEED_REPEAT};
"""

DEVICES = [
    {"device": "d1", "cpu_usage": 100.0, "ts": 1000},
    {"device": "d1", "cpu_usage": 50.0, "ts": 2000},
    {"device": "d2", "cpu_usage": 99.5, "ts": 3000},
    {"device": "d2", "cpu_usage": 80.0, "ts": 6000},
    {"device": "d1", "cpu_usage": 120.0, "ts": 7000},
    {"device": "d1", "cpu_usage": 60.0, "ts": 12000},  # moves the watermark to 12 s: [0,5) and [5,10) close
]
CARS = [
    *({"cid": "c00001", "speed": 50.0, "ts": 10 * i} for i in range(350)),
    {"cid": "c00033", "speed": 60.0, "ts": 1000},
    {"cid": "c00033", "speed": 61.0, "ts": 2000},
    {"cid": "c00033", "speed": 62.0, "ts": 6000},
    {"cid": "c00022", "speed": 70.0, "ts": 7000},
    {"cid": "c00099", "speed": 10.0, "ts": 12000},
]
QUERIES = ("hot_devices", "max_cpu", "max_cpu_delayed", "busy_windows", "watched_cars", "total")


def _write(folder: Path, rows: list[dict[str, object]]) -> Path:
    folder.mkdir(parents=True)
    (folder / "part-0.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return folder


def _rows(folder: Path) -> list[dict[str, object]]:
    return [json.loads(line) for f in sorted(folder.glob("*.jsonl")) for line in f.read_text().splitlines() if line]


def _tuples(rows: list[dict[str, object]]) -> list[tuple[object, ...]]:
    return sorted(tuple(r.values()) for r in rows)


@pytest.mark.slow
def test_seed_queries_through_tiltframe_run(tmp_path: Path, spark: object) -> None:
    app_file = tmp_path / "app.siddhi"
    app_file.write_text(APP, encoding="utf-8")
    devices = _write(tmp_path / "devices", DEVICES)
    cars = _write(tmp_path / "cars", CARS)
    out = tmp_path / "out"
    args = ["run", str(app_file), "--input", f"device_utils={devices}", "--input", f"car_live_data={cars}",
            "--input", f"t={cars}", "--data-dir", str(tmp_path / "data")]
    for name in QUERIES:
        args += ["--output", f"{name}={out / name}"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output

    # PERIODIC 5s, grouped by the column selected on its own: the bounded run's final clock move emits the
    # groups that changed.
    assert _tuples(_rows(out / "hot_devices")) == [("d1", 2), ("d2", 1)]
    assert set(_rows(out / "hot_devices")[0]) == {"device", "count()"}
    # AFTER WINDOW CLOSE: the windows the watermark (12 s) passed; [10,15) stays open.
    closed = [("d1", 100.0), ("d1", 120.0), ("d2", 80.0), ("d2", 99.5)]
    assert _tuples(_rows(out / "max_cpu")) == closed
    # WITH DELAY 2s: watermark 10 s still closes [5,10).
    assert _tuples(_rows(out / "max_cpu_delayed")) == closed
    # HAVING cnt > 300: only [0,5) with 350 + 2 events.
    # window_start is epoch ms as before, and beside it its ISO-8601 twin in the app's zone (GMT here).
    assert _rows(out / "busy_windows") == [
        {"window_start": 0, "window_start_time": "1970-01-01T00:00:00.000+00:00", "cnt": 352}]
    # ON UPDATE: each group's count once (one micro-batch), nothing again when the windows close.
    assert _tuples(_rows(out / "watched_cars")) == [
        (0, "1970-01-01T00:00:00.000+00:00", "c00033", 2), (5000, "1970-01-01T00:00:05.000+00:00", "c00022", 1),
        (5000, "1970-01-01T00:00:05.000+00:00", "c00033", 1)]
    # PERIODIC 3s REPEAT: one period passed in the final clock move.
    assert _rows(out / "total") == [{"count()": 355}]
    assert "continuous query max_cpu: 4 rows emitted, 0 late events, 0 events rejected" in result.output


def test_seed_typo_is_an_unknown_column(tmp_path: Path) -> None:
    app_file = tmp_path / "typo.siddhi"
    app_file.write_text(
        "@eventTime('ts') define stream device_utils (device string, cpu_usage double, ts long);\n"
        + SEED_TUMBLE_DELAY_TYPO + "\n",
        encoding="utf-8",
    )
    result = runner.invoke(app, ["validate", str(app_file)])
    assert result.exit_code == 2
    assert "widnow_end" in result.output and "window_end" in result.output
    assert "line 4" in result.output or "4:18" in result.output


# The seed's trace example as written (WITH ... SETTINGS ...), next to a list selected as it is, to CSV.
OTEL_APP = f"""\
@eventTime('end_time')
define stream otel_traces (trace_id string, span_id string, parent_span_id string, name string,
                           start_time long, end_time long, attributes string);

@info(name='traces')
{SEED_OTEL}

@info(name='span_names')
SELECT trace_id, group_array(name) AS names, count() AS spans FROM otel_traces GROUP BY trace_id
EMIT AFTER KEY EXPIRE WITH MAXSPAN 500ms AND TIMEOUT 2s;
"""


def _spans(seed: int) -> pd.DataFrame:
    """Traces of 1 to 5 spans (a root without a parent), shuffled; some span over 500 ms, some do not."""
    rnd = random.Random(seed)
    rows = []
    for t in range(40):
        base = 1_700_000_000_000 + rnd.randrange(0, 60_000)
        for s in range(rnd.randint(1, 5)):
            start = base + rnd.randrange(0, 400)
            rows.append({
                "trace_id": f"t{t:02d}", "span_id": f"s{t}-{s}", "parent_span_id": None if s == 0 else f"s{t}-0",
                "name": rnd.choice(["GET /", "db", "cache", "naïve"]), "start_time": start,
                "end_time": start + rnd.randrange(1, 600), "attributes": json.dumps({"n": s}),
            })
    rnd.shuffle(rows)
    return pd.DataFrame(rows)


@pytest.mark.slow
def test_seed_trace_query_through_tiltframe_run(tmp_path: Path, spark: object) -> None:
    spans = _spans(7)
    app_file = tmp_path / "otel.siddhi"
    app_file.write_text(OTEL_APP, encoding="utf-8")
    folder = _write(tmp_path / "spans", spans.astype(object).where(spans.notna(), None).to_dict("records"))
    out = tmp_path / "out"
    result = runner.invoke(app, [
        "run", str(app_file), "--input", f"otel_traces={folder}", "--data-dir", str(tmp_path / "data"),
        "--output", f"traces={out / 'traces'}", "--output", f"span_names=csv:{out / 'names'}",
    ])
    assert result.exit_code == 0, result.output
    assert "continuous query traces: 40 rows emitted, 0 late events, 0 events rejected" in result.output

    # The oracle: each trace's spans grouped by pandas; every key expires once (MAXSPAN or the final TIMEOUT).
    oracle = spans.groupby("trace_id").agg(start_ts=("start_time", "min"), end_ts=("end_time", "max"))
    emitted = [json.loads(r["event"]) for r in _rows(out / "traces")]
    assert sorted(e["trace_id"] for e in emitted) == sorted(oracle.index)
    for event in emitted:
        expected = oracle.loc[event["trace_id"]]
        assert (event["start_ts"], event["end_ts"]) == (expected.start_ts, expected.end_ts)
        assert event["span_ms"] == expected.end_ts - expected.start_ts
        got = sorted((json.loads(e) for e in event["trace_events"]), key=lambda e: e["span_id"])
        mine = spans[spans.trace_id == event["trace_id"]].sort_values("span_id")
        want = [
            {k: (None if pd.isna(v) else v) for k, v in r.items() if k != "trace_id"} for r in mine.to_dict("records")
        ]
        assert got == want

    names = pd.concat([pd.read_csv(f) for f in sorted((out / "names").glob("*.csv"))], ignore_index=True)
    assert sorted(names.trace_id) == sorted(oracle.index)
    for row in names.itertuples():
        expected = spans[spans.trace_id == row.trace_id]
        assert sorted(json.loads(row.names)) == sorted(expected.name)
        assert row.spans == len(expected)
