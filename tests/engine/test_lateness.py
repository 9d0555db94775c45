"""Late and out-of-order events through the streaming engine: seed 000's buffer, bounded lateness, the
default exact mode and the recovery rule of a new pipeline, with every event accounted for."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pandas as pd
import pytest

import tiltframe as tf
from tiltframe.aggregates.layout import AggregationLayout
from tiltframe.engine.inputs.sources import FileInput
from tiltframe.model.app import AppSpec
from tiltframe.model.durations import Granularity, Unit
from tiltframe.store.open_stores import StoreRegistry
from tiltframe.timeutil.parse import parse_timestamp

pytestmark = pytest.mark.slow

STREAM = "define stream TradeStream (symbol string, price double, quantity long, timestamp long);\n"
AGG = """define aggregation TradeAggregation
from TradeStream
select symbol, avg(price) as avgPrice, sum(quantity) as total
group by symbol
aggregate by timestamp every sec ... year;
"""
BASE = parse_timestamp("2024-01-01 10:00:00")
#: Seed 000: "event_1: 50 -> event_2: 51 -> event_3: 52 -> event_4: 53 -> event_5: 51 -> event_6: 53 ->
#: event_7: 54 -> event_8: 50".  Event i has quantity 2**i, so a bucket's total names its events.
SEED_SECONDS = [50, 51, 52, 53, 51, 53, 54, 50]
SPLITS = {
    "one batch": [8],
    "one event per batch": [1] * 8,
    "halves": [4, 4],
    "uneven": [3, 2, 3],
    "late event alone": [7, 1],
}


def seed_events() -> list[dict]:
    return [
        {"symbol": "IBM", "price": float(i + 1), "quantity": 2**i, "timestamp": BASE + s * 1000 + 10 * i}
        for i, s in enumerate(SEED_SECONDS)
    ]


def write_batches(folder: Path, events: list[dict], split: list[int]) -> None:
    """One JSON Lines file per micro-batch, with increasing modification times (arrival order)."""
    folder.mkdir(parents=True, exist_ok=True)
    now, start = time.time() - 1000, 0
    for i, n in enumerate(split):
        path = folder / f"part-{i:03d}.jsonl"
        path.write_text("".join(json.dumps(e) + "\n" for e in events[start : start + n]))
        os.utime(path, (now + i, now + i))
        start += n


def run(
    app_text: str, events: list[dict], split: list[int], data_dir: Path, spark, folder: Path | None = None
) -> AppSpec:
    app = tf.load_app(app_text)
    folder = folder or data_dir.parent / f"{data_dir.name}-in"
    write_batches(folder, events, split)
    tf.run(app, {"TradeStream": FileInput(str(folder), "json", 1)}, data_dir=data_dir, spark=spark)
    return app


def stored(app, data_dir: Path, unit: Unit = Unit.SECONDS) -> dict[int, int]:
    """{second of the minute: total} of the stored table of ``unit``."""
    layout = AggregationLayout.of(app, "TradeAggregation")
    stores = StoreRegistry(data_dir, read_only=True)
    try:
        rows = stores.for_aggregation(layout.spec).read(layout, Granularity(unit))
    finally:
        stores.close()
    return {int((r.AGG_TIMESTAMP - BASE) // 1000): int(r.total_SUM) for r in rows.itertuples()}


def mask(*events: int) -> int:
    """The total of the given (1-based) seed events."""
    return sum(2 ** (e - 1) for e in events)


@pytest.mark.parametrize("split", list(SPLITS.values()), ids=list(SPLITS))
@pytest.mark.parametrize("ignore", [False, True], ids=["move", "drop"])
def test_seed_buffer_sequence(spark, tmp_path: Path, split: list[int], ignore: bool) -> None:
    annotations = f"@BufferSize('3')\n@IgnoreEventsOlderThanBuffer('{str(ignore).lower()}')\n"
    app = run(STREAM + annotations + AGG, seed_events(), split, tmp_path / "data", spark)
    # Event 5 joins event 2 in second 51 and event 6 joins event 4 in second 53 (both inside the buffer);
    # event 8 (second 50) arrives after 54 expired 50 from the buffer: moved into 51, or dropped.
    expected = {50: mask(1), 51: mask(2, 5), 52: mask(3), 53: mask(4, 6), 54: mask(7)}
    if not ignore:
        expected[51] = mask(2, 5, 8)
    assert stored(app, tmp_path / "data") == expected
    assert stored(app, tmp_path / "data", Unit.MINUTES) == {0: sum(expected.values())}
    info = tf.inspect(app, data_dir=tmp_path / "data")[0]
    assert info.events_read == 8
    assert (info.events_aggregated, info.events_moved, info.events_rejected) == ((7, 0, 1) if ignore else (7, 1, 0))
    recorded = tf.rejected(app, "TradeAggregation", data_dir=tmp_path / "data")
    assert len(recorded) == 1
    row = recorded.iloc[0]
    assert row["event_timestamp"] == BASE + 50_000 + 70
    assert int(json.loads(row["raw"])["quantity"]) == 2**7  # as read: JSON sources give text
    if ignore:
        assert row["kind"] == "older_than_buffer"
        assert pd.isna(row["adjusted_timestamp"])
    else:
        assert (row["kind"], row["adjusted_timestamp"]) == ("moved", BASE + 51_000)


@pytest.mark.parametrize("split", [[8], [4, 4], [1] * 8], ids=["one batch", "halves", "one per batch"])
@pytest.mark.parametrize("ignore", [False, True], ids=["move", "drop"])
def test_no_buffer(spark, tmp_path: Path, split: list[int], ignore: bool) -> None:
    """Without @BufferSize every event older than the latest second is moved into it, or dropped."""
    annotations = f"@IgnoreEventsOlderThanBuffer('{str(ignore).lower()}')\n"
    app = run(STREAM + annotations + AGG, seed_events(), split, tmp_path / "data", spark)
    # Latest when each event arrives: 50, 51, 52, 53, 53, 53, 54, 54; events 5 and 8 are older.
    expected = {50: mask(1), 51: mask(2), 52: mask(3), 53: mask(4, 6), 54: mask(7)}
    if not ignore:
        expected[53] = mask(4, 5, 6)
        expected[54] = mask(7, 8)
    assert stored(app, tmp_path / "data") == expected
    kinds = sorted(tf.rejected(app, "TradeAggregation", data_dir=tmp_path / "data")["kind"])
    assert kinds == (["older_than_buffer"] * 2 if ignore else ["moved"] * 2)


@pytest.mark.parametrize("split", [[8], [3, 2, 3], [1] * 8], ids=["one batch", "uneven", "one per batch"])
def test_exact_by_default(spark, tmp_path: Path, split: list[int]) -> None:
    app = run(STREAM + AGG, seed_events(), split, tmp_path / "data", spark)
    assert stored(app, tmp_path / "data") == {50: mask(1, 8), 51: mask(2, 5), 52: mask(3), 53: mask(4, 6), 54: mask(7)}
    info = tf.inspect(app, data_dir=tmp_path / "data")[0]
    assert (info.events_read, info.events_aggregated, info.events_moved, info.events_rejected) == (8, 8, 0, 0)


@pytest.mark.parametrize("split", [[8], [4, 4], [1] * 8], ids=["one batch", "halves", "one per batch"])
def test_allowed_lateness(spark, tmp_path: Path, split: list[int]) -> None:
    """2.5 s allowed: event 8 (second 50, when the latest is 54.06) is 4.01 s late and rejected; event 5
    (51.04 against 53.03) is 1.99 s late and goes into its own second."""
    app = run(STREAM + "@allowedLateness('2500 ms')\n" + AGG, seed_events(), split, tmp_path / "data", spark)
    assert stored(app, tmp_path / "data") == {50: mask(1), 51: mask(2, 5), 52: mask(3), 53: mask(4, 6), 54: mask(7)}
    recorded = tf.rejected(app, "TradeAggregation", data_dir=tmp_path / "data")
    assert list(recorded["kind"]) == ["too_late"]
    assert "2500 ms" in recorded.iloc[0]["reason"]


def test_non_aggregate_value_follows_arrival_order_across_files(spark, tmp_path: Path) -> None:
    """Two events with the same event time in two files of one micro-batch: the later file's wins,
    whatever order Spark packs the files in (it sorts them by size)."""
    app_text = STREAM + AGG.replace("sum(quantity) as total", "sum(quantity) as total, price as lastPrice")
    tie = BASE + 5_000
    folder = tmp_path / "in"
    first = [{"symbol": "IBM", "price": 1.0, "quantity": 1, "timestamp": tie}]
    # The later file is the smaller one: a size-ordered read would put it first.
    second = [{"symbol": "IBM", "price": 2.0, "quantity": 2, "timestamp": tie}]
    padding = [{"symbol": "XYZ", "price": 0.0, "quantity": 0, "timestamp": tie - 1000}] * 200
    write_batches(folder, first + padding + second, [201, 1])
    app = tf.load_app(app_text)
    tf.run(app, {"TradeStream": FileInput(str(folder), "json", None)}, data_dir=tmp_path / "data", spark=spark)
    answer = tf.query(app, "from TradeAggregation within 0L, 9999999999999L per 'seconds' "
                           "select symbol, lastPrice, total", data_dir=tmp_path / "data")
    ibm = answer[answer["symbol"] == "IBM"]
    assert list(ibm["lastPrice"]) == [2.0]


def test_restart_without_checkpoint_ignores_the_replay(spark, tmp_path: Path) -> None:
    """A new deployment (checkpoints gone) over the same store: replaying the source counts nothing twice;
    the first event newer than the latest stored second ends the recovery."""
    data = tmp_path / "data"
    events = seed_events()[:4]  # seconds 50..53
    app = run(STREAM + AGG, events, [4], data, spark, folder=tmp_path / "in")
    before = stored(app, data)
    for checkpoint in (data / "checkpoints").iterdir():
        os.rename(checkpoint, tmp_path / f"old-{checkpoint.name}")
    # The replay plus one late event (second 52, arrives before anything newer: ignored too) and then
    # two new ones: second 54, then second 51 (now merged into its bucket: exact mode).
    newer = [
        {"symbol": "IBM", "price": 9.0, "quantity": 2**10, "timestamp": BASE + 52_500},
        {"symbol": "IBM", "price": 9.0, "quantity": 2**11, "timestamp": BASE + 54_000},
        {"symbol": "IBM", "price": 9.0, "quantity": 2**12, "timestamp": BASE + 51_000},
    ]
    write_batches(tmp_path / "in2", events + newer, [4, 3])
    tf.run(app, {"TradeStream": FileInput(str(tmp_path / "in2"), "json", 1)}, data_dir=data, spark=spark)
    after = stored(app, data)
    assert after == {**before, 51: before[51] + 2**12, 54: 2**11}
    info = tf.inspect(app, data_dir=data)[0]
    assert (info.events_read, info.events_aggregated, info.events_rejected) == (4 + 7, 4 + 2, 5)
    recorded = tf.rejected(app, "TradeAggregation", data_dir=data)
    assert set(recorded["kind"]) == {"before_recovery"}
    assert sorted(recorded["event_timestamp"]) == sorted([e["timestamp"] for e in events] + [BASE + 52_500])


def test_counts_add_up_with_invalid_and_late_events(spark, tmp_path: Path) -> None:
    events: list[dict | str] = [*seed_events(), "not json", {"symbol": "IBM", "price": "x", "quantity": 1,
                                                              "timestamp": BASE}]
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.jsonl").write_text("".join((e if isinstance(e, str) else json.dumps(e)) + "\n" for e in events))
    app = tf.load_app(STREAM + "@BufferSize('1')\n" + AGG)
    tf.run(app, {"TradeStream": FileInput(str(folder), "json", 1)}, data_dir=tmp_path / "data", spark=spark)
    info = tf.inspect(app, data_dir=tmp_path / "data")[0]
    assert info.events_read == 10
    assert info.events_read == info.events_aggregated + info.events_moved + info.events_rejected
    recorded = tf.rejected(app, "TradeAggregation", data_dir=tmp_path / "data")
    by_kind = recorded["kind"].value_counts().to_dict()
    assert by_kind == {"invalid": 2, "moved": info.events_moved}
    assert dict(info.recorded_by_kind) == by_kind
    totals = pd.Series(stored(app, tmp_path / "data"))
    assert totals.sum() == sum(2**i for i in range(8))  # every valid event is in some second
