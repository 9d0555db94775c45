"""Purging in the pipeline with a controlled clock: it runs at the interval, measures retention from the
latest event time, and what is left equals the oracle restricted to the kept buckets."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.oracle import APP, check_against_oracle, open_pipeline
from tiltframe.model.durations import Granularity, Unit
from tiltframe.store.lifecycle.purge import Purger

START = pd.Timestamp("2024-02-28 00:00:00", tz="UTC").value // 1_000_000
SPAN_MS = 3 * 86_400_000  # across the end of February (a leap day)
SCHEMA = "symbol string, price double, quantity long, ts long"
SEC, MIN = Granularity(Unit.SECONDS), Granularity(Unit.MINUTES)


class Clock:
    """The wall clock, moved forward on demand."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset


def trades(rng: np.random.Generator, stamps: np.ndarray) -> pd.DataFrame:
    n = len(stamps)
    return pd.DataFrame({"symbol": rng.choice(["IBM", "WSO2", "ORCL"], n), "price": rng.integers(1, 10_000, n) / 100,
                         "quantity": rng.integers(1, 100, n), "ts": stamps.astype("int64")})


@pytest.mark.slow
def test_purge_at_the_interval_keeps_what_the_oracle_says(spark, tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    end = START + SPAN_MS
    early = trades(rng, rng.integers(START, end - 3_600_000, 300))
    recent = trades(rng, rng.integers(end - 300_000, end, 200))
    late = trades(rng, np.concatenate([rng.integers(START, end, 40), rng.integers(end - 200_000, end, 40)]))
    app, stores, pipeline = open_pipeline(tmp_path, "p")  # APP has no @purge: seed 001's defaults apply
    clock = Clock()
    pipeline.purger = Purger(pipeline.layout, pipeline.store, clock=clock)

    def process(batch_id: int, part: pd.DataFrame) -> int:
        return pipeline.process(spark.createDataFrame(part, SCHEMA), batch_id).rows_purged

    assert process(0, early) == 0  # 15 minutes have not passed since the aggregation was registered
    clock.offset += 15 * 60 + 1
    assert process(1, recent) > 0
    latest = int(max(early.ts.max(), recent.ts.max()))
    kept_from = {"seconds": latest - 120_000, "minutes": latest - 86_400_000}
    assert process(2, late) == 0  # the next purge is due 15 minutes after this one
    stores.close()

    events = pd.concat([early, recent, late], ignore_index=True)
    events["arrival"] = np.arange(len(events))
    # Late events merge into the kept buckets, and never recreate purged ones; hours and coarser keep all.
    check_against_oracle(app, tmp_path, events, kept_from)
    info = pipeline.store.info(pipeline.layout)
    assert {p.table: p.purged_before for p in info.purges} == {
        "TradeAggregation_SECONDS": kept_from["seconds"], "TradeAggregation_MINUTES": kept_from["minutes"],
        "TradeAggregation_HOURS": latest - 30 * 86_400_000,
        "TradeAggregation_DAYS": int(pd.Timestamp(latest, unit="ms").replace(year=2023).value // 1_000_000)}


@pytest.mark.slow
def test_no_purge_when_disabled(spark, tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    app_text = APP.replace("define aggregation", "@purge(enable='false')\ndefine aggregation")
    app, stores, pipeline = open_pipeline(tmp_path, "p", app_text)
    clock = Clock()
    pipeline.purger = Purger(pipeline.layout, pipeline.store, clock=clock)
    events = trades(rng, rng.integers(START, START + SPAN_MS, 200))
    clock.offset += 3600
    assert pipeline.process(spark.createDataFrame(events, SCHEMA), 0).rows_purged == 0
    stores.close()
    events["arrival"] = np.arange(len(events))
    check_against_oracle(app, tmp_path, events)
