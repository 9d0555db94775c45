"""``tiltframe rebuild --within`` after an input file was corrected: the day rebuilt equals pandas over the
corrected events at every level, every other bucket is unchanged, a batch committed meanwhile is neither
lost nor doubled, and a range whose surroundings changed too is refused with nothing written."""

from __future__ import annotations

import os
import time
from contextlib import nullcontext
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

import tiltframe as tf
from tests.servers import app_with_store, fresh_database
from tiltframe.cli.commands import app as cli
from tiltframe.engine.lifecycle import recompute
from tiltframe.errors import StoreError

pytestmark = pytest.mark.slow

APP = """
define stream Trades (symbol string, price double, volume long, ts long);
define aggregation Daily
from Trades
select symbol, sum(price) as total, count() as n, max(volume) as high
group by symbol
aggregate by ts every min ... month;
"""
DAY = 86_400_000
T0 = 1_700_006_400_000  # 2023-11-15 00:00 GMT
LEVELS = {"minutes": 60_000, "hours": 3_600_000, "days": DAY}


def trades(seed: int, day: int, n: int = 200) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"symbol": rng.choice(["IBM", "WSO2"], n), "price": np.round(rng.uniform(1, 50, n), 2),
                         "volume": rng.integers(1, 100, n), "ts": T0 + day * DAY + rng.integers(0, DAY, n)})


def put(folder: Path, name: str, frame: pd.DataFrame, age: int) -> None:
    path = folder / name
    frame.to_csv(path, index=False)
    os.utime(path, (time.time() - 1000 + age, time.time() - 1000 + age))


def answer(app: tf.AppSpec, data: Path, per: str) -> pd.DataFrame:
    q = f"from Daily within 0L, 9000000000000L per '{per}' select AGG_TIMESTAMP, symbol, total, n, high"
    return tf.query(app, q, data_dir=data).set_index(["AGG_TIMESTAMP", "symbol"]).sort_index()


def oracle(events: pd.DataFrame, width: int) -> pd.DataFrame:
    grouped = events.assign(AGG_TIMESTAMP=events["ts"] // width * width).groupby(["AGG_TIMESTAMP", "symbol"])
    return grouped.agg(total=("price", "sum"), n=("ts", "count"), high=("volume", "max")).sort_index()


def same(got: pd.DataFrame, want: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(got[["total", "n", "high"]].astype(float), want.astype(float), check_exact=False,
                                  rtol=1e-12)


@pytest.mark.parametrize("backend", ["sqlite", "mysql"])  # the delete-and-insert is the same SQL on PostgreSQL
def test_a_corrected_day_is_rebuilt_and_nothing_else_changes(spark, tmp_path: Path, backend: str) -> None:
    with nullcontext(None) if backend == "sqlite" else fresh_database(backend) as url:
        app = tf.load_app(app_with_store(APP, url)[0])
        data, inbox = tmp_path / "data", tmp_path / "in"
        inbox.mkdir()
        days = [trades(d, d) for d in range(3)]
        for d, frame in enumerate(days):
            put(inbox, f"day{d}.csv", frame, d)
        tf.run(app, {"Trades": inbox}, data_dir=data, spark=spark)
        before = {per: answer(app, data, per) for per in LEVELS}

        corrected = days[1].assign(price=days[1]["price"] * 2).iloc[:-5]  # prices fixed, 5 bogus rows gone
        put(inbox, "day1.csv", corrected, 1)
        done = tf.rebuild(app, {"Trades": inbox}, within=("2023-11-16", None), data_dir=data, spark=spark)["Daily"]
        assert done.spans["days"] == (T0 + DAY, T0 + 2 * DAY) and done.spans["months"][0] < T0
        events = pd.concat([days[0], corrected, days[2]], ignore_index=True)
        for per, width in LEVELS.items():
            got, want = answer(app, data, per), oracle(events, width)
            inside = (got.index.get_level_values(0) >= T0 + DAY) & (got.index.get_level_values(0) < T0 + 2 * DAY)
            same(got[inside], want[(want.index.get_level_values(0) >= T0 + DAY)
                                   & (want.index.get_level_values(0) < T0 + 2 * DAY)])
            old = before[per]
            untouched = (old.index.get_level_values(0) < T0 + DAY) | (old.index.get_level_values(0) >= T0 + 2 * DAY)
            pd.testing.assert_frame_equal(got[~inside], old[untouched])
        month = events.groupby("symbol").agg(total=("price", "sum"), n=("ts", "count"), high=("volume", "max"))
        month.index = pd.MultiIndex.from_product([[T0 - 14 * DAY], month.index], names=["AGG_TIMESTAMP", "symbol"])
        same(answer(app, data, "months"), month)
        assert tf.verify(app, {"Trades": inbox}, data_dir=data, spark=spark)["Daily"].ok


def test_a_batch_committed_while_recomputing_is_neither_lost_nor_doubled(spark, tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    app = tf.load_app(APP)
    data, inbox = tmp_path / "data", tmp_path / "in"
    inbox.mkdir()
    days = [trades(d, d) for d in range(2)]
    put(inbox, "day0.csv", days[0], 0)
    tf.run(app, {"Trades": inbox}, data_dir=data, spark=spark)
    late = trades(7, 0, 50)
    read = recompute.Recomputation.of
    calls = []

    def a_batch_commits_meanwhile(*args, **kwargs):  # the pipeline reads a new file after the range was read
        calls.append(1)
        found = read(*args, **kwargs)
        if len(calls) == 1:
            put(inbox, "late.csv", late, 5)
            tf.run(app, {"Trades": inbox}, data_dir=data, spark=spark)
        return found

    monkeypatch.setattr(recompute.Recomputation, "of", a_batch_commits_meanwhile)
    tf.rebuild(app, {"Trades": inbox}, within=("2023-11-15", None), data_dir=data, spark=spark)
    assert len(calls) == 2  # the first recomputation lacked the batch: it was done again
    same(answer(app, data, "hours"), oracle(pd.concat([days[0], late]), 3_600_000))


def test_a_range_whose_surroundings_changed_is_refused(spark, tmp_path: Path) -> None:
    app_file = tmp_path / "app.siddhi"
    app_file.write_text(APP)
    app = tf.load_app(APP)
    data, inbox = tmp_path / "data", tmp_path / "in"
    inbox.mkdir()
    for d in range(2):
        put(inbox, f"day{d}.csv", trades(d, d), d)
    tf.run(app, {"Trades": inbox}, data_dir=data, spark=spark)
    before = answer(app, data, "minutes")
    put(inbox, "day0.csv", trades(9, 0), 0)  # another day changed: the month around day 1 would change
    with pytest.raises(StoreError, match="the inputs differ from the store outside the range"):
        tf.rebuild(app, {"Trades": inbox}, within=("2023-11-16", None), data_dir=data, spark=spark)
    pd.testing.assert_frame_equal(answer(app, data, "minutes"), before)
    refused = CliRunner().invoke(cli, ["rebuild", str(app_file), "-i", f"Trades={inbox}", "-d", str(data),
                                       "--within", "2023-11-16"])
    assert refused.exit_code != 0 and "outside the range" in refused.output
