"""The same pipeline on a real Spark standalone cluster (a master and two workers on loopback).

The driver runs in its own process with ``--master spark://...``; executors are separate JVMs with their
own Python workers, so nothing may rely on sharing the driver's process.  Results must equal a local-mode
run over the same files and the DuckDB oracle.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pyspark
import pytest

from tests.oracle import APP, rollup

DRIVER = """
import sys, tiltframe as tf
from tiltframe.engine.session import get_session
from tiltframe.engine.sources import FileInput
spark = get_session(sys.argv[1], app_name="tiltframe-cluster-test")
app = tf.load_app(open(sys.argv[2]).read())
inputs = {"TradeStream": FileInput(sys.argv[3], max_files_per_trigger=2)}
result = tf.run(app, inputs, data_dir=sys.argv[4], spark=spark)
t = result.aggregations["TradeAggregation"]
print("TOTALS", t.events_read, t.events_aggregated, t.batches)
spark.stop()
"""


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


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[str]:
    home = Path(pyspark.__file__).parent
    env = {**os.environ, "SPARK_HOME": str(home), "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    port = free_port()
    url = f"spark://127.0.0.1:{port}"
    logs = tmp_path_factory.mktemp("cluster")
    spark_class = str(home / "bin" / "spark-class")

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
        yield url
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()


def make_events(folder: Path) -> pd.DataFrame:
    rng = np.random.default_rng(11)
    n = 3000
    start = pd.Timestamp("2023-12-31 22:00", tz="UTC").value // 1_000_000
    events = pd.DataFrame({
        "symbol": rng.choice(["IBM", "WSO2", "ORCL", "MSFT"], n),
        "price": np.round(rng.uniform(1, 500, n), 2),
        "quantity": rng.integers(1, 1000, n),
        "ts": start + np.sort(rng.integers(0, 4 * 3_600_000, n)),
    })
    folder.mkdir(parents=True)
    now = time.time() - 100
    for i, rows in enumerate(np.array_split(np.arange(n), 6)):
        part = events.iloc[rows]
        path = folder / f"part-{i:03d}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in part.to_dict(orient="records")))
        os.utime(path, (now + i, now + i))
    events["arrival"] = np.arange(n)
    return events


def run_driver(master: str, tmp: Path, name: str, inputs: Path) -> None:
    app_file = tmp / "app.siddhi"
    app_file.write_text(APP)
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    out = subprocess.run([sys.executable, "-c", DRIVER, master, str(app_file), str(inputs), str(tmp / name)],
                         env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-4000:]
    assert "TOTALS 3000 3000 3" in out.stdout, out.stdout


def answers(tmp: Path, name: str) -> dict[str, pd.DataFrame]:
    import tiltframe as tf

    app = tf.load_app(APP)
    return {per: tf.query(app, f'from TradeAggregation within 0L, 4102444800000L per "{per}" select *',
                          data_dir=tmp / name)
            for per in ("seconds", "minutes", "hours", "days", "months", "years")}


@pytest.mark.slow
@pytest.mark.cluster
def test_cluster_run_equals_local_run_and_oracle(cluster: str, tmp_path: Path) -> None:
    events = make_events(tmp_path / "in")
    run_driver(cluster, tmp_path, "on-cluster", tmp_path / "in")
    run_driver("local[2]", tmp_path, "local", tmp_path / "in")
    on_cluster, local = answers(tmp_path, "on-cluster"), answers(tmp_path, "local")
    for per, got in on_cluster.items():
        pd.testing.assert_frame_equal(got, local[per], check_exact=False, rtol=1e-12)
        want = rollup(events, per)
        assert list(got["AGG_TIMESTAMP"]) == list(want["AGG_TIMESTAMP"])
        assert list(got["total"]) == list(want["total"]) and list(got["trades"]) == list(want["trades"])
        np.testing.assert_allclose(got["avgPrice"], want["avgPrice"], rtol=1e-12)
