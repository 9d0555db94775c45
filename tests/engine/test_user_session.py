"""The user's Spark is the user's: a session's settings are kept, event-time buckets do not follow
``spark.sql.session.timeZone``, and a new session keeps settings made elsewhere."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

import tiltframe as tf
from tiltframe.engine.spark.session import DEFAULT_CONF, UI_RETENTION, get_session, tiltframe_defaults
from tiltframe.engine.spark.spark_settings import fill, read_properties, submit_args

APP = """
define stream Trades (symbol string, quantity long, ts long, at string);

define aggregation Gmt
from Trades select symbol, sum(quantity) as total group by symbol
aggregate by at every day ... month;

@timezone('Europe/Berlin')
define aggregation Berlin
from Trades select symbol, sum(quantity) as total group by symbol
aggregate by ts every day ... month;
"""

#: Around New York's and Berlin's DST changes (2024-03-10, 2024-03-31) and month ends, where a day or month
#: cut in New York time differs from GMT's and Berlin's.
TIMES = [
    "2024-01-31 23:30:00", "2024-02-01 02:00:00", "2024-02-29 23:59:59", "2024-03-01 04:59:59",
    "2024-03-10 01:59:59", "2024-03-10 03:00:00", "2024-03-10 06:30:00", "2024-03-30 22:59:59",
    "2024-03-30 23:00:00", "2024-03-31 00:59:59", "2024-03-31 01:00:00", "2024-03-31 21:59:59",
    "2024-03-31 22:00:00", "2024-04-01 03:00:00", "2024-10-27 00:30:00", "2024-10-27 01:30:00",
]
USER_CONF = {"spark.sql.session.timeZone": "America/New_York", "spark.sql.shuffle.partitions": "3"}


@pytest.fixture
def new_york(spark) -> Iterator[object]:
    """The shared session as a user in New York set it up; restored afterwards."""
    before = {key: spark.conf.get(key) for key in USER_CONF}
    for key, value in USER_CONF.items():
        spark.conf.set(key, value)
    try:
        yield spark
    finally:
        for key, value in before.items():
            spark.conf.set(key, value)


def _oracle(events: pd.DataFrame, zone: str, per: str) -> pd.DataFrame:
    """Per bucket of ``zone``'s local calendar and symbol: the sum of quantities (pandas)."""
    local = pd.to_datetime(events["ts"], unit="ms", utc=True).dt.tz_convert(zone)
    start = local.dt.normalize() if per == "days" else local.dt.normalize() - pd.to_timedelta(local.dt.day - 1, "D")
    frame = events.assign(AGG_TIMESTAMP=start.dt.tz_convert("UTC").astype("int64") // 10**6)
    got = frame.groupby(["AGG_TIMESTAMP", "symbol"], as_index=False)["quantity"].sum()
    return got.rename(columns={"quantity": "total"})


@pytest.mark.slow
def test_buckets_ignore_the_session_time_zone_and_the_users_settings_stay(new_york, tmp_path: Path) -> None:
    events = pd.DataFrame({
        "symbol": [("A", "B")[i % 2] for i in range(len(TIMES))],
        "quantity": [10 ** (i % 7) + i for i in range(len(TIMES))],
        "at": TIMES,
    })
    events["ts"] = pd.to_datetime(events["at"], utc=True).astype("int64") // 10**6
    folder = tmp_path / "trades"
    folder.mkdir()
    (folder / "t.jsonl").write_text("".join(json.dumps(r) + "\n" for r in events.to_dict("records")))
    app = tf.load_app(APP)
    result = tf.run(app, {"Trades": folder}, data_dir=tmp_path / "data", spark=new_york)
    assert result.aggregations["Gmt"].events_aggregated == len(TIMES)
    for agg, zone in (("Gmt", "UTC"), ("Berlin", "Europe/Berlin")):
        for per in ("days", "months"):
            got = tf.query(app, f'from {agg} within 0L, 4102444800000L per "{per}" select AGG_TIMESTAMP, symbol, '
                           "total", data_dir=tmp_path / "data")
            got = got.sort_values(["AGG_TIMESTAMP", "symbol"]).reset_index(drop=True)
            want = _oracle(events, zone, per).sort_values(["AGG_TIMESTAMP", "symbol"]).reset_index(drop=True)
            assert got["AGG_TIMESTAMP"].tolist() == want["AGG_TIMESTAMP"].tolist(), (agg, per)
            assert got["symbol"].tolist() == want["symbol"].tolist(), (agg, per)
            assert got["total"].tolist() == want["total"].tolist(), (agg, per)
    # tiltframe ran on the user's session and left its settings as the user made them.
    assert get_session() is new_york
    assert {key: new_york.conf.get(key) for key in USER_CONF} == USER_CONF


def test_settings_made_elsewhere_are_read_from_every_place_spark_takes_them() -> None:
    text = "# comment\nspark.sql.shuffle.partitions   3\nspark.driver.memory=1g\n  spark.ui.enabled : true\nother 1\n"
    assert read_properties(text) == {"spark.sql.shuffle.partitions": "3", "spark.driver.memory": "1g",
                                     "spark.ui.enabled": "true"}
    args = "--master spark://h:7077 --conf spark.sql.shuffle.partitions=3 --driver-memory=2g --packages a:b:1 x"
    assert submit_args(args) == {"spark.master": "spark://h:7077", "spark.sql.shuffle.partitions": "3",
                                 "spark.driver.memory": "2g", "spark.jars.packages": "a:b:1"}
    filled = fill(DEFAULT_CONF, {"spark.sql.session.timeZone": "Asia/Tokyo"})
    assert "spark.sql.session.timeZone" not in filled
    assert filled["spark.ui.enabled"] == "false"


def test_the_ui_keeps_little_of_finished_work_only_while_it_is_off() -> None:
    off = tiltframe_defaults("local[2]")
    assert off["spark.ui.enabled"] == "false"
    assert {k: off[k] for k in UI_RETENTION} == UI_RETENTION
    assert off["spark.sql.ui.retainedExecutions"] == "5"
    # Someone turned the UI on: its pages keep Spark's (or their) history of jobs, stages and queries.
    on = tiltframe_defaults("local[2]", ui_on=True)
    assert not set(UI_RETENTION) & set(on)
    # What no UI shows is kept small either way: progress reports, listings of files read.
    for conf in (off, on):
        assert (conf["spark.sql.streaming.numRecentProgressUpdates"],
                conf["spark.sql.hive.filesourcePartitionFileCacheSize"]) == ("10", "0")


NEW_SESSION = """
import json, sys
from pathlib import Path
from tiltframe.engine.spark.session import get_session
spark = get_session(log_file=Path(sys.argv[1]))
keys = ["spark.sql.session.timeZone", "spark.sql.shuffle.partitions", "spark.sql.adaptive.enabled",
        "spark.ui.enabled", "spark.driver.memory", "spark.sql.ui.retainedExecutions", "spark.ui.retainedJobs"]
print(json.dumps({k: spark.conf.get(k, None) for k in keys}))
spark.stop()
"""


@pytest.mark.slow
def test_a_new_session_keeps_spark_defaults_and_submit_args(tmp_path: Path) -> None:
    # A fresh interpreter: tiltframe starts the JVM itself (with its log in a file, as the CLI does).
    (tmp_path / "spark-defaults.conf").write_text(
        "spark.sql.session.timeZone America/New_York\nspark.sql.shuffle.partitions 3\nspark.driver.memory 1g\n"
        "spark.ui.retainedJobs 77\n"
    )
    env = {**os.environ, "SPARK_CONF_DIR": str(tmp_path), "TILTFRAME_SHUFFLE_PARTITIONS": "7",
           "PYSPARK_SUBMIT_ARGS": "--conf spark.sql.adaptive.enabled=false pyspark-shell"}
    env.pop("TILTFRAME_SPARK_MASTER", None)
    done = subprocess.run([sys.executable, "-c", NEW_SESSION, str(tmp_path / "spark.log")], env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    conf = json.loads(done.stdout.strip().splitlines()[-1])
    assert conf == {
        "spark.sql.session.timeZone": "America/New_York",  # spark-defaults.conf
        "spark.sql.shuffle.partitions": "3",  # spark-defaults.conf over $TILTFRAME_SHUFFLE_PARTITIONS
        "spark.sql.adaptive.enabled": "false",  # $PYSPARK_SUBMIT_ARGS
        "spark.ui.enabled": "false",  # nobody set it: tiltframe's
        "spark.driver.memory": "1g",
        "spark.sql.ui.retainedExecutions": "5",  # tiltframe's: a driver that runs for months keeps little
        "spark.ui.retainedJobs": "77",  # spark-defaults.conf
    }
