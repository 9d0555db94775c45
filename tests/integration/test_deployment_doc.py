"""docs/deployment.md runs as written: every command of its ``bash`` blocks that needs no cluster (no
standalone master, YARN, Kubernetes, HDFS or object store, no wheel to pack) runs in order in one shell,
from a directory holding the app as ``app.siddhi`` and its inputs in ``trades/``; the totals it stores
equal the oracle's."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tests.integration.cluster import make_events, spark_env, write_parts
from tests.oracle import APP, rollup

DOC = Path(__file__).resolve().parents[2] / "docs" / "deployment.md"

#: What makes a command need a cluster or a packaging step this machine does not have.
NEEDS_A_CLUSTER = ("spark://master", "hdfs://", "s3a://", "--master yarn", "k8s://", "venv-pack", "dist/")


def doc_commands(text: str) -> list[str]:
    """The commands of the ``bash`` blocks of ``text``, in order, continuation lines joined."""
    commands: list[str] = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        joined = re.sub(r"\\\n\s*", " ", block)
        commands.extend(line.split("  #")[0].strip() for line in joined.splitlines() if line.strip())
    return commands


def test_the_page_has_commands_to_run_and_commands_for_clusters() -> None:
    commands = doc_commands(DOC.read_text(encoding="utf-8"))
    local = [c for c in commands if not any(m in c for m in NEEDS_A_CLUSTER)]
    assert len(commands) > len(local) >= 4, local
    assert any(c.startswith("MAIN=") for c in local)
    assert any(c.startswith("spark-submit --master 'local[2]'") for c in local)


@pytest.mark.slow
def test_the_commands_that_need_no_cluster_run_as_written(tmp_path: Path) -> None:
    commands = [c for c in doc_commands(DOC.read_text(encoding="utf-8"))
                if not any(m in c for m in NEEDS_A_CLUSTER)]
    events = make_events(1200)
    write_parts(events, tmp_path / "trades", 3)
    (tmp_path / "app.siddhi").write_text(APP)
    script = "set -euo pipefail\n" + "\n".join(commands) + "\n"
    env = spark_env()  # as in an activated environment where tiltframe is installed
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    done = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{script}\n{done.stdout}\n{done.stderr}"
    assert any((tmp_path / "checkpoints").glob("TradeAggregation-*/spark/commits/0"))
    assert not (tmp_path / "tiltframe-data" / "checkpoints").exists()
    printed = pd.read_csv(pd.io.common.StringIO(done.stdout[done.stdout.index("AGG_TIME,symbol,total"):]))
    want = rollup(events, "days")
    assert printed["total"].sum() == want["total"].sum() == events["quantity"].sum()
    got = printed.groupby("symbol")["total"].sum().sort_index()
    assert got.to_dict() == want.groupby("symbol")["total"].sum().sort_index().to_dict()
    assert printed["AGG_TIME"].str.endswith("+00:00").all()
