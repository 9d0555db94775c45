"""The pipeline on a real Spark standalone cluster (a master and two workers on loopback).

The driver is ``tiltframe run`` submitted with ``spark-submit --master spark://...``, as a deployment runs
it; executors are separate JVMs with their own Python workers, so nothing may rely on sharing the driver's
process.  Results must equal a local-mode run of the same command over the same files and the DuckDB
oracle.  The cluster run gives its input and checkpoint as ``file://`` URIs and its own shuffle partitions
(``--conf``), which Spark's event log must show in force: tiltframe fills only settings nobody made.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.integration.cluster import Cluster, cluster, make_events, run_summary, spark_submit, write_parts
from tests.oracle import APP, rollup

__all__ = ["cluster"]  # the module-scoped fixture: pytest finds it here by name

PERS = ("seconds", "minutes", "hours", "days", "months", "years")


def run_cli(master: str, tmp: Path, name: str, inputs: str, *, extra: Sequence[str] = (),
            conf: Mapping[str, str] | None = None) -> None:
    """``tiltframe run`` of the oracle app over ``inputs`` into the data dir ``tmp/name``, 2 files a batch."""
    app_file = tmp / "app.siddhi"
    app_file.write_text(APP)
    out = spark_submit(master, ["run", str(app_file), "--input", f"TradeStream={inputs}", "--data-dir",
                                str(tmp / name), "--max-files-per-trigger", "2", *extra], conf=conf)
    summary = run_summary(out.stdout)
    assert summary == {"micro-batches": 3, "events read": 3000, "events aggregated": 3000, "events rejected": 0}, \
        out.stdout


def answers(tmp: Path, name: str) -> dict[str, pd.DataFrame]:
    import tiltframe as tf

    app = tf.load_app(APP)
    return {per: tf.query(app, f'from TradeAggregation within 0L, 4102444800000L per "{per}" select *',
                          data_dir=tmp / name)
            for per in PERS}


@pytest.mark.slow
@pytest.mark.cluster
def test_cluster_run_equals_local_run_and_oracle(cluster: Cluster, tmp_path: Path) -> None:
    events = make_events()
    write_parts(events, tmp_path / "in", 6)
    registered = cluster.apps_registered()
    events_log = tmp_path / "events"
    events_log.mkdir()
    conf = {"spark.sql.shuffle.partitions": "3", "spark.eventLog.enabled": "true",
            "spark.eventLog.dir": events_log.as_uri(), "spark.eventLog.compress": "false",
            "spark.eventLog.rolling.enabled": "false"}
    run_cli(cluster.url, tmp_path, "on-cluster", (tmp_path / "in").as_uri(), conf=conf,
            extra=["--checkpoint-dir", (tmp_path / "checkpoints").as_uri()])
    assert cluster.apps_registered() == registered + 1, "the driver did not run on the cluster's master"
    assert any((tmp_path / "checkpoints").iterdir()), "the checkpoint is not where --checkpoint-dir said"
    (log,) = [p for p in events_log.iterdir() if not p.name.startswith(".")]
    said = re.findall(r'"spark\.sql\.shuffle\.partitions":"(\d+)"', log.read_text())
    # The shared session's executions keep the submitted value; the micro-batches of small files run in a
    # clone with one partition and no adaptive execution (engine/inputs/batch_sessions.py).
    assert "3" in said and set(said) <= {"3", "1"}, f"the submitted shuffle partitions were not kept: {said}"
    run_cli("local[2]", tmp_path, "local", str(tmp_path / "in"))
    on_cluster, local = answers(tmp_path, "on-cluster"), answers(tmp_path, "local")
    for per, got in on_cluster.items():
        pd.testing.assert_frame_equal(got, local[per], check_exact=False, rtol=1e-12)
        want = rollup(events, per)
        assert list(got["AGG_TIMESTAMP"]) == list(want["AGG_TIMESTAMP"])
        assert list(got["total"]) == list(want["total"]) and list(got["trades"]) == list(want["trades"])
        np.testing.assert_allclose(got["avgPrice"], want["avgPrice"], rtol=1e-12)
