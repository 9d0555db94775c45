"""Streaming behaviour end to end: retrieval joins inside a running app, replays after a crash,
rejected events kept with reasons, and a bounded backfill through the same per-batch code."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pandas as pd
import pytest

import tiltframe as tf
from tiltframe.aggregates.layout import AggregationLayout
from tiltframe.engine.sinks import JsonLinesSink
from tiltframe.model.durations import Granularity, Unit
from tiltframe.store.open_stores import StoreRegistry
from tiltframe.timeutil.parse import FORMATS, parse_timestamp

APP = """
define stream TradeStream (symbol string, price double, quantity long, timestamp long);
define stream TradeSummaryRetrievalStream (symbol string, startTime long, endTime long, perDuration string);

define aggregation TradeAggregation
from TradeStream
select symbol, avg(price) as avgPrice, sum(quantity) as total
group by symbol
aggregate by timestamp every sec ... year;

@info(name = 'summaries')
from TradeSummaryRetrievalStream as b join TradeAggregation as a
on a.symbol == b.symbol
within b.startTime, b.endTime
per b.perDuration
select AGG_TIMESTAMP, a.symbol, a.total, a.avgPrice
order by AGG_TIMESTAMP
insert into TradeSummaryStream;
"""

DAY1 = parse_timestamp("2024-01-30 10:00:00")
DAY2 = parse_timestamp("2024-02-02 10:00:00")
TRADES = [
    {"symbol": "IBM", "price": 10.0, "quantity": 1, "timestamp": DAY1},
    {"symbol": "IBM", "price": 30.0, "quantity": 3, "timestamp": DAY1 + 5_000},
    {"symbol": "WSO2", "price": 5.0, "quantity": 7, "timestamp": DAY1 + 9_000},
    {"symbol": "IBM", "price": 50.0, "quantity": 5, "timestamp": DAY2},
]


def write_jsonl(folder: Path, batches: list[list[dict]]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    now = time.time() - 100
    for i, rows in enumerate(batches):
        path = folder / f"part-{i:03d}.jsonl"
        path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
        os.utime(path, (now + i, now + i))


@pytest.mark.slow
def test_join_answers_each_request_from_the_store(spark, tmp_path: Path) -> None:
    app = tf.load_app(APP)
    write_jsonl(tmp_path / "trades", [TRADES])
    month = {"startTime": parse_timestamp("2024-01-01 00:00:00"), "endTime": parse_timestamp("2024-03-01 00:00:00")}
    write_jsonl(tmp_path / "requests", [[
        {"symbol": "IBM", **month, "perDuration": "days"},
        {"symbol": "WSO2", **month, "perDuration": "months"},
    ]])
    result = tf.run(
        app,
        {"TradeStream": tmp_path / "trades", "TradeSummaryRetrievalStream": tmp_path / "requests"},
        data_dir=tmp_path / "data", spark=spark, outputs={"TradeSummaryStream": JsonLinesSink(tmp_path / "out")},
    )
    assert result.outputs == {"TradeSummaryStream": 3}
    rows = [json.loads(line) for f in sorted((tmp_path / "out").glob("*.jsonl")) for line in f.read_text().splitlines()]
    day = 86_400_000
    assert rows == [
        {"AGG_TIMESTAMP": DAY1 - DAY1 % day, "symbol": "IBM", "total": 4, "avgPrice": 20.0},
        {"AGG_TIMESTAMP": DAY2 - DAY2 % day, "symbol": "IBM", "total": 5, "avgPrice": 50.0},
        {"AGG_TIMESTAMP": parse_timestamp("2024-01-01 00:00:00"), "symbol": "WSO2", "total": 7, "avgPrice": 5.0},
    ]


def _tables(app, data_dir: Path) -> dict[str, pd.DataFrame]:
    layout = AggregationLayout.of(app, "TradeAggregation")
    stores = StoreRegistry(data_dir, read_only=True)
    store = stores.for_aggregation(layout.spec)
    out = {str(g): store.read(layout, g).sort_values(["AGG_TIMESTAMP", "symbol"]).reset_index(drop=True)
           for g in layout.spec.granularities}
    stores.close()
    return out


@pytest.mark.slow
def test_spark_replay_of_a_committed_batch_changes_nothing(spark, tmp_path: Path) -> None:
    """Crash after the store commit but before Spark's: Spark re-runs the batch; the store skips it."""
    app = tf.load_app(APP)
    write_jsonl(tmp_path / "trades", [TRADES[:2], TRADES[2:]])
    data = tmp_path / "data"
    first = tf.run(app, {"TradeStream": tmp_path / "trades"}, data_dir=data, spark=spark, max_files_per_trigger=1)
    assert first.aggregations["TradeAggregation"].batches == 2
    before = _tables(app, data)
    layout = AggregationLayout.of(app, "TradeAggregation")
    commits = data / "checkpoints" / f"TradeAggregation-{layout.spec_hash}" / "spark" / "commits"
    last = max(commits.iterdir(), key=lambda p: int(p.name) if p.name.isdigit() else -1)
    last.unlink()  # Spark now believes batch 1 never finished
    (commits / f".{last.name}.crc").unlink(missing_ok=True)
    again = tf.run(app, {"TradeStream": tmp_path / "trades"}, data_dir=data, spark=spark, max_files_per_trigger=1)
    totals = again.aggregations["TradeAggregation"]
    assert (totals.skipped, totals.batches) == (1, 0)
    after = _tables(app, data)
    for name, frame in before.items():
        pd.testing.assert_frame_equal(after[name], frame)


@pytest.mark.slow
def test_malformed_events_are_kept_with_reasons_and_counted(spark, tmp_path: Path) -> None:
    app = tf.load_app(APP)
    bad = [
        '{"symbol": "IBM", "price": "abc", "quantity": 1, "timestamp": 1706608800000}',
        '{"price": 1.5, "quantity": 1, "timestamp": 1706608800000}',
        '{"symbol": "IBM", "price": 1.5, "quantity": 1, "timestamp": "yesterday"}',
        '{"symbol": "IBM", "price": 1.5, "quantity": 2.5, "timestamp": 1706608800000}',
        "this is not json",
    ]
    write_jsonl(tmp_path / "trades", [[*TRADES, *bad]])
    result = tf.run(app, {"TradeStream": tmp_path / "trades"}, data_dir=tmp_path / "data", spark=spark)
    totals = result.aggregations["TradeAggregation"]
    assert (totals.events_read, totals.events_aggregated, totals.events_rejected) == (9, 4, 5)
    kept = tf.rejected(app, "TradeAggregation", data_dir=tmp_path / "data")
    reasons = sorted(kept["reason"])
    assert reasons == sorted([
        "field 'price': value 'abc' is not a double",
        "missing field 'symbol'",
        f"field 'timestamp': value 'yesterday' is not a timestamp (expected {FORMATS})",
        "field 'quantity': value '2.5' is not a long",
        "malformed record: cannot be read as a row of the stream",
    ])
    assert "this is not json" in set(kept["raw"])
    info = tf.inspect(app, data_dir=tmp_path / "data")[0]
    assert (info.events_read, info.events_aggregated, info.events_rejected) == (9, 4, 5)
    years = _tables(app, tmp_path / "data")[str(Granularity(Unit.YEARS))]
    assert int(years["total_SUM"].sum()) == 16


@pytest.mark.slow
def test_static_backfill_runs_the_same_code(spark, tmp_path: Path) -> None:
    app = tf.load_app(APP)
    frame = spark.createDataFrame(pd.DataFrame(TRADES))
    tf.run(app, {"TradeStream": frame}, data_dir=tmp_path / "data", spark=spark)
    got = tf.query(app, 'from TradeAggregation within "2024-**-** **:**:**" per "months" select symbol, total',
                   data_dir=tmp_path / "data")
    assert sorted(map(tuple, got.itertuples(index=False))) == [("IBM", 4), ("IBM", 5), ("WSO2", 7)]
    shutil.rmtree(tmp_path / "data")
