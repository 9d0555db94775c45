"""File sources: each micro-batch is read from the files Spark's logs give it."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

import tiltframe as tf
from tests.engine.test_streaming import APP, write_jsonl
from tiltframe.aggregates.layout import AggregationLayout
from tiltframe.engine.inputs.file_batches import FileBatches, batch_files, logged_path
from tiltframe.engine.inputs.sources import FileInput, list_stream
from tiltframe.model.app import AppSpec
from tiltframe.model.durations import Granularity, Unit
from tiltframe.store.open_stores import StoreRegistry
from tiltframe.timeutil.parse import parse_timestamp

T0 = parse_timestamp("2024-12-31 23:59:50")


def _trade(i: int) -> dict:
    return {"symbol": f"S{i % 3}", "price": float(i), "quantity": i + 1, "timestamp": T0 + 1_000 * i}


def _checkpoint(app: AppSpec, data: Path) -> Path:
    layout = AggregationLayout.of(app, "TradeAggregation")
    return data / "checkpoints" / f"TradeAggregation-{layout.spec_hash}" / "spark"


@pytest.mark.slow
def test_each_batch_reads_its_own_files_also_once_the_source_log_is_compacted(spark, tmp_path: Path) -> None:
    """Twelve files, one per micro-batch: Spark compacts its source log after the tenth batch, and every batch
    still finds exactly its file, in a folder whose name needs escaping in a URI."""
    app = tf.load_app(APP)
    inbox = tmp_path / "in box"
    write_jsonl(inbox, [[_trade(i)] for i in range(12)])
    data = tmp_path / "data"
    result = tf.run(app, {"TradeStream": inbox}, data_dir=data, spark=spark, max_files_per_trigger=1)
    totals = result.aggregations["TradeAggregation"]
    assert (totals.batches, totals.events_read, totals.events_aggregated) == (12, 12, 12)
    checkpoint = _checkpoint(app, data)
    assert list((checkpoint / "sources" / "0").glob("*.compact"))  # the compacted form was read
    for batch in range(12):
        assert batch_files(checkpoint, batch) == [f"file:{inbox / f'part-{batch:03d}.jsonl'}"]
    layout = AggregationLayout.of(app, "TradeAggregation")
    stores = StoreRegistry(data, read_only=True)
    years = stores.for_aggregation(layout.spec).read(layout, Granularity(Unit.YEARS))
    stores.close()
    # The events span New Year: each year's rows hold exactly its events.
    assert years.groupby("AGG_TIMESTAMP")["total_SUM"].sum().to_dict() == {
        parse_timestamp("2024-01-01 00:00:00"): sum(i + 1 for i in range(10)),
        parse_timestamp("2025-01-01 00:00:00"): 11 + 12,
    }


def test_a_batch_missing_from_the_logs_has_no_files(tmp_path: Path) -> None:
    assert batch_files(tmp_path, 0) is None
    (tmp_path / "offsets").mkdir()
    (tmp_path / "offsets" / "0").write_text('v9\n{}\n{"logOffset":0}\n')  # a version not known here
    assert batch_files(tmp_path, 0) is None


def test_logged_uris_become_reader_paths() -> None:
    assert logged_path("file:///data/in%20box/part%2B1.json") == "file:/data/in box/part+1.json"
    assert logged_path("hdfs://namenode:8020/data/a.parquet") == "hdfs://namenode:8020/data/a.parquet"


def test_without_logs_the_files_come_from_the_rows_spark_hands_over(spark, tmp_path: Path, caplog) -> None:
    app = tf.load_app(APP)
    inbox = tmp_path / "trades"
    write_jsonl(inbox, [[_trade(0)], [_trade(1)]])
    seen: list[tuple[int, int, int, bool]] = []
    stream = app.stream("TradeStream")
    listing, fmt = list_stream(spark, FileInput(str(inbox)), stream)
    batches = FileBatches(spark, fmt, stream, tmp_path / "none" / "spark",
                          lambda frames, batch, problems, small: seen.append((sum(f.count() for f in frames), batch,
                                                                              len(problems), small)))
    raw = spark.read.format("binaryFile").load(str(inbox))
    with caplog.at_level(logging.INFO, logger="tiltframe.engine.inputs.file_batches"):
        batches(raw, 3)
    assert seen == [(2, 3, 0, True)]
    assert "not in the form known here" in caplog.text
    assert listing.isStreaming
