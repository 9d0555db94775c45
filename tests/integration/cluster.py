"""A Spark standalone cluster on loopback (a master and two one-core workers from the PySpark installation)
and ``tiltframe run`` submitted to it with ``spark-submit``, as a deployment would run it.

The machine has 2 cores, so each worker offers 1 core and 1g, and the driver keeps to 1g.  Import the
``cluster`` fixture by name into a test module; each module that does gets its own cluster.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyspark
import pytest

import tiltframe
from tests.jvm_options import CLUSTER_JVM

SPARK_HOME = Path(pyspark.__file__).parent
#: What spark-submit runs: the installed package's ``__main__.py``, which imports the CLI as a script.
TILTFRAME_MAIN = Path(tiltframe.__file__).parent / "__main__.py"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, timeout: float = 60) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.5)
    raise TimeoutError(f"nothing listens on port {port}")


def spark_env(**extra: str) -> dict[str, str]:
    """The environment of the cluster's daemons and of spark-submit: loopback, this interpreter, small heaps."""
    return {
        **os.environ,
        "SPARK_HOME": str(SPARK_HOME),
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
        # get_session asks for this much driver memory (4g by default): more than the machine can spare.
        "TILTFRAME_DRIVER_MEMORY": "1g",
        "SPARK_DAEMON_JAVA_OPTS": CLUSTER_JVM,  # the master's and the workers'
        **extra,
    }


@dataclass(frozen=True)
class Cluster:
    url: str
    logs: Path

    def apps_registered(self) -> int:
        """How many applications the master has accepted: proof that a driver really used the cluster."""
        return (self.logs / "master.log").read_text().count("Registering app ")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    env = spark_env()
    port = free_port()
    url = f"spark://127.0.0.1:{port}"
    logs = tmp_path_factory.mktemp("cluster")
    spark_class = str(SPARK_HOME / "bin" / "spark-class")

    def launch(args: list[str], log: Path) -> subprocess.Popen:
        with log.open("w") as out:  # the child keeps its own copy of the descriptor
            return subprocess.Popen([spark_class, *args], env=env, stdout=out, stderr=subprocess.STDOUT)

    procs = [launch(["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
                     "--webui-port", str(free_port())], logs / "master.log")]
    try:
        wait_for_port(port)
        for i in range(2):
            work = logs / f"worker{i}"
            work.mkdir()
            procs.append(launch(["org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1", "--cores", "1",
                                 "--memory", "1g", "--webui-port", str(free_port()), "--work-dir", str(work)],
                                logs / f"worker{i}.log"))
        deadline = time.time() + 60
        while time.time() < deadline:
            text = (logs / "master.log").read_text()
            if text.count("Registering worker") >= 2:
                break
            time.sleep(0.5)
        else:
            raise TimeoutError("workers did not register:\n" + (logs / "master.log").read_text()[-2000:])
        yield Cluster(url, logs)
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()


def submit_command(master: str, cli_args: list[str], conf: Mapping[str, str] | None = None) -> list[str]:
    """``spark-submit`` of the tiltframe CLI with ``cli_args`` (``run APP --input ...``) to ``master``.

    The master is given to spark-submit only, as a deployment gives it; the driver and the executors' Python
    workers run this interpreter, whose environment has tiltframe installed.
    """
    settings = {
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
        "spark.executor.memory": "1g",
        "spark.executor.extraJavaOptions": CLUSTER_JVM,
        **(conf or {}),
    }
    confs = [arg for key, value in settings.items() for arg in ("--conf", f"{key}={value}")]
    return [str(SPARK_HOME / "bin" / "spark-submit"), "--master", master, "--driver-memory", "1g",
            "--driver-java-options", CLUSTER_JVM, *confs,
            str(TILTFRAME_MAIN), *cli_args]


def check_submitted(out: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    tail = f"{out.stdout[-2000:]}\n{out.stderr[-6000:]}"
    assert out.returncode == 0, f"spark-submit exited with {out.returncode}:\n{tail}"
    return out


def spark_submit(
    master: str, cli_args: list[str], *, conf: Mapping[str, str] | None = None, timeout: float = 900
) -> subprocess.CompletedProcess[str]:
    """Run ``tiltframe <cli_args>`` through spark-submit and wait; fails the test on a non-zero exit."""
    out = subprocess.run(submit_command(master, cli_args, conf), env=spark_env(), capture_output=True, text=True,
                         timeout=timeout)
    return check_submitted(out)


def spark_submit_together(
    master: str, runs: list[list[str]], logs: Path, *, conf: Mapping[str, str] | None = None, timeout: float = 900
) -> list[subprocess.CompletedProcess[str]]:
    """Several ``tiltframe`` command lines as concurrent Spark applications; waits for all, fails the test
    if one fails.  Their output goes to files under ``logs`` (a pipe nobody reads would stall a driver)."""
    logs.mkdir(parents=True, exist_ok=True)
    started = []
    for i, cli_args in enumerate(runs):
        command = submit_command(master, cli_args, conf)
        with (logs / f"submit{i}.out").open("w") as out, (logs / f"submit{i}.err").open("w") as err:
            started.append((command, subprocess.Popen(command, env=spark_env(), stdout=out, stderr=err,
                                                       start_new_session=True)))
    deadline = time.monotonic() + timeout
    try:
        for _, proc in started:
            proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        for _, proc in started:
            if proc.poll() is None:  # the driver's Python process too: the whole session goes
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    return [check_submitted(subprocess.CompletedProcess(command, proc.returncode,
                                                        (logs / f"submit{i}.out").read_text(),
                                                        (logs / f"submit{i}.err").read_text()))
            for i, (command, proc) in enumerate(started)]


_SUMMARY_ROW = re.compile(r"^\s*(micro-batches|events read|events aggregated|events rejected)\s+([\d,]+)", re.M)


def run_summary(stdout: str) -> dict[str, int]:
    """The counts of ``tiltframe run``'s summary (one aggregation): micro-batches, events read, ..."""
    return {name: int(value.replace(",", "")) for name, value in _SUMMARY_ROW.findall(stdout)}


def make_events(n: int = 3000, seed: int = 11, *, distinct_times: bool = False) -> pd.DataFrame:
    """``n`` trades of four symbols over 4 hours from 2023-12-31 22:00 GMT (across a day, month and year
    boundary) in time order, with their arrival position.  ``distinct_times`` makes every event time
    unique, so the latest event of a bucket does not depend on arrival order."""
    rng = np.random.default_rng(seed)
    start = pd.Timestamp("2023-12-31 22:00", tz="UTC").value // 1_000_000
    span = 4 * 3_600_000
    events = pd.DataFrame({
        "symbol": rng.choice(["IBM", "WSO2", "ORCL", "MSFT"], n),
        "price": np.round(rng.uniform(1, 500, n), 2),
        "quantity": rng.integers(1, 1000, n),
    })
    offsets = rng.choice(span, n, replace=False) if distinct_times else rng.integers(0, span, n)
    events["ts"] = start + np.sort(offsets)
    events["arrival"] = np.arange(n)
    return events


def write_parts(events: pd.DataFrame, folder: Path, parts: int) -> None:
    """``events`` as ``parts`` JSON Lines files in order, their modification times in that order (the
    order in which a file source reads them)."""
    folder.mkdir(parents=True)
    now = time.time() - 100
    for i, rows in enumerate(np.array_split(np.arange(len(events)), parts)):
        part = events.iloc[rows][["symbol", "price", "quantity", "ts"]]
        path = folder / f"part-{i:03d}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in part.to_dict(orient="records")))
        os.utime(path, (now + i, now + i))
