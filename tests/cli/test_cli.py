"""The command line: help, exit codes, and run -> query -> inspect on a tiny JSON Lines input.

Expected answers are computed by hand from the input below, never from the engine.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tiltframe.cli.commands import app

runner = CliRunner()

APP = """\
define stream TradeStream (symbol string, price double, quantity long, timestamp long);

define aggregation TradeAggregation
from TradeStream
select symbol, avg(price) as avgPrice, sum(quantity) as total, count() as trades
group by symbol
aggregate by timestamp every sec ... year;
"""

# 2024-01-01 00:00:00 GMT = 1704067200000, 2024-01-02 00:00:00 = 1704153600000.
EVENTS = [
    '{"symbol": "IBM", "price": 10.0, "quantity": 5, "timestamp": 1704067200000}',
    '{"symbol": "IBM", "price": 20.0, "quantity": 7, "timestamp": 1704067200500}',
    '{"symbol": "IBM", "price": 30.0, "quantity": 1, "timestamp": 1704189600000}',  # 2024-01-02 10:00:00
    '{"symbol": "WSO2", "price": 3.5, "quantity": 2, "timestamp": 1704067199000}',  # 2023-12-31 23:59:59
    '{"symbol": "WSO2", "price": "abc", "quantity": 2, "timestamp": 1704067201000}',  # rejected: bad price
]

DAILY = (
    'from TradeAggregation within "2024-01-** **:**:**" per "days" '
    "select AGG_TIMESTAMP, symbol, total, avgPrice, trades order by AGG_TIMESTAMP"
)
YEARLY = (
    'from TradeAggregation within "2023-01-01 00:00:00", "2025-01-01 00:00:00" per "years" '
    "select symbol, total, avgPrice order by symbol"
)


@pytest.fixture
def app_file(tmp_path: Path) -> Path:
    path = tmp_path / "trades.siddhi"
    path.write_text(APP, encoding="utf-8")
    return path


@pytest.mark.parametrize("command", [[], ["run"], ["query"], ["inspect"], ["purge"], ["validate"], ["demo"], ["serve"]])
def test_help_on_every_command(command: list[str]) -> None:
    result = runner.invoke(app, [*command, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage" in result.output


def test_validate_good_app(app_file: Path) -> None:
    result = runner.invoke(app, ["validate", str(app_file)])
    assert result.exit_code == 0, result.output
    assert "TradeAggregation_SECONDS" in result.stdout
    assert "TradeAggregation_YEARS" in result.stdout


def test_validate_bad_app_exit_2_with_position(tmp_path: Path) -> None:
    bad = tmp_path / "bad.siddhi"
    bad.write_text("define stream TradeStream (symbol strng, price double);\n", encoding="utf-8")
    result = runner.invoke(app, ["validate", str(bad)])
    assert result.exit_code == 2
    assert "line 1" in result.stderr
    assert "column 35" in result.stderr
    assert "Traceback" not in result.output


def test_missing_app_file_exit_2(tmp_path: Path) -> None:
    result = runner.invoke(app, ["validate", str(tmp_path / "nope.siddhi")])
    assert result.exit_code == 2
    assert "does not exist" in result.stderr


def test_run_unknown_input_stream_exit_2(app_file: Path, tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    result = runner.invoke(
        app,
        ["run", str(app_file), "--input", f"TradeStrem={tmp_path / 'in'}", "--data-dir", str(tmp_path / "d")],
    )
    assert result.exit_code == 2
    assert "TradeStrem" in result.stderr
    assert "TradeStream" in result.stderr  # the did-you-mean suggestion


def test_run_missing_input_directory_exit_2(app_file: Path, tmp_path: Path) -> None:
    missing = tmp_path / "no-such-dir"
    result = runner.invoke(
        app, ["run", str(app_file), "--input", f"TradeStream={missing}", "--data-dir", str(tmp_path / "d")]
    )
    assert result.exit_code == 2
    assert "does not exist" in result.stderr


def test_run_unknown_bad_file_policy_exit_2_before_spark(app_file: Path, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The run's options are checked as ``tf.start`` checks them (``RunOptions``), before Spark starts."""
    from tiltframe.cli import logs

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("Spark started")

    monkeypatch.setattr(logs, "start_spark", refuse)
    (tmp_path / "in").mkdir()
    result = runner.invoke(app, ["run", str(app_file), "--input", f"TradeStream={tmp_path / 'in'}", "--data-dir",
                                 str(tmp_path / "d"), "--on-bad-file", "stop"])
    assert result.exit_code == 2, result.output
    assert "on_bad_file: unknown policy 'stop'" in result.stderr


def test_query_bad_format_exit_2(app_file: Path, tmp_path: Path) -> None:
    result = runner.invoke(
        app, ["query", str(app_file), DAILY, "--format", "xml", "--data-dir", str(tmp_path)]
    )
    assert result.exit_code == 2


@pytest.mark.slow
def test_run_then_query_and_inspect(spark: object, app_file: Path, tmp_path: Path) -> None:
    inp = tmp_path / "in"
    inp.mkdir()
    (inp / "trades.jsonl").write_text("\n".join(EVENTS) + "\n", encoding="utf-8")
    data = str(tmp_path / "data")

    result = runner.invoke(app, ["run", str(app_file), "--input", f"TradeStream={inp}", "--data-dir", data])
    assert result.exit_code == 0, result.output
    assert "events rejected" in result.stdout

    result = runner.invoke(app, ["query", str(app_file), DAILY, "--format", "json", "--data-dir", data])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert rows == [
        {"AGG_TIMESTAMP": 1704067200000, "symbol": "IBM", "total": 12, "avgPrice": 15.0, "trades": 2},
        {"AGG_TIMESTAMP": 1704153600000, "symbol": "IBM", "total": 1, "avgPrice": 30.0, "trades": 1},
    ]

    result = runner.invoke(app, ["query", str(app_file), YEARLY, "--format", "csv", "--data-dir", data])
    assert result.exit_code == 0, result.output
    lines = result.stdout.strip().splitlines()
    assert lines[0] == "symbol,total,avgPrice"
    assert [line.split(",") for line in lines[1:]] == [["IBM", "13", "20.0"], ["WSO2", "2", "3.5"]]

    result = runner.invoke(app, ["inspect", str(app_file), "--format", "json", "--data-dir", data])
    assert result.exit_code == 0, result.output
    (info,) = json.loads(result.stdout)
    assert (info["events_read"], info["events_aggregated"], info["events_rejected"]) == (5, 4, 1)
    rows_per = {t["granularity"]: t["rows"] for t in info["tables"]}
    # IBM: 2 distinct seconds/days, 1 year; WSO2: 1 of each.
    assert rows_per["seconds"] == 3
    assert rows_per["days"] == 3
    assert rows_per["years"] == 2
    assert len(info["latest_rejected"]) == 1
    assert "price" in info["latest_rejected"][0]["reason"]

    result = runner.invoke(app, ["inspect", str(app_file), "--data-dir", data])
    assert result.exit_code == 0, result.output
    assert "TradeAggregation_SECONDS" in result.stdout
    assert "abc" in result.stdout  # the latest rejected event is shown

    # A second run finds nothing new (checkpoint) and leaves the answers unchanged.
    result = runner.invoke(app, ["run", str(app_file), "--input", f"TradeStream={inp}", "--data-dir", data])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["query", str(app_file), DAILY, "--format", "json", "--data-dir", data])
    assert json.loads(result.stdout) == rows

    # Readers never write: query, inspect, and a run without input leave every file of the database as it
    # is, and create none (no -wal, -shm or lock file: tests/cli/test_read_only_query.py).
    def database() -> dict[str, tuple[int, int]]:
        return {f.name: (f.stat().st_mtime_ns, f.stat().st_size) for f in (tmp_path / "data").glob("tiltframe.db*")}

    before = database()
    for command in (["query", str(app_file), DAILY], ["inspect", str(app_file)], ["run", str(app_file)]):
        result = runner.invoke(app, [*command, "--data-dir", data])
        assert result.exit_code == 0, result.output
    assert database() == before
    assert "only read" in result.stdout

    # Purge by the seed's default retention, from the latest event (2024-01-02 10:00:00): seconds keep
    # buckets from 09:58:00, minutes from 2024-01-01 10:00:00; hours and coarser keep everything here.
    result = runner.invoke(app, ["purge", str(app_file), "--data-dir", data])
    assert result.exit_code == 0, result.output
    assert "2024-01-02 09:58:00" in result.stdout and "2024-01-01 10:00:00" in result.stdout
    result = runner.invoke(app, ["inspect", str(app_file), "--format", "json", "--data-dir", data])
    (info,) = json.loads(result.stdout)
    assert {t["granularity"]: t["rows"] for t in info["tables"]} == {
        "seconds": 1, "minutes": 1, "hours": 3, "days": 3, "months": 2, "years": 2}
    assert [(p["table"], p["rows_purged"]) for p in info["purges"]] == [
        ("TradeAggregation_SECONDS", 2), ("TradeAggregation_MINUTES", 2), ("TradeAggregation_HOURS", 0),
        ("TradeAggregation_DAYS", 0)]
    seconds = DAILY.replace('per "days"', 'per "seconds"')
    result = runner.invoke(app, ["query", str(app_file), seconds, "--format", "json", "--data-dir", data])
    assert json.loads(result.stdout) == [
        {"AGG_TIMESTAMP": 1704189600000, "symbol": "IBM", "total": 1, "avgPrice": 30.0, "trades": 1}]
    result = runner.invoke(app, ["query", str(app_file), DAILY, "--format", "json", "--data-dir", data])
    assert json.loads(result.stdout) == rows  # coarser durations keep their data


@pytest.mark.slow
def test_query_does_not_start_spark(app_file: Path, tmp_path: Path) -> None:
    """``query`` answers from the store alone; a missing store is a runtime error (exit 1), not a crash."""
    code = (
        "import atexit, sys\n"
        "from tiltframe.cli.commands import main\n"
        f"sys.argv = ['tiltframe', 'query', {str(app_file)!r}, {DAILY!r}, '--data-dir', {str(tmp_path)!r}]\n"
        "atexit.register(lambda: print('pyspark loaded:', 'pyspark' in sys.modules))\n"  # main() ends the process
        "main()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert (done.returncode, done.stdout.strip().splitlines()[-1]) == (1, "pyspark loaded: False"), done.stderr
    assert "run the app first" in done.stderr


def test_demo_generator_shape(tmp_path: Path) -> None:
    """The demo data: numbered JSON Lines files, malformed events mixed in, some late, across a year end."""
    from tiltframe.cli.demo import generate

    data = generate(tmp_path, events=5_000, days=60, files=4, malformed=10)
    files = sorted(tmp_path.glob("trades-*.jsonl"))
    assert [f.name for f in files] == [f"trades-{i:04d}.jsonl" for i in range(1, 5)]
    lines = [line for f in files for line in f.read_text(encoding="utf-8").splitlines()]
    assert len(lines) == 5_000 + 10
    good, bad = [], 0
    for line in lines:
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            bad += 1
            continue
        ok = (
            isinstance(rec.get("symbol"), str)
            and isinstance(rec.get("price"), float)
            and isinstance(rec.get("quantity"), int)
            and isinstance(rec.get("timestamp"), int)
        )
        if ok:
            good.append(rec)
        else:
            bad += 1
    assert (len(good), bad) == (5_000, 10)
    ts = [r["timestamp"] for r in good]
    assert min(ts) >= 1700006400000  # 2023-11-15 00:00:00 GMT
    assert max(ts) < 1700006400000 + 60 * 86_400_000
    assert min(ts) < 1704067200000 <= max(ts)  # crosses into 2024
    late, latest = 0, ts[0]
    for t in ts[1:]:
        late += t < latest
        latest = max(latest, t)
    assert late == data.late_events
    assert 0 < late < 0.05 * len(ts)
    assert all(r["price"] > 0 and r["quantity"] >= 1 for r in good)
