"""Failures said once, first: a run that fails at run time prints ONE line with the cause and where (the
aggregation and the micro-batch) before anything else, no traceback and no Spark log line on the terminal;
Spark's log goes to ``<data-dir>/logs/spark.log``.  ``--verbose`` (also after the command) puts Spark's log
back on the terminal.

The failure is the store refusing the batch's rows: a trigger on the seconds table stands for a disk that is
full, a reproducible runtime failure that no input or definition check can foresee.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tiltframe import api
from tiltframe.aggregates.layout import AggregationLayout
from tiltframe.store import DB_FILE_NAME, connect_store

ROOT = Path(__file__).resolve().parents[2]

APP = """\
define stream TradeStream (symbol string, price double, quantity long, timestamp long);

define aggregation TradeAggregation
from TradeStream
select symbol, sum(quantity) as total
group by symbol
aggregate by timestamp every sec ... day;
"""
CAUSE = "the disk is full (a test trigger)"


@pytest.fixture
def failing_run(tmp_path: Path) -> tuple[list[str], Path]:
    """The ``run`` command of an app whose store refuses every row of the seconds table."""
    app_file = tmp_path / "trades.siddhi"
    app_file.write_text(APP, encoding="utf-8")
    inbox = tmp_path / "in"
    inbox.mkdir()
    (inbox / "t.jsonl").write_text('{"symbol": "IBM", "price": 1.0, "quantity": 5, "timestamp": 1704067200000}\n',
                                   encoding="utf-8")
    data = tmp_path / "data"
    spec = api.load_app(app_file)
    with connect_store(None, data) as store:
        store.ensure_schema(AggregationLayout.of(spec, "TradeAggregation"))
    with sqlite3.connect(data / DB_FILE_NAME) as db:
        db.execute("CREATE TRIGGER full BEFORE INSERT ON TradeAggregation_SECONDS "
                   f"BEGIN SELECT RAISE(ABORT, '{CAUSE}'); END")
    return ["run", str(app_file), "--input", f"TradeStream={inbox}", "--data-dir", str(data)], data


def _tiltframe(args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tiltframe", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=600, check=False)


@pytest.mark.slow
def test_a_runtime_failure_is_said_once_first(failing_run: tuple[list[str], Path]) -> None:
    command, data = failing_run
    done = _tiltframe(command)
    assert done.returncode == 1, done.stderr
    lines = done.stderr.splitlines()
    assert lines[0].startswith("error: aggregation TradeAggregation, batch 0: "), done.stderr
    assert CAUSE in lines[0]
    assert len(lines) == 2, done.stderr  # then only where Spark's log is
    log = data / "logs" / "spark.log"
    assert lines[1].startswith(f"Spark's log: {log}")
    assert "Traceback" not in done.stderr
    assert not [line for line in lines if "WARN" in line or "Exception" in line]
    assert done.stdout == ""
    spark_log = log.read_text(encoding="utf-8")
    assert "WARN" in spark_log  # Spark's own log4j lines
    assert "MicroBatchExecution" in spark_log and "terminated with error" in spark_log
    assert CAUSE in spark_log and "Traceback" in spark_log  # py4j's Python side, there too


@pytest.mark.slow
def test_verbose_after_the_command_shows_spark_log(failing_run: tuple[list[str], Path]) -> None:
    command, _ = failing_run
    done = _tiltframe([*command, "-v"])
    assert done.returncode == 1, done.stderr
    assert " WARN " in done.stderr  # Spark's log, on the terminal
    failure = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert failure == [line for line in failure if CAUSE in line and "batch 0" in line]
    assert len(failure) == 1


@pytest.mark.slow
def test_spark_that_does_not_start_says_why(failing_run: tuple[list[str], Path]) -> None:
    command, data = failing_run
    done = _tiltframe([*command, "--master", "nowhere"])
    assert done.returncode == 1, done.stderr
    log = data / "logs" / "spark.log"
    assert done.stderr.splitlines() == [
        "error: Spark did not start: SparkException: Master must either be yarn or start with spark, k8s, or local "
        f"(Spark's log: {log})"]
    assert "Exception in thread" in log.read_text(encoding="utf-8")
