"""A retrieval without ``per`` answers the exact totals of any range: tiled from the coarsest levels that
fit, finer ones at its edges, in the aggregation's zone, across a daylight-saving change.  Every answer
equals pandas over the raw events, or is the documented refusal (an edge inside a finest bucket, or a part
only purged buckets held)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tiltframe as tf
from tiltframe.aggregates.layout import AggregationLayout
from tiltframe.errors import DefinitionError, QueryError
from tiltframe.model.bucket_bounds import bucket_start
from tiltframe.model.durations import Granularity, Unit
from tiltframe.retrieval.range_totals import tiles
from tiltframe.store.open_stores import StoreRegistry

ZONE = "Europe/Berlin"
APP = f"""
define stream Trades (symbol string, price double, quantity long, ts long);
@timezone('{ZONE}')
define aggregation Prices
from Trades
select symbol, sum(quantity) as total, count() as n, min(price) as lo, max(price) as hi
group by symbol
aggregate by ts every sec ... year;

define aggregation Hourly
from Trades
select symbol, sum(quantity) as total
group by symbol
aggregate by ts every hour ... month;
"""
T0 = int(pd.Timestamp("2024-02-20", tz=ZONE).value // 1_000_000)
T1 = int(pd.Timestamp("2024-04-10", tz=ZONE).value // 1_000_000)
LEVELS = [Granularity(u) for u in (Unit.SECONDS, Unit.MINUTES, Unit.HOURS, Unit.DAYS, Unit.MONTHS, Unit.YEARS)]
QUERY = "from Prices within {s}L, {e}L select symbol, total, n, lo, hi"


@pytest.fixture(scope="module")
def stored(spark, tmp_path_factory: pytest.TempPathFactory) -> tuple[tf.AppSpec, Path, pd.DataFrame]:
    rng = np.random.default_rng(31)
    n = 3000
    events = pd.DataFrame({"symbol": rng.choice(["IBM", "WSO2", "ORCL"], n),
                           "price": np.round(rng.uniform(1, 100, n), 2), "quantity": rng.integers(1, 50, n),
                           "ts": rng.integers(T0, T1, n)})
    inbox = tmp_path_factory.mktemp("trades")
    events.to_csv(inbox / "trades.csv", index=False)
    app = tf.load_app(APP)
    data = inbox.parent / "data"
    tf.run(app, {"Trades": inbox}, data_dir=data, spark=spark)
    return app, data, events


def oracle(events: pd.DataFrame, s: int, e: int) -> dict[str, tuple]:
    inside = events[(events["ts"] >= s) & (events["ts"] < e)]
    grouped = inside.groupby("symbol").agg(total=("quantity", "sum"), n=("quantity", "size"), lo=("price", "min"),
                                          hi=("price", "max"))
    return {k: (int(r.total), int(r.n), float(r.lo), float(r.hi)) for k, r in grouped.iterrows()}


def answer(app: tf.AppSpec, data: Path, s: int, e: int) -> dict[str, tuple]:
    got = tf.query(app, QUERY.format(s=s, e=e), data_dir=data)
    return {r.symbol: (int(r.total), int(r.n), float(r.lo), float(r.hi)) for r in got.itertuples()}


edges = st.tuples(st.integers(T0 - 86_400_000 * 30, T1 + 86_400_000 * 30), st.sampled_from(LEVELS))


@settings(max_examples=60, deadline=None)
@given(first=edges, second=edges)
def test_totals_of_any_aligned_range_equal_the_events(stored, first, second) -> None:
    app, data, events = stored
    s, e = sorted(bucket_start(t, g, ZONE) for t, g in (first, second))
    if s == e:
        return
    assert answer(app, data, s, e) == oracle(events, s, e)


def test_the_range_is_read_from_the_coarsest_levels_that_fit(stored) -> None:
    app, _, _ = stored
    layout = AggregationLayout.of(app, "Prices")
    s = int(pd.Timestamp("2024-02-28 23:59:30", tz=ZONE).value // 1_000_000)
    e = int(pd.Timestamp("2024-04-02 01:00:00", tz=ZONE).value // 1_000_000)
    got = [(str(t.granularity), t.start_ms, t.end_ms) for t in tiles(layout, s, e, {})]
    at = [int(pd.Timestamp(x, tz=ZONE).value // 1_000_000) for x in
          ("2024-02-29 00:00", "2024-03-01", "2024-04-01", "2024-04-02", "2024-04-02 01:00")]
    assert got == [("seconds", s, at[0]), ("days", at[0], at[1]), ("months", at[1], at[2]),
                   ("days", at[2], at[3]), ("hours", at[3], e)]


def test_an_edge_inside_a_finest_bucket_is_refused_with_its_bucket(stored) -> None:
    app, data, _ = stored
    s = int(pd.Timestamp("2024-03-01 10:00:00.250", tz=ZONE).value // 1_000_000)
    with pytest.raises(QueryError, match=r"starts at 2024-03-01T10:00:00.250\+01:00, inside a bucket of seconds .*"
                                         r"from 2024-03-01T10:00:00.000\+01:00 to 2024-03-01T10:00:01.000\+01:00"):
        tf.query(app, QUERY.format(s=s, e=s + 3_600_000), data_dir=data)


def test_ends_off_the_calendar_are_refused(stored) -> None:
    app, data, _ = stored
    with pytest.raises(QueryError, match="outside the calendar"):
        tf.query(app, QUERY.format(s=0, e=9_223_372_036_854_775_807), data_dir=data)


def test_purged_fine_buckets_leave_only_what_coarser_levels_cover(stored, tmp_path: Path) -> None:
    app, original, events = stored
    data = tmp_path / "data"
    shutil.copytree(original, data)  # the other tests keep every level
    layout = AggregationLayout.of(app, "Prices")
    cut = int(pd.Timestamp("2024-03-15", tz=ZONE).value // 1_000_000)
    stores = StoreRegistry(data)
    try:  # seconds and minutes purged before March 15th, as retention would
        stores.for_aggregation(layout.spec).purge(layout, {Granularity(Unit.SECONDS): cut,
                                                           Granularity(Unit.MINUTES): cut}, T1)
    finally:
        stores.close()
    hour = int(pd.Timestamp("2024-03-10 07:00", tz=ZONE).value // 1_000_000)
    assert answer(app, data, hour, cut + 90_000) == oracle(events, hour, cut + 90_000)  # hours, then seconds kept
    # Seconds and minutes are gone there and hours cannot split 07:00:30, so nothing covers 07:00:30-08:00.
    with pytest.raises(QueryError, match=r"needs the seconds buckets from 2024-03-10T07:00:30.000\+01:00 to "
                                         r"2024-03-10T08:00:00.000\+01:00, but Prices keeps seconds only from "
                                         r"2024-03-15T00:00:00.000\+01:00 on \(retention\)"):
        tf.query(app, QUERY.format(s=hour + 30_000, e=cut), data_dir=data)


def test_relative_ranges_without_per(stored) -> None:
    app, data, events = stored
    assert tf.query(app, 'from Prices within "last 6 hours" select symbol, total', data_dir=data).empty
    march = (int(pd.Timestamp("2024-03-01", tz=ZONE).value // 1_000_000),
             int(pd.Timestamp("2024-04-01", tz=ZONE).value // 1_000_000))
    got = tf.query(app, 'from Prices within "2024-03-** **:**:**" select symbol, total, n, lo, hi', data_dir=data)
    assert {r.symbol: (r.total, r.n, r.lo, r.hi) for r in got.itertuples()} == oracle(events, *march)


@pytest.mark.parametrize("zone", ["Asia/Kolkata", "America/St_Johns", "Australia/Lord_Howe", "+05:45"])
def test_days_of_another_zone_are_built_on_read(stored, zone: str) -> None:
    """Each local day of ``zone`` is a range of its own, tiled from Berlin's levels (exact: seconds meet
    every offset), and its AGG_TIME is shown in that zone."""
    app, data, events = stored
    got = tf.query(app, f'from Prices within 0L, 9000000000000L per "days in {zone}" '
                        "select AGG_TIMESTAMP, AGG_TIME, symbol, total, n", data_dir=data)
    pandas_zone = "Asia/Kathmandu" if zone == "+05:45" else zone  # +05:45 since 1986
    local = pd.to_datetime(events["ts"], unit="ms", utc=True).dt.tz_convert(pandas_zone)
    day = local.dt.normalize().dt.tz_convert("UTC").astype("int64") // 1_000_000
    want = events.assign(day=day).groupby(["day", "symbol"]).agg(total=("quantity", "sum"), n=("quantity", "size"))
    assert {(r.AGG_TIMESTAMP, r.symbol): (r.total, r.n) for r in got.itertuples()} == {
        k: (int(v.total), int(v.n)) for k, v in want.iterrows()}
    first = got["AGG_TIME"].iloc[0]
    assert (first.hour, first.minute) == (0, 0)  # local midnight of that zone
    same = tf.query(app, 'from Prices within 0L, 9000000000000L per "days in Europe/Berlin" select symbol, total',
                    data_dir=data)
    pd.testing.assert_frame_equal(same, tf.query(app, 'from Prices within 0L, 9000000000000L per "days" '
                                                      "select symbol, total", data_dir=data))


def test_another_zone_needs_a_level_that_meets_its_boundaries(stored) -> None:
    app, data, _ = stored
    with pytest.raises(QueryError, match=r"inside a bucket of hours \(the finest level Hourly keeps\)"):
        tf.query(app, 'from Hourly within "2024-03-01", "2024-03-05" per "days in Asia/Kolkata" select symbol, total',
                 data_dir=data)
    with pytest.raises(DefinitionError, match="unknown time zone 'Asia/Kolkota'"):
        tf.query(app, 'from Hourly within "2024-03-01", "2024-03-05" per "days in Asia/Kolkota"', data_dir=data)
