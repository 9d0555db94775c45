"""The seeds' six-event walk-through, run end to end through the streaming engine into SQLite."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

import tiltframe as tf
from tiltframe.aggregates.layout import AggregationLayout
from tiltframe.model.durations import Granularity, Unit
from tiltframe.store.open_stores import StoreRegistry

APP = """
define stream TradeStream (symbol string, price double, quantity long, timestamp string);

define aggregation TradeAggregation
from TradeStream
select symbol, avg(price) as avgPrice, sum(quantity) as total, count() as trades, price * quantity as last
group by symbol
aggregate by timestamp every sec ... hour;
"""

EVENTS = [  # the seed's events 0..5, with prices and quantities to check values
    ("2018-01-01 05:59:58", 10.0, 1),
    ("2018-01-01 05:59:58", 20.0, 2),
    ("2018-01-01 05:59:59", 30.0, 3),
    ("2018-01-01 06:00:00", 40.0, 4),
    ("2018-01-01 06:00:01", 50.0, 5),
    ("2018-01-01 06:00:02", 60.0, 6),
]


def write_files(folder: Path, groups: list[list[int]]) -> None:
    folder.mkdir(parents=True)
    now = time.time() - 100
    for n, group in enumerate(groups):
        path = folder / f"part-{n:03d}.jsonl"
        with path.open("w") as fh:
            for i in group:
                ts, price, qty = EVENTS[i]
                fh.write(json.dumps({"symbol": "WSO2", "price": price, "quantity": qty, "timestamp": ts}) + "\n")
        os.utime(path, (now + n, now + n))


def ms(text: str) -> int:
    from tiltframe.timeutil.parse import parse_timestamp

    return parse_timestamp(text)


def expected_rows(events: list[int]) -> tuple[float, int, int, float]:
    prices = [EVENTS[i][1] for i in events]
    qty = [EVENTS[i][2] for i in events]
    last = max(events)  # later arrival wins a tie; later events also have later or equal times
    return (sum(prices) / len(prices), sum(qty), len(events), EVENTS[last][1] * EVENTS[last][2])


SECONDS = {"05:59:58": [0, 1], "05:59:59": [2], "06:00:00": [3], "06:00:01": [4], "06:00:02": [5]}
MINUTES = {"05:59:00": [0, 1, 2], "06:00:00": [3, 4, 5]}
HOURS = {"05:00:00": [0, 1, 2], "06:00:00": [3, 4, 5]}


@pytest.mark.slow
@pytest.mark.parametrize(
    "groups", [[[0, 1, 2, 3, 4, 5]], [[0], [1], [2], [3], [4], [5]]], ids=["one-batch", "six-batches"]
)
def test_seed_walkthrough(spark, tmp_path: Path, groups: list[list[int]]) -> None:
    app = tf.load_app(APP)
    write_files(tmp_path / "in", groups)
    result = tf.run(app, {"TradeStream": tmp_path / "in"}, data_dir=tmp_path / "data", spark=spark,
                    max_files_per_trigger=1)
    totals = result.aggregations["TradeAggregation"]
    assert (totals.events_read, totals.events_aggregated, totals.events_rejected) == (6, 6, 0)
    assert totals.batches == len(groups)

    layout = AggregationLayout.of(app, "TradeAggregation")
    stores = StoreRegistry(tmp_path / "data", read_only=True)
    store = stores.for_aggregation(layout.spec)
    for unit, expected in [(Unit.SECONDS, SECONDS), (Unit.MINUTES, MINUTES), (Unit.HOURS, HOURS)]:
        rows = store.read(layout, Granularity(unit)).sort_values("AGG_TIMESTAMP")
        assert list(rows["AGG_TIMESTAMP"]) == [ms(f"2018-01-01 {t}") for t in expected]
        assert (layout.table_name(Granularity(unit))) == f"TradeAggregation_{unit.name}"
    stores.close()

    for per, expected in [("seconds", SECONDS), ("minutes", MINUTES), ("hours", HOURS)]:
        got = tf.query(app, f'from TradeAggregation within "2018-01-01 **:**:**" per "{per}" '
                            f"select AGG_TIMESTAMP, symbol, avgPrice, total, trades, last order by AGG_TIMESTAMP",
                       data_dir=tmp_path / "data")
        want = [(ms(f"2018-01-01 {t}"), "WSO2", *expected_rows(ev)) for t, ev in expected.items()]
        assert [tuple(r) for r in got.itertuples(index=False)] == want
