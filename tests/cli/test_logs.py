"""Logs a collector can read: ``--log-format json`` writes one JSON object per stderr line, with one line per
micro-batch of each aggregation whose figures add up to the events in the files; ``--verbose`` says the
same in words."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

APP = """\
define stream TradeStream (symbol string, quantity long, timestamp long);

define aggregation TradeAggregation
from TradeStream
select symbol, sum(quantity) as total
group by symbol
aggregate by timestamp every sec ... day;
"""


def _files(tmp_path: Path) -> tuple[list[str], list[int]]:
    app_file = tmp_path / "trades.siddhi"
    app_file.write_text(APP, encoding="utf-8")
    inbox = tmp_path / "in"
    inbox.mkdir()
    sizes = [3, 2]
    for i, n in enumerate(sizes):
        lines = [json.dumps({"symbol": "IBM", "quantity": j, "timestamp": 1704067200000 + j}) for j in range(n)]
        (inbox / f"t{i}.jsonl").write_text("\n".join([*lines, '{"symbol": "bad"}']) + "\n", encoding="utf-8")
    args = ["run", str(app_file), "--input", f"TradeStream={inbox}", "--data-dir", str(tmp_path / "data"),
            "--max-files-per-trigger", "1"]
    return args, sizes


def _tiltframe(args: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tiltframe", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=600, check=False, env={**os.environ, **env})


def test_json_logs_have_one_line_per_micro_batch(tmp_path: Path) -> None:
    args, sizes = _files(tmp_path)
    done = _tiltframe(["--log-format", "json", *args], TILTFRAME_SHORT_RUN_BYTES="100")  # files of 300 bytes
    assert done.returncode == 0, done.stderr
    spark_log = (tmp_path / "data" / "logs" / "spark.log").read_text(encoding="utf-8")
    assert "=== tiltframe: Spark starts" in spark_log and "C1" not in spark_log  # not a short run: both compilers
    records = [json.loads(line) for line in done.stderr.splitlines() if line.strip()]  # every line is JSON
    batches = [r for r in records if "batch_id" in r]
    got = sorted((r["aggregation"], r["events_read"], r["events_aggregated"], r["events_rejected"]) for r in batches)
    assert got == sorted(("TradeAggregation", n + 1, n, 1) for n in sizes)
    assert all(r["level"] == "INFO" and r["latest_event_time"].startswith("2024-01-01T00:00:00.00") for r in batches)


def test_verbose_says_each_micro_batch(tmp_path: Path) -> None:
    args, _ = _files(tmp_path)
    done = _tiltframe(["-v", *args])
    assert done.returncode == 0, done.stderr
    for n in (3, 2):
        assert f"{n + 1} events read, {n} aggregated, 0 moved, 1 rejected" in done.stderr


def test_an_unknown_log_format_is_a_usage_error() -> None:
    done = _tiltframe(["--log-format", "xml", "run", "x.siddhi"])
    assert done.returncode == 2
    assert "unknown log format 'xml' (expected one of: json, text)" in done.stderr


def test_a_default_run_prints_no_spark_log_line(tmp_path: Path) -> None:
    """Spark's own lines (log4j's, the JVM's start-up notices) go to the data directory's log, not the
    terminal, which keeps tiltframe's summary on stdout and its notes on stderr."""
    args, _ = _files(tmp_path)
    done = _tiltframe(args)
    assert done.returncode == 0, done.stderr
    for line in (done.stdout + done.stderr).splitlines():
        assert not any(word in line for word in (" WARN ", " INFO ", "log4j", "SparkContext", "Exception")), line
    assert "events read" in done.stdout
    spark_log = (tmp_path / "data" / "logs" / "spark.log").read_text(encoding="utf-8")
    assert "=== tiltframe: Spark starts" in spark_log and "log4j" in spark_log
    # Files of a few hundred bytes, read once: the JVM compiles with C1 alone (tiltframe.engine.spark.jvm_launch).
    assert "; C1 compiler alone (a short run)\n" in spark_log
