"""A small rollup and its oracle, shared by the tests of a rollup's later life (rebuilt and swapped in,
migrated under a running pipeline): the app, trades to feed it, and every level checked against pandas."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import tiltframe as tf

APP = """
define stream Trades (symbol string, venue string, price double, volume long, ts long);
define aggregation TA
from Trades
select symbol, sum(price) as total, count() as n
group by symbol
aggregate by ts every sec ... day;
"""
ZONE = "Asia/Kolkata"  # +05:30: its hours and days start half way through GMT's
ZONED = APP.replace("define aggregation", f"@timezone('{ZONE}')\ndefine aggregation")
HOUR = 3_600_000
T0 = 472_222 * HOUR  # 2023-11-14 22:00 GMT
LEVELS = {"seconds": "s", "minutes": "min", "hours": "h", "days": "D"}
#: The measures of APP: output -> (event column, pandas aggregate).
MEASURES = {"total": ("price", "sum"), "n": ("price", "count")}


def trades(seed: int, start: int, n: int) -> pd.DataFrame:
    """``n`` trades in the six hours from ``start``, in no order."""
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "symbol": rng.choice(["IBM", "WSO2"], n), "venue": rng.choice(["X", "Y"], n),
        "price": np.round(rng.uniform(1, 100, n), 2), "volume": rng.integers(1, 1_000, n),
        "ts": start + rng.integers(0, 6 * HOUR, n),
    })


def deliver(events: pd.DataFrame, inbox: Path, name: str) -> None:
    """A whole file at once, as a following pipeline must be given them."""
    events.to_csv(inbox / f".{name}", index=False)
    (inbox / f".{name}").rename(inbox / name)


def check(app: tf.AppSpec, data: Path, events: pd.DataFrame, *, zone: str = "UTC",
          keys: tuple[str, ...] = ("symbol",), measures: dict[str, tuple[str, str]] | None = None) -> None:
    """Every level of TA in ``app``'s store equals pandas over ``events`` in ``zone``."""
    measures = measures or MEASURES
    local = pd.to_datetime(events["ts"], unit="ms", utc=True).dt.tz_convert(zone)
    for per, freq in LEVELS.items():
        start = (local.dt.floor(freq) if freq != "D" else local.dt.normalize()).astype("int64") // 1_000_000
        want = events.assign(b=start).groupby(["b", *keys]).agg(**measures).reset_index()
        got = tf.query(app, f"from TA within 0L, 9000000000000L per '{per}' select AGG_TIMESTAMP, "
                       f"{', '.join([*keys, *measures])}", data_dir=data)
        got = got.rename(columns={"AGG_TIMESTAMP": "b"}).sort_values(["b", *keys]).reset_index(drop=True)
        pd.testing.assert_frame_equal(got, want, check_dtype=False, obj=per)


def wait(condition: Callable[[], bool], what: str, seconds: float = 180) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"waited {seconds} s for {what}")
        time.sleep(0.3)
