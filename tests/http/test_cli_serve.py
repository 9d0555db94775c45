"""``tiltframe serve`` and ``tiltframe run --follow --serve`` as a user starts them: separate processes,
found at the address they print, stopped with Ctrl-C."""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pandas as pd
import pytest

from tests.http.served import APP, DAY, T0, build, oracle, trades, write_csv

pytestmark = pytest.mark.slow
ANNOUNCED = re.compile(r"at (http://127\.0\.0\.1:\d+)/")


@contextmanager
def started(
    args: list[str], env: dict[str, str] | None = None, timeout: float = 120
) -> Iterator[tuple[str, list[str]]]:
    """``tiltframe ARGS`` in a process of its own; yields the URL it announced and its stderr lines so far.
    Stopped with SIGINT (Ctrl-C) unless the test did; its exit code must be 0."""
    proc = subprocess.Popen([sys.executable, "-m", "tiltframe", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, **(env or {})})
    lines: list[str] = []
    out: list[str] = []
    # A thread for each pipe: communicate() would read stderr too, racing this reader for its last lines.
    readers = [threading.Thread(target=lambda: lines.extend(proc.stderr), daemon=True),  # type: ignore[arg-type]
               threading.Thread(target=lambda: out.extend(proc.stdout), daemon=True)]  # type: ignore[arg-type]
    for reader in readers:
        reader.start()
    deadline = time.monotonic() + timeout
    url = None
    while url is None:
        found = next((m for m in map(ANNOUNCED.search, list(lines)) if m), None)
        url = found.group(1) if found else None
        if url is None and (proc.poll() is not None or time.monotonic() > deadline):
            proc.kill()
            pytest.fail(f"no address announced; stderr: {''.join(lines)}")
        time.sleep(0.1)
    try:
        yield url, lines
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        proc.wait(timeout=120)
        for reader in readers:
            reader.join(timeout=5)
        lines.extend(out)
        assert proc.returncode == 0, "".join(lines)


def until(check: Callable[[], Any], timeout: float = 120) -> Any:
    """The first truthy value of ``check()`` within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail("timed out")
        time.sleep(0.5)


def test_serve_answers_until_ctrl_c(spark: object, tmp_path: Path) -> None:
    build(spark, tmp_path, None, n=200, bad=1)
    app_file = tmp_path / "app.siddhi"
    app_file.write_text(APP, encoding="utf-8")
    data = str(tmp_path / "data")
    with started(["serve", str(app_file), "-d", data, "--port", "0"]) as (url, lines):
        doc = httpx.get(url + "/api/aggregations", timeout=30).json()
        (agg,) = doc["aggregations"]
        assert agg["events"] == {"read": 201, "aggregated": 200, "moved": 0, "rejected": 1}
        assert httpx.get(url + "/", timeout=30).text.startswith("<!doctype html>")
    assert any("serving TradeAggregation from" in line for line in lines)


def test_a_port_in_use_is_a_usage_error(tmp_path: Path) -> None:
    app_file = tmp_path / "app.siddhi"
    app_file.write_text(APP, encoding="utf-8")
    with started(["serve", str(app_file), "-d", str(tmp_path / "data"), "--port", "0"]) as (url, _):
        port = url.rsplit(":", 1)[1]
        for command in (["serve", str(app_file), "--port", port],
                        ["run", str(app_file), "--input", f"TradeStream={tmp_path}", "--serve", port]):
            done = subprocess.run([sys.executable, "-m", "tiltframe", *command], capture_output=True, text=True,
                                  timeout=120, check=False)
            assert done.returncode == 2, done.stderr
            assert f"cannot serve on 127.0.0.1:{port}" in done.stderr and "starting Spark" not in done.stderr


def test_run_serves_its_status_and_new_files(tmp_path: Path) -> None:
    app_file = tmp_path / "app.siddhi"
    app_file.write_text(APP, encoding="utf-8")
    inbox = tmp_path / "in"
    inbox.mkdir()
    first = trades(300, seed=3, days=4)
    write_csv(first, inbox / "first.csv", bad=2)
    args = ["run", str(app_file), "--input", f"TradeStream={inbox}", "-d", str(tmp_path / "data"), "--follow",
            "--serve", "0"]
    with started(args, env={"TILTFRAME_TOKEN": "k"}) as (url, lines):
        client = httpx.Client(base_url=url, headers={"Authorization": "Bearer k"}, timeout=30)
        assert httpx.get(url + "/api/status", timeout=30).status_code == 401

        def read(n: int) -> dict[str, Any] | None:
            # The store commits a batch before the run's callback counts it (and the metrics after that):
            # wait for all three.
            doc = client.get("/api/status").json()
            agg = doc["aggregations"]["TradeAggregation"]
            counted = agg.get("run", {}).get("events_read") == n
            metric = f'tiltframe_process_events_read_total{{aggregation="TradeAggregation"}} {n}.0'
            return doc if agg.get("events_read") == n and counted and metric in client.get("/metrics").text else None

        status = until(lambda: read(302))
        assert status["pipeline"]["running"] is True
        run = status["aggregations"]["TradeAggregation"]["run"]
        assert (run["events_read"], run["events_rejected"], run["batches"]) == (302, 2, 1)
        later = trades(100, seed=4, days=1, start=T0 + 6 * DAY)
        write_csv(later, inbox / "later.csv")
        until(lambda: read(402))
        series = client.get("/api/aggregations/TradeAggregation/series",
                            params={"per": "days", "measure": "trades"}).json()
        metrics = client.get("/metrics").text
        want = oracle(pd.concat([first, later], ignore_index=True))
        got = {line["label"]: line["points"] for line in series["series"]}
        for symbol, rows in want.groupby("symbol"):
            assert got[symbol] == [[int(t), int(v)] for t, v in zip(rows["AGG_TIMESTAMP"], rows["trades"], strict=True)]
        assert 'tiltframe_batch_duration_seconds_count{aggregation="TradeAggregation"} 2.0' in metrics
        assert 'tiltframe_process_events_read_total{aggregation="TradeAggregation"} 402.0' in metrics
    summary = "".join(lines)
    assert "stopped by Ctrl-C" in summary


def test_the_demo_ends_with_a_serve_command_that_serves_its_data(tmp_path: Path) -> None:
    data = tmp_path / "demo data"
    done = subprocess.run([sys.executable, "-m", "tiltframe", "demo", "--events", "3000", "--days", "3", "--files",
                           "2", "-d", str(data)], capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr
    (line,) = [x for x in done.stdout.splitlines() if x.strip().startswith("tiltframe serve ")]
    command = shlex.split(line.split("#")[0])[1:]
    with started([*command, "--port", "0"]) as (url, _):
        (agg,) = httpx.get(url + "/api/aggregations", timeout=30).json()["aggregations"]
    counted = re.search(r"monthly rollups count ([\d,]+) trades", done.stdout)
    assert counted is not None, done.stdout
    assert agg["events"]["aggregated"] + agg["events"]["moved"] == int(counted.group(1).replace(",", ""))
