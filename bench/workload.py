"""The benchmarks' trade-event workloads, written by the project itself (no file outside the repository).

A workload is a deterministic stream of trades (``symbol`` string, ``price`` double, ``quantity`` long,
``timestamp`` long epoch ms) written as numbered Parquet files (``parquet/part-00000.parquet``, ...) in
arrival order, with ``meta.json`` beside them.  Its distributions and parameters are those of the reference
workloads the figures in docs/performance.md are quoted against, so figures stay comparable:

- ``keys`` distinct ticker-like symbols of 3 to 5 capital letters, each with a base price uniform in
  [5, 500); every event's price is its symbol's base price times (1 + 1% of a standard normal), to 4 places;
- event times uniform over ``span_seconds`` from ``start_ms`` (2023-12-31T23:00Z by default, so that a
  two-hour span crosses an hour, a day, a month and a year), in order; keys uniform, or Zipf-skewed with
  ``zipf_s`` > 0; quantities uniform in 1..1000;
- ``disorder_pct`` percent of the events arrive 1..``max_lateness_ms`` ms late: the files hold the events
  by arrival time (ties in event order), so a late event lands behind events of later times;
- files of ``events_per_file`` events whose modification times increase one second apart, so that Spark's
  file source, which orders new files by modification time, reads them in arrival order.

The same parameters and seed always give the same events.

    python bench/workload.py W1 --events 1000000 --out /tmp/w1
    python bench/workload.py --events 100000 --keys 10 --span-seconds 60 --out /tmp/small
"""

from __future__ import annotations

import argparse
import json
import os
import string
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

#: 2023-12-31T23:00:00Z.
DEFAULT_START_MS = 1_704_063_600_000
SCHEMA = pa.schema([("symbol", pa.string()), ("price", pa.float64()), ("quantity", pa.int64()),
                    ("timestamp", pa.int64())])


@dataclass(frozen=True)
class Workload:
    """The parameters of one workload."""

    events: int
    keys: int
    span_seconds: int
    disorder_pct: float = 0.0
    max_lateness_ms: int = 0
    seed: int = 42
    start_ms: int = DEFAULT_START_MS
    zipf_s: float = 0.0
    events_per_file: int = 100_000


#: The reference workloads at their full size (``--events`` scales them down).
STANDARD = {
    # High cardinality at the finest level (about 5.4M second buckets for 10M events), disorder, and every
    # calendar boundary crossed.
    "W1": Workload(10_000_000, 1000, 7200, disorder_pct=1.0, max_lateness_ms=2000),
    # EventQL's ad-network shape: 100k events a second over 4000 keys, a strong reduction.
    "W2": Workload(10_000_000, 4000, 100),
}


def symbols(count: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` distinct names of 3 to 5 capital letters, drawn from ``rng``."""
    letters = np.array(list(string.ascii_uppercase))
    names: dict[str, None] = {}
    while len(names) < count:
        length = int(rng.integers(3, 6))
        names.setdefault("".join(rng.choice(letters, length)))
    return np.array(list(names), dtype=object)


def events(w: Workload) -> tuple[pa.Table, dict[str, Any]]:
    """All of ``w``'s events in arrival order, and what the generator knows of their disorder."""
    rng = np.random.default_rng(w.seed)
    names = symbols(w.keys, rng)
    base = rng.uniform(5.0, 500.0, w.keys)
    ts = np.sort(rng.integers(0, w.span_seconds * 1000, w.events, dtype=np.int64)) + w.start_ms
    if w.zipf_s > 0:
        weights = 1.0 / np.arange(1, w.keys + 1) ** w.zipf_s
        key = rng.choice(w.keys, w.events, p=weights / weights.sum())
    else:
        key = rng.integers(0, w.keys, w.events)
    price = np.round(base[key] * (1.0 + 0.01 * rng.standard_normal(w.events)), 4)
    quantity = rng.integers(1, 1001, w.events, dtype=np.int64)
    delayed = 0
    if w.disorder_pct > 0 and w.max_lateness_ms > 0:
        late = rng.random(w.events) < w.disorder_pct / 100.0
        delayed = int(late.sum())
        arrival = ts.copy()
        arrival[late] += rng.integers(1, w.max_lateness_ms + 1, delayed, dtype=np.int64)
        order = np.argsort(arrival, kind="stable")
        ts, key, price, quantity = ts[order], key[order], price[order], quantity[order]
    behind = np.maximum.accumulate(ts) - ts if w.events else np.zeros(0, dtype=np.int64)
    table = pa.Table.from_arrays([pa.array(names[key], pa.string()), pa.array(price, pa.float64()),
                                  pa.array(quantity, pa.int64()), pa.array(ts, pa.int64())], schema=SCHEMA)
    facts = {"delayed_events": delayed, "out_of_order_events": int((behind > 0).sum()),
             "max_behind_ms": int(behind.max()) if w.events else 0,
             "min_ts": int(ts.min()) if w.events else None, "max_ts": int(ts.max()) if w.events else None}
    return table, facts


def write(w: Workload, out: Path) -> dict[str, Any]:
    """Write ``w`` into ``out`` (``parquet/`` and ``meta.json``); its meta."""
    table, facts = events(w)
    folder = out / "parquet"
    folder.mkdir(parents=True, exist_ok=True)
    files = -(-w.events // w.events_per_file)
    first_mtime = time.time() - files - 10
    for i in range(files):
        path = folder / f"part-{i:05d}.parquet"
        part = table.slice(i * w.events_per_file, w.events_per_file)
        pq.write_table(part, path, compression="snappy", row_group_size=w.events_per_file)
        os.utime(path, (first_mtime + i, first_mtime + i))
    meta = {**asdict(w), "files": files, **facts}
    (out / "meta.json").write_text(json.dumps(meta, indent=2))
    return meta


def parse(argv: list[str]) -> tuple[Workload, Path]:
    """The workload and output folder of command-line arguments (a standard workload's name and changes to
    it, or every parameter)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("workload", nargs="?", choices=sorted(STANDARD), help="a reference workload")
    parser.add_argument("--events", type=int)
    parser.add_argument("--keys", type=int)
    parser.add_argument("--span-seconds", type=int)
    parser.add_argument("--disorder-pct", type=float)
    parser.add_argument("--max-lateness-ms", type=int)
    parser.add_argument("--seed", type=int)
    parser.add_argument("--start-ms", type=int)
    parser.add_argument("--zipf-s", type=float, help="key skew; 0 = uniform keys")
    parser.add_argument("--events-per-file", type=int)
    parser.add_argument("--out", type=Path, required=True, help="output folder (parquet/, meta.json)")
    args = parser.parse_args(argv)
    given = {k: v for k, v in vars(args).items() if v is not None and k not in ("workload", "out")}
    if args.workload is not None:
        w = Workload(**{**asdict(STANDARD[args.workload]), **given})
    elif {"events", "keys", "span_seconds"} <= given.keys():
        w = Workload(**given)
    else:
        parser.error("name a workload (W1, W2) or give --events, --keys and --span-seconds")
    if w.events <= 0 or w.keys <= 0 or w.span_seconds <= 0:
        parser.error("--events, --keys and --span-seconds must be positive")
    return w, args.out


def main(argv: list[str] | None = None) -> None:
    w, out = parse(sys.argv[1:] if argv is None else argv)
    started = time.perf_counter()
    meta = write(w, out)
    json.dump({**meta, "seconds": round(time.perf_counter() - started, 2)}, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
