"""``within`` as users write it, through a real run: a pattern or date without an offset is the period of
the aggregation's zone, and ``last N hours`` / ``now - N days`` / ``today`` follow the clock.  Totals are
compared with pandas over the raw events."""

from __future__ import annotations

import time
from pathlib import Path

import pandas as pd
import pytest

import tiltframe as tf
from tiltframe.errors import DefinitionError

APP = """
@timezone('Europe/Berlin')
define aggregation Sales
from Orders
select region, sum(amount) as total, count() as n
group by region
aggregate by ts every hour ... month;
"""
STREAM = "define stream Orders (region string, amount long, ts long);\n"


@pytest.fixture(scope="module")
def stored(spark, tmp_path_factory: pytest.TempPathFactory) -> tuple[tf.AppSpec, Path, pd.DataFrame, int]:
    """Orders around Berlin's month boundaries and around now; the store and the events."""
    now = time.time_ns() // 1_000_000
    hour = int(pd.Timestamp(now, unit="ms", tz="Europe/Berlin").floor("h").value // 1_000_000)
    berlin = [  # the second is March in Berlin, February in GMT; the fourth April in Berlin, March in GMT
        "2024-02-29T23:30:00+01:00", "2024-03-01T00:30:00+01:00", "2024-03-31T23:59:00+02:00",
        "2024-04-01T00:10:00+02:00", "2024-03-15T12:00:00+01:00",
    ]
    times = [int(pd.Timestamp(t).value // 1_000_000) for t in berlin]
    # Placed from the running hour's start, so that a query a few seconds later sees the same buckets.
    recent = [hour, hour - 4 * 3_600_000 + 1_800_000, hour - 30 * 3_600_000, hour - 9 * 86_400_000]
    events = pd.DataFrame({"region": ["eu", "eu", "us", "eu", "us", "eu", "us", "eu", "us"],
                           "amount": [1, 2, 4, 8, 16, 32, 64, 128, 256], "ts": times + recent})
    inbox = tmp_path_factory.mktemp("orders")
    events.to_csv(inbox / "orders.csv", index=False)
    app = tf.load_app(STREAM + APP)
    data = inbox.parent / "data"
    tf.run(app, {"Orders": inbox}, data_dir=data, spark=spark)
    return app, data, events, now


def totals(app: tf.AppSpec, data: Path, within: str, per: str) -> dict[str, int]:
    answer = tf.query(app, f"from Sales within {within} per '{per}' select region, sum(total) as t group by region",
                      data_dir=data)
    return dict(zip(answer["region"], answer["t"], strict=True))


def expected(events: pd.DataFrame, start: pd.Timestamp, end: pd.Timestamp) -> dict[str, int]:
    lo, hi = start.value // 1_000_000, end.value // 1_000_000
    inside = events[(events["ts"] >= lo) & (events["ts"] < hi)]
    return inside.groupby("region")["amount"].sum().to_dict()


def test_a_pattern_without_an_offset_is_the_month_of_the_zone(stored) -> None:
    app, data, events, _ = stored
    march = (pd.Timestamp("2024-03-01", tz="Europe/Berlin"), pd.Timestamp("2024-04-01", tz="Europe/Berlin"))
    want = expected(events, *march)
    assert want == {"eu": 2, "us": 4 + 16}
    assert totals(app, data, '"2024-03-** **:**:**"', "months") == want
    assert totals(app, data, '"2024-03-** **:**:**"', "days") == want
    assert totals(app, data, '"2024-03-01", "2024-04-01"', "hours") == want
    assert totals(app, data, '"2024-03-01/P1M"', "days") == want
    # Written with an offset, the pattern is that offset's month (hours of Berlin and GMT start together).
    gmt = expected(events, pd.Timestamp("2024-03-01", tz="UTC"), pd.Timestamp("2024-04-01", tz="UTC"))
    assert gmt == {"eu": 8, "us": 4 + 16}
    assert totals(app, data, '"2024-03-** **:**:** +00:00"', "hours") == gmt


def test_relative_ranges_follow_the_clock(stored) -> None:
    app, data, events, _ = stored
    # Buckets whose start lies in the range: the running hour is in, the partial first one is not.
    assert totals(app, data, '"last 6 hours"', "hours") == {"eu": 32, "us": 64}
    assert totals(app, data, '"now - 6 hours", "now"', "hours") == {"eu": 32, "us": 64}
    assert totals(app, data, '"now - 7 days", "now"', "hours") == {"eu": 32 + 128, "us": 64}
    now = pd.Timestamp(time.time_ns(), tz="UTC").tz_convert("Europe/Berlin")
    day = now.normalize()
    assert totals(app, data, '"today"', "hours") == expected(events, day, day + pd.DateOffset(days=1))
    assert totals(app, data, '"yesterday", "today"', "hours") == expected(events, day - pd.DateOffset(days=1), day)


def test_a_range_that_names_nothing_is_refused_with_the_forms(stored) -> None:
    app, data, _, _ = stored
    with pytest.raises(DefinitionError, match=r"must name a period.*last N <units>.* at line 1, column 19"):
        tf.query(app, "from Sales within 'now' per 'hours'", data_dir=data)
