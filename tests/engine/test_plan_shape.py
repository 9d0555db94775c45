"""The shape of a micro-batch's Spark plan: how often it reads its files and what its shuffles share.

The results do not show it (a plan that reads the input twice gives the same rows), but every extra read or
broadcast costs each batch a job's worth of time. The late-event policy's records, the finest level and the
coarser ones must come out of one plan whose branches share the arrival order's read and shuffles: one
scan of the events, one more for the files' ranks, one broadcast of those ranks; a small batch orders its
events in one window instead, its files read once.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest
from pyspark.sql.classic.dataframe import DataFrame

import tiltframe as tf
from tests.oracle import APP


def batch_plan(spark: object, tmp: Path, app_text: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """The executed plan of the one micro-batch of a small file."""
    inbox = tmp / "in"
    inbox.mkdir()
    path = inbox / "trades.jsonl"
    path.write_text("".join(json.dumps({"symbol": f"s{i % 3}", "price": 1.5 + i, "quantity": i,
                                        "ts": 1_700_000_000_000 + i * 1000}) + "\n" for i in range(6)))
    os.utime(path, (time.time() - 60, time.time() - 60))
    plans: list[str] = []
    to_arrow = DataFrame.toArrow

    def kept(df: DataFrame) -> object:
        plans.append(df._jdf.queryExecution().executedPlan().toString())
        return to_arrow(df)

    monkeypatch.setattr(DataFrame, "toArrow", kept)
    tf.run(tf.load_app(app_text), {"TradeStream": inbox}, data_dir=tmp / "data", spark=spark)
    (plan,) = plans
    return plan


@pytest.mark.parametrize("annotation", ["", "@allowedLateness('1 sec')"])
def test_a_batch_reads_its_files_once_for_every_level_and_record(
    spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, annotation: str
) -> None:
    """A batch larger than a small one (bound 0: none is small) ranks its files apart: a second scan, and a
    broadcast of the ranks."""
    monkeypatch.setenv("TILTFRAME_SMALL_BATCH_BYTES", "0")
    app = APP.replace("define aggregation", f"{annotation}\ndefine aggregation", 1)
    plan = batch_plan(spark, tmp_path, app, monkeypatch)
    scans = re.findall(r"FileScan json \[([^\]]*)\]", plan)
    assert len(scans) == 2, plan  # the events, and the files' ranks (with the policy: each file's latest time)
    assert plan.count("BroadcastExchange") == 1, plan
    assert plan.count("ReusedExchange") >= 2, plan  # the coarser levels share the finest level's shuffle


@pytest.mark.parametrize("annotation", ["", "@allowedLateness('1 sec')"])
def test_a_small_batch_reads_its_files_once_and_orders_them_in_one_window(
    spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, annotation: str
) -> None:
    app = APP.replace("define aggregation", f"{annotation}\ndefine aggregation", 1)
    plan = batch_plan(spark, tmp_path, app, monkeypatch)
    assert len(re.findall(r"FileScan json \[([^\]]*)\]", plan)) == 1, plan
    assert "BroadcastExchange" not in plan, plan
    assert plan.count("ReusedExchange") >= 2, plan
