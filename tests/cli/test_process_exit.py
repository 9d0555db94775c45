"""How a command's process ends (``tiltframe.cli.process_exit``): as soon as its work is done, with its whole
output, its own exit status, its atexit handlers run and a committed store; a JVM it started, whose output
goes to Spark's log rather than the caller's pipe, stops by itself after it.  Inside spark-submit's JVM the
process ends the ordinary way."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path

from tests.integration.crashkit import TAG_ENV, tagged

ROOT = Path(__file__).resolve().parents[2]

APP = """\
define stream S (symbol string, quantity long, timestamp long);
define aggregation A from S select symbol, sum(quantity) as total group by symbol
aggregate by timestamp every sec ... day;
"""


def _is_driver_jvm(pid: int) -> bool:
    """The run's Spark JVM, not the short-lived launcher JVM that ``spark-class`` runs first to build its
    command line (whose output is a pipe to that script)."""
    try:
        java = Path(f"/proc/{pid}/exe").resolve().name == "java"
        return java and b"org.apache.spark.launcher.Main" not in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def test_a_run_ends_with_its_output_status_and_store_and_its_jvm_stops_after_it(tmp_path: Path) -> None:
    app, inbox, data = tmp_path / "app.siddhi", tmp_path / "in", tmp_path / "data"
    app.write_text(APP, encoding="utf-8")
    inbox.mkdir()
    (inbox / "e.csv").write_text("symbol,quantity,timestamp\nIBM,2,1704067200000\nIBM,3,1704067201000\n")
    tag = f"process-exit-{os.getpid()}-{time.time_ns()}"  # the run's processes, its JVM included, carry it
    run = subprocess.Popen([sys.executable, "-m", "tiltframe", "run", str(app), "-i", f"S={inbox}", "-d", str(data)],
                           cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           env={**os.environ, TAG_ENV: tag})
    jvm, jvm_stdout = None, None
    while run.poll() is None:  # the JVM lives for seconds: long enough to find it and where its output goes
        if jvm is None:
            jvm = next((pid for pid in tagged(tag) if _is_driver_jvm(pid)), None)
        if jvm is not None and jvm_stdout is None:
            with contextlib.suppress(OSError):  # gone meanwhile
                jvm_stdout = os.readlink(f"/proc/{jvm}/fd/1")
        time.sleep(0.05)
    out, err = run.communicate(timeout=60)
    assert run.returncode == 0, err
    assert "rows written" in out and out.rstrip().splitlines()[-1].startswith("done in"), out  # all of it
    assert jvm is not None and jvm_stdout == str(data / "logs" / "spark.log")  # not the caller's pipe
    deadline = time.monotonic() + 60
    while tagged(tag) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not tagged(tag), "the JVM (or its Python workers) outlived the run's process by a minute"
    query = 'from A within "2024-01-01 00:00:00", "2024-01-02 00:00:00" per "days" select symbol, total'
    answer = subprocess.run([sys.executable, "-m", "tiltframe", "query", str(app), query, "-d", str(data), "--format",
                             "csv"], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert answer.returncode == 0, answer.stderr
    assert answer.stdout.splitlines() == ["symbol,total", "IBM,5"]  # the batch was committed before the end


def _finish(code: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    script = ("import atexit; atexit.register(print, 'atexit ran'); "
              f"from tiltframe.cli.process_exit import finish; finish({code})")
    return subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          check=False, env={**os.environ, **env})


def test_a_process_ends_with_its_status_and_its_atexit_handlers_run() -> None:
    for env in ({}, {"PYSPARK_GATEWAY_PORT": "1"}):  # at once; inside spark-submit, the ordinary way
        for code, status in (("None", 0), ("3", 3)):
            done = _finish(code, env)
            assert (done.returncode, done.stdout) == (status, "atexit ran\n"), done.stderr
        done = _finish("'tiltframe: stopped'", env)
        assert (done.returncode, done.stderr, done.stdout) == (1, "tiltframe: stopped\n", "atexit ran\n")


def test_a_profiled_command_ends_the_ordinary_way_so_that_its_profile_is_written(tmp_path: Path) -> None:
    profile = tmp_path / "validate.prof"
    app = ROOT / "tiltframe" / "examples" / "trades.siddhi"
    command = [sys.executable, "-m", "cProfile", "-o", str(profile), "-m", "tiltframe", "validate", str(app)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert profile.stat().st_size > 0


def test_exit_codes_are_those_sys_exit_gives() -> None:
    from tiltframe.cli.process_exit import exit_code

    assert [exit_code(None), exit_code(0), exit_code(2)] == [0, 0, 2]
