"""Any streaming DataFrame as a source: a column of JSON or CSV text parsed into a stream's attributes, bad
records rejected with reasons, a TIMESTAMP column as the event time; totals against a pandas oracle."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from pyspark.sql import functions as F

import tiltframe as tf
from tiltframe.errors import UsageError

APP = """
define stream Trades (symbol string, quantity long, ts long);
define aggregation Totals
from Trades select symbol, sum(quantity) as total, count() as trades group by symbol
aggregate by ts every sec ... day;
"""
DAY = 86_400_000
T0 = 1_706_745_599_500  # 2024-01-31 23:59:59.500 GMT, half a second before a month's end

#: Kafka-like values: good records, and ones the file source would reject too.
LINES = [
    json.dumps({"symbol": "A", "quantity": 1, "ts": T0}),
    json.dumps({"symbol": "B", "quantity": "20", "ts": T0 + 400}),  # a number as text is fine
    json.dumps({"symbol": "A", "quantity": 300, "ts": T0 + DAY}),
    json.dumps({"symbol": "A", "quantity": 4000.0, "ts": T0 + 2 * DAY}),  # 4000.0 is a long
    "not json at all",
    "[1, 2, 3]",
    json.dumps({"symbol": "B", "quantity": 1.5, "ts": T0}),  # not a long
    json.dumps({"symbol": "B", "quantity": 7}),  # no event time
    json.dumps({"quantity": 9, "ts": T0}),  # no group-by key
    json.dumps({"symbol": "C", "quantity": 50000, "ts": "2024-02-01 10:00:00"}),  # Siddhi's time text
    "",
]


def _oracle(lines: list[str]) -> tuple[pd.DataFrame, int]:
    """Per day and symbol, the sum and count of the records that are whole events (plain Python + pandas)."""
    good = []
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if not isinstance(record, dict) or record.get("symbol") is None or record.get("ts") is None:
            continue
        quantity = float(record["quantity"])
        if not quantity.is_integer():
            continue
        ts = record["ts"]
        ts = ts if isinstance(ts, int) else pd.Timestamp(ts, tz="UTC").value // 10**6
        good.append({"symbol": record["symbol"], "quantity": int(quantity), "ts": ts})
    events = pd.DataFrame(good)
    events["AGG_TIMESTAMP"] = events["ts"] // DAY * DAY
    want = events.groupby(["AGG_TIMESTAMP", "symbol"], as_index=False).agg(
        total=("quantity", "sum"), trades=("quantity", "size"))
    return want, len(lines) - len(good)


def _days(app, data_dir: Path) -> pd.DataFrame:
    got = tf.query(app, 'from Totals within 0L, 4102444800000L per "days" select AGG_TIMESTAMP, symbol, total, trades',
                   data_dir=data_dir)
    return got.sort_values(["AGG_TIMESTAMP", "symbol"]).reset_index(drop=True)


def _same(got: pd.DataFrame, want: pd.DataFrame) -> None:
    for col in ("AGG_TIMESTAMP", "symbol", "total", "trades"):
        assert got[col].tolist() == want[col].tolist(), col


@pytest.mark.slow
def test_json_lines_of_a_text_stream_typed_and_rejected_like_files(spark, tmp_path: Path) -> None:
    folder = tmp_path / "lines"
    folder.mkdir()
    (folder / "a.txt").write_text("\n".join(LINES[:6]) + "\n")
    (folder / "b.txt").write_text("\n".join(LINES[6:]) + "\n")
    app = tf.load_app(APP)
    stream = spark.readStream.text(str(folder))  # a real streaming DataFrame with one column, value
    assert stream.isStreaming
    result = tf.run(app, {"Trades": tf.parse_records(app, "Trades", stream)}, data_dir=tmp_path / "data",
                    spark=spark)
    want, bad = _oracle(LINES)
    totals = result.aggregations["Totals"]
    assert (totals.events_read, totals.events_rejected) == (len(LINES), bad)
    _same(_days(app, tmp_path / "data"), want)
    recorded = tf.rejected(app, "Totals", data_dir=tmp_path / "data")
    reasons = sorted(recorded["reason"])
    assert reasons == sorted([
        "malformed record: cannot be read as a row of the stream",  # not json at all
        "malformed record: cannot be read as a row of the stream",  # [1, 2, 3]
        "malformed record: cannot be read as a row of the stream",  # the empty line
        "field 'quantity': value '1.5' is not a long",
        "missing field 'ts'",
        "missing field 'symbol'",
    ])
    assert "not json at all" in set(recorded["raw"])


def test_csv_text_with_its_own_column_order(spark, tmp_path: Path) -> None:
    rows = [f"{T0},A,5", f"{T0 + 1},B,6", f'{T0 + 2},"A",7', "bad", f"{T0},A,x", f"{T0},A,1,extra",
            f'{T0 + 3},"C""q",4', f"{T0 + 4},D\\,2"]  # RFC 4180: a doubled quote is one, a backslash is text
    app = tf.load_app(APP)
    df = spark.createDataFrame([(r,) for r in rows], "value string")
    parsed = tf.parse_records(app, "Trades", df, format="csv", columns=["ts", "symbol", "quantity"])
    assert parsed.columns == ["symbol", "quantity", "ts", "_corrupt_record"]
    result = tf.run(app, {"Trades": parsed}, data_dir=tmp_path / "data", spark=spark)
    assert result.aggregations["Totals"].events_rejected == 3
    _same(_days(app, tmp_path / "data"), pd.DataFrame({
        "AGG_TIMESTAMP": [T0 // DAY * DAY] * 4, "symbol": ["A", "B", 'C"q', "D\\"], "total": [12, 6, 4, 2],
        "trades": [2, 1, 1, 1]}))


@pytest.mark.slow
def test_a_record_timestamp_column_is_the_event_time(spark, tmp_path: Path) -> None:
    # The shape of a Kafka stream: text in value, the record's TIMESTAMP in timestamp (here from the rate
    # source, whose rows all carry the start time in its first micro-batch).
    rate = (spark.readStream.format("rate-micro-batch").option("rowsPerBatch", 30).option("numPartitions", 2)
            .option("startTimestamp", T0).option("advanceMillisPerBatch", 1000).load())
    kafka_like = rate.select(
        F.to_json(F.struct(F.concat(F.lit("S"), (F.col("value") % 3).cast("string")).alias("symbol"),
                           F.col("value").alias("quantity"))).alias("value"),
        F.col("timestamp"),
    )
    app = tf.load_app(APP)
    parsed = tf.parse_records(app, "Trades", kafka_like, attributes_from={"ts": "timestamp"})
    result = tf.run(app, {"Trades": parsed}, data_dir=tmp_path / "data", spark=spark)
    assert result.aggregations["Totals"].events_aggregated == 30
    events = pd.DataFrame({"quantity": range(30)})
    events["symbol"] = "S" + (events["quantity"] % 3).astype(str)
    want = events.groupby("symbol", as_index=False).agg(total=("quantity", "sum"), trades=("quantity", "size"))
    want.insert(0, "AGG_TIMESTAMP", T0 // 1000 * 1000)
    got = tf.query(app, 'from Totals within 0L, 4102444800000L per "seconds" select AGG_TIMESTAMP, symbol, total, '
                   "trades", data_dir=tmp_path / "data").sort_values("symbol").reset_index(drop=True)
    _same(got, want)


def test_wrong_options_are_usage_errors(spark) -> None:
    app = tf.load_app(APP)
    df = spark.createDataFrame([("x",)], "value string")
    with pytest.raises(UsageError, match="no column 'payload'"):
        tf.parse_records(app, "Trades", df, column="payload")
    with pytest.raises(UsageError, match="format"):
        tf.parse_records(app, "Trades", df, format="xml")
    with pytest.raises(UsageError, match="attribute of stream Trades"):
        tf.parse_records(app, "Trades", df, attributes_from={"time": "value"})
