"""ISO weeks as an opt-in level: buckets start at local midnight of Monday in the aggregation's zone, roll up
from days (or finer), and never feed months or years, which roll up from days; checked against pandas."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

import tiltframe as tf
from tiltframe.engine.events.buckets import bucket_start
from tiltframe.errors import DefinitionError
from tiltframe.model.durations import Granularity, Unit, unit_range

WEEK = Granularity(Unit.WEEKS)
#: Zones whose offset never changes at local midnight, so "local midnight of Monday" is one instant.
ZONES = ["UTC", "Europe/Berlin", "America/New_York", "Asia/Kolkata", "Australia/Lord_Howe", "+05:45"]


def week_start(ms: int, zone: str) -> int:
    """The oracle: the instant of local midnight of the Monday of the ISO week holding ``ms``."""
    tz = "UTC" if zone.startswith(("+", "-")) else zone
    local = pd.Timestamp(ms, unit="ms", tz="UTC")
    if tz == "UTC" and zone != "UTC":
        sign = 1 if zone[0] == "+" else -1
        offset = pd.Timedelta(hours=int(zone[1:3]), minutes=int(zone[4:6])) * sign
        day = (local + offset).normalize().tz_localize(None)
        monday = day - pd.Timedelta(days=day.weekday())
        return int(((monday - offset).value) // 1_000_000)
    day = local.tz_convert(tz).normalize().tz_localize(None)
    monday = day - pd.Timedelta(days=day.weekday())
    return int(monday.tz_localize(tz, nonexistent="shift_forward", ambiguous=True).value // 1_000_000)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(zone=st.sampled_from(ZONES),
       instants=st.lists(st.integers(946_684_800_000, 1_893_456_000_000), min_size=1, max_size=200))
def test_week_buckets_start_on_local_monday(spark, zone: str, instants: list[int]) -> None:
    df = spark.createDataFrame(pd.DataFrame({"ts": np.array(instants, dtype=np.int64)}))
    got = df.select("ts", bucket_start(F.col("ts"), WEEK, zone).alias("week"),
                    bucket_start(bucket_start(F.col("ts"), Granularity(Unit.DAYS), zone), WEEK, zone).alias("nested"),
                    ).toPandas()
    want = [week_start(int(t), zone) for t in got["ts"]]
    assert got["week"].tolist() == want
    assert got["nested"].tolist() == want  # a day lies inside one week


def test_ranges_leave_weeks_out_unless_they_name_them() -> None:
    assert Unit.WEEKS not in {g.unit for g in unit_range(Unit.SECONDS, Unit.YEARS)}
    assert [g.unit for g in unit_range(Unit.DAYS, Unit.WEEKS)] == [Unit.DAYS, Unit.WEEKS]
    assert [g.unit for g in unit_range(Unit.WEEKS, Unit.YEARS)] == [Unit.WEEKS, Unit.MONTHS, Unit.YEARS]


APP = """
@eventTime('ts') define stream S (k string, v long, ts long);
{agg}
"""


@pytest.mark.parametrize(("every", "message"), [
    ("2 week", "a week level is one ISO week"),
    ("week, month", "cannot roll up from weeks"),
    ("week ... year", "cannot roll up from weeks"),
    ("2 day, week", "cannot be listed before"),
])
def test_chains_with_weeks_that_cannot_roll_up_are_refused(every: str, message: str) -> None:
    agg = f"define aggregation A from S select k, sum(v) as s group by k aggregate by ts every {every};"
    with pytest.raises(DefinitionError, match=message):
        tf.load_app(APP.format(agg=agg))


@pytest.mark.parametrize("every", ["week", "sec ... week", "day, week, month", "hour, day, week, month, year",
                                   "10 min, week"])
def test_chains_with_weeks_are_accepted(every: str) -> None:
    agg = f"define aggregation A from S select k, sum(v) as s group by k aggregate by ts every {every};"
    tf.load_app(APP.format(agg=agg))


def _events() -> pd.DataFrame:
    rng = np.random.default_rng(7)
    start = pd.Timestamp("2024-02-20", tz="UTC").value // 1_000_000  # across Berlin's spring change and April
    ts = np.sort(rng.integers(start, start + 70 * 86_400_000, 3000))
    return pd.DataFrame({"k": rng.choice(["a", "b", "c"], len(ts)), "v": rng.integers(1, 100, len(ts)), "ts": ts})


@pytest.mark.slow
def test_weeks_and_months_from_days_in_a_zone(spark, tmp_path) -> None:
    """``day, week, month``: weeks roll up from days and months from days, not weeks; ``hour ... week`` and
    months beside it: every level equals pandas' grouping of the raw events by local calendar."""
    zone = "Europe/Berlin"
    app = tf.load_app(f"""
@eventTime('ts') define stream S (k string, v long, ts long);
@timezone('{zone}')
define aggregation DWM from S select k, sum(v) as s, count() as n group by k aggregate by ts every day, week, month;
@timezone('{zone}')
define aggregation HW from S select k, sum(v) as s, count() as n group by k
aggregate by ts every hour, day, week, month;
""")
    events = _events()
    inbox = tmp_path / "in"
    inbox.mkdir()
    for i, part in enumerate(events.iloc[rows] for rows in np.array_split(np.arange(len(events)), 3)):
        part.to_csv(inbox / f"{i}.csv", index=False)
    tf.run(app, {"S": inbox}, data_dir=tmp_path / "data", spark=spark, max_files_per_trigger=1)
    local = pd.to_datetime(events["ts"], unit="ms", utc=True).dt.tz_convert(zone)
    buckets = {
        "weeks": [week_start(int(t), zone) for t in events["ts"]],
        "months": (local.dt.tz_localize(None).dt.to_period("M").dt.start_time.dt.tz_localize(zone)
                   .astype("int64") // 1_000_000).tolist(),
    }
    for name in ("DWM", "HW"):
        for per, starts in buckets.items():
            got = tf.query(app, f'from {name} within 0L, 4102444800000L per "{per}" select AGG_TIMESTAMP, k, s, n',
                           data_dir=tmp_path / "data")
            want = (events.assign(AGG_TIMESTAMP=starts).groupby(["AGG_TIMESTAMP", "k"], as_index=False)
                    .agg(s=("v", "sum"), n=("v", "size")))
            got = got.sort_values(["AGG_TIMESTAMP", "k"]).reset_index(drop=True)
            assert got[["AGG_TIMESTAMP", "k"]].to_dict("records") == want[["AGG_TIMESTAMP", "k"]].to_dict("records")
            assert got["s"].tolist() == want["s"].tolist() and got["n"].tolist() == want["n"].tolist(), (name, per)
    weeks = tf.query(app, 'from DWM within 0L, 4102444800000L per "weeks" select AGG_TIME', data_dir=tmp_path / "data")
    assert {t.weekday() for t in weeks["AGG_TIME"]} == {0}  # Mondays, in Berlin
