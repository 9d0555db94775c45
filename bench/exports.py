"""A real export's shape, written by the project itself: flight records as people export them.

Real data reaches tiltframe as exports, not as the clean Parquet of ``bench/workload.py``: pandas'
``to_csv(index=False)`` into monthly files, the event time an ISO-8601 text (``2013-01-01T10:00:00Z``),
about twenty attributes of mixed types, and real nulls (a cancelled flight has no delays, no air time).
This module writes that shape deterministically, in three forms of the same rows:

- ``csv-iso/``: CSV files, the event time ``time_hour`` as ISO-8601 text in GMT with a ``Z``;
- ``csv-ms/``: the same CSV files with ``time_hour`` as epoch milliseconds (a long);
- ``parquet/``: the same rows as Parquet, ``time_hour`` a timestamp column.

Each form holds ``files`` files (one per month of 2013 by default) of about ``rows / files`` rows in time
order, with ``meta.json`` beside them: the row count and the exact totals an aggregation must reproduce
(rows, non-null delays and their sum, cancelled flights), which the benchmark checks before it prints a
figure.  The distributions:

- carriers: 16 two-letter codes, Zipf-skewed; origins: 3 airports (as New York's); destinations: 100 codes;
  tail numbers: 4,000; flight numbers 1..6000;
- scheduled departures uniform over the year, each flight's hour ``time_hour`` its scheduled hour;
- ``cancel_pct`` percent of the flights cancelled: their delays, times and air time are null (about the
  2-3% of nulls a real export has); a further 0.5% miss only ``arr_delay`` (diverted);
- delays in minutes (a long tail: a normal around -2 plus an exponential), distances in miles, air time
  from the distance.

    python bench/exports.py --rows 336776 --out /tmp/flights
"""

from __future__ import annotations

import argparse
import json
import os
import string
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

#: 2013-01-01T00:00:00Z and a year later.
START_MS = 1_356_998_400_000
END_MS = 1_388_534_400_000
FORMS = ("csv-iso", "csv-ms", "parquet")

#: The stream every form feeds (the event time a string in ``csv-iso``; a long or a timestamp elsewhere).
STREAM = """define stream Flights (
    year int, month int, day int, dep_time double, sched_dep_time int, dep_delay double, arr_time double,
    sched_arr_time int, arr_delay double, carrier string, flight int, tailnum string, origin string,
    dest string, air_time double, distance long, hour int, minute int, cancelled bool, time_hour {time_type});
"""

#: Two aggregations as a user of such data writes them: hourly to yearly in New York's zone, with averages,
#: extremes, sums, a distinct count and quantile sketches over attributes that have nulls.
AGGREGATIONS = """
@timezone('America/New_York')
define aggregation DelaysByCarrier from Flights
select carrier, count() as flights, avg(dep_delay) as avg_dep, min(dep_delay) as min_dep,
       max(dep_delay) as max_dep, sum(dep_delay) as total_dep, avg(arr_delay) as avg_arr,
       distinctCount(tailnum) as planes, kll(arr_delay, [0.5, 0.9]) as arr_q
group by carrier
aggregate by time_hour every hour ... year;

@timezone('America/New_York')
define aggregation TrafficByOrigin from Flights
select origin, count() as flights, sum(distance) as miles, avg(air_time) as avg_air,
       max(arr_delay) as worst_arr, distinctCount(dest) as destinations, kll(dep_delay, [0.5, 0.99]) as dep_q
group by origin
aggregate by time_hour every hour ... year;
"""


def app_text(form: str) -> str:
    """The app for one form: the event time typed as that form carries it."""
    return STREAM.format(time_type="long" if form == "csv-ms" else "string") + AGGREGATIONS


def codes(count: int, length: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` distinct upper-case codes of ``length`` letters or digits."""
    alphabet = np.array(list(string.ascii_uppercase + string.digits))
    found: dict[str, None] = {}
    while len(found) < count:
        found.setdefault("".join(rng.choice(alphabet, length)))
    return np.array(list(found), dtype=object)


def flights(rows: int, seed: int, cancel_pct: float) -> pd.DataFrame:
    """``rows`` flights of 2013 in time order, with nulls where a real export has them."""
    rng = np.random.default_rng(seed)
    carriers = codes(16, 2, rng)
    weights = 1.0 / np.arange(1, 17) ** 0.8
    sched = np.sort(rng.integers(START_MS, END_MS, rows, dtype=np.int64))
    hour_ms = sched - sched % 3_600_000
    local = pd.to_datetime(sched, unit="ms", utc=True).tz_convert("America/New_York")
    dep_delay = np.round(rng.normal(-2, 6, rows) + rng.exponential(10, rows) * (rng.random(rows) < 0.3), 0)
    distance = rng.integers(80, 4983, rows, dtype=np.int64)
    air = np.round(distance / 7.5 + rng.normal(0, 8, rows), 0)
    arr_delay = np.round(dep_delay + rng.normal(-5, 10, rows), 0)
    cancelled = rng.random(rows) < cancel_pct / 100.0
    diverted = ~cancelled & (rng.random(rows) < 0.005)
    sched_minutes = local.hour * 60 + local.minute
    frame = pd.DataFrame({
        "year": local.year, "month": local.month, "day": local.day,
        "dep_time": (sched_minutes + dep_delay) % 1440, "sched_dep_time": local.hour * 100 + local.minute,
        "dep_delay": dep_delay, "arr_time": (sched_minutes + dep_delay + air + 30) % 1440,
        "sched_arr_time": ((sched_minutes + air + 30) % 1440 // 60 * 100 + (sched_minutes + air) % 60).astype(int),
        "arr_delay": arr_delay, "carrier": carriers[rng.choice(16, rows, p=weights / weights.sum())],
        "flight": rng.integers(1, 6001, rows), "tailnum": codes(4000, 5, rng)[rng.integers(0, 4000, rows)],
        "origin": np.array(["EWR", "JFK", "LGA"], dtype=object)[rng.integers(0, 3, rows)],
        "dest": codes(100, 3, rng)[rng.integers(0, 100, rows)], "air_time": air, "distance": distance,
        "hour": local.hour, "minute": local.minute, "cancelled": cancelled, "time_hour": hour_ms,
    })
    for col in ("dep_time", "dep_delay", "arr_time", "arr_delay", "air_time"):
        frame.loc[cancelled, col] = np.nan
    frame.loc[diverted, "arr_delay"] = np.nan
    frame.loc[diverted, "air_time"] = np.nan
    return frame


def totals(frame: pd.DataFrame) -> dict[str, Any]:
    """What every run over the rows must reproduce."""
    return {"rows": len(frame), "dep_delay_values": int(frame["dep_delay"].notna().sum()),
            "dep_delay_sum": float(frame["dep_delay"].sum()), "distance_sum": int(frame["distance"].sum()),
            "cancelled": int(frame["cancelled"].sum()),
            "null_cells": int(frame.isna().sum().sum())}


def iso(ms: pd.Series) -> pd.Series:
    """Epoch ms as the ISO-8601 text pandas writes for a GMT timestamp with ``date_format``."""
    return pd.to_datetime(ms, unit="ms", utc=True).dt.strftime("%Y-%m-%dT%H:%M:%SZ")


def write(rows: int, out: Path, *, files: int = 12, seed: int = 2013, cancel_pct: float = 2.5,
          forms: tuple[str, ...] = FORMS) -> dict[str, Any]:
    """Write the forms under ``out``; the meta (also in ``out/meta.json``)."""
    frame = flights(rows, seed, cancel_pct)
    parts = np.array_split(np.arange(rows), files)
    first_mtime = time.time() - files - 10
    for form in forms:
        folder = out / form
        folder.mkdir(parents=True, exist_ok=True)
        for i, index in enumerate(parts):
            part = frame.iloc[index[0]:index[-1] + 1] if len(index) else frame.iloc[0:0]
            if form == "parquet":
                path = folder / f"flights-{i + 1:02d}.parquet"
                part.assign(time_hour=pd.to_datetime(part["time_hour"], unit="ms", utc=True)).to_parquet(
                    path, index=False)
            else:
                path = folder / f"flights-{i + 1:02d}.csv"
                shown = part.assign(time_hour=iso(part["time_hour"])) if form == "csv-iso" else part
                shown.to_csv(path, index=False)
            os.utime(path, (first_mtime + i, first_mtime + i))
        (out / f"{form}.siddhi").write_text(app_text(form))
    meta = {"rows": rows, "files": files, "seed": seed, "cancel_pct": cancel_pct, **totals(frame)}
    (out / "meta.json").write_text(json.dumps(meta, indent=2))
    return meta


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=336_776, help="flights in all (a year of New York's)")
    parser.add_argument("--files", type=int, default=12)
    parser.add_argument("--seed", type=int, default=2013)
    parser.add_argument("--cancel-pct", type=float, default=2.5)
    parser.add_argument("--form", choices=FORMS, nargs="+", default=list(FORMS))
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if args.rows <= 0 or args.files <= 0:
        parser.error("--rows and --files must be positive")
    started = time.perf_counter()
    meta = write(args.rows, args.out, files=args.files, seed=args.seed, cancel_pct=args.cancel_pct,
                 forms=tuple(args.form))
    json.dump({**meta, "seconds": round(time.perf_counter() - started, 2)}, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
