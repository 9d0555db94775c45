"""Late-event benchmark: what each out-of-order policy costs, as a ratio to in-order input.

W1 (1,000 keys over 2 hours) is generated twice from the same seed: in order, and with 1% of the events
delayed by up to 2 s.  The in-order files run through the default (exact) pipeline as the baseline; the
disordered ones then run through every policy:

- exact (default): every event into its own bucket, however late;
- ``@allowedLateness('1 sec')``: events more than 1 s behind the latest are rejected;
- ``@BufferSize('1')``: the buffer of seed 000, older events moved into the oldest open second;
- ``@BufferSize('1') @IgnoreEventsOlderThanBuffer('true')``: the same, older events dropped.

Each run's totals are checked first (events read = events in the input = aggregated + moved + rejected;
stored counts = aggregated + moved), then events/s and the ratio to the baseline are printed.

    python bench/bench_lateness.py                       # 10M events
    python bench/bench_lateness.py --events 1000000
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from bench_core import APP, ROOT, WORKLOADS, generate, input_totals, pipeline

W1_IN_ORDER = ["--keys", "1000", "--span-seconds", "7200"]  # W1 without its delayed events
MODES = {
    "exact": "",
    "allowedLateness 1 sec": "@allowedLateness('1 sec')",
    "BufferSize 1, move": "@BufferSize('1')",
    "BufferSize 1, drop": "@BufferSize('1')\n@IgnoreEventsOlderThanBuffer('true')",
}


def app_with(annotation: str) -> str:
    return APP.replace("define aggregation", f"{annotation}\ndefine aggregation")


def checked(spark, name: str, folder, data_dir, files_per_batch: int, app_text: str) -> dict:
    parquet = folder / "parquet"
    n, quantity = input_totals(parquet)
    assert n == json.loads((folder / "meta.json").read_text())["events"]
    p = pipeline(spark, parquet, data_dir, files_per_batch, app_text)
    # A fast wrong run is no figure: every event is accounted for, and the store holds what was kept.
    assert p["events_read"] == n, (name, p["events_read"], n)
    assert p["events_aggregated"] + p["events_moved"] + p["events_rejected"] == n, (name, p)
    assert p["stored_count"] == p["events_aggregated"] + p["events_moved"], (name, p)
    if not p["events_rejected"]:
        assert p["stored_total"] == quantity, (name, p["stored_total"], quantity)
    return p


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=10_000_000)
    parser.add_argument("--files-per-batch", type=int, default=20)
    parser.add_argument("--cache", type=Path, default=ROOT / ".bench-data")
    args = parser.parse_args()

    from tiltframe.engine.spark.session import get_session

    spark = get_session("local[*]")
    in_order = generate("W1-in-order", args.events, args.cache, W1_IN_ORDER)
    disordered = generate("W1", args.events, args.cache)
    run_dir = args.cache / "lateness-run"
    checked(spark, "warm-up", in_order, run_dir, args.files_per_batch, APP)  # JIT, caches, Python workers
    base = checked(spark, "baseline", in_order, run_dir, args.files_per_batch, APP)
    n = base["events_read"]
    print(f"\nW1 with {n:,} events ({' '.join(WORKLOADS['W1'])}), {args.files_per_batch} files per micro-batch; "
          f"totals checked for every run")
    print(f"  {'input / policy':42} {'seconds':>8} {'events/s':>12} {'ratio':>6} {'moved':>9} {'rejected':>9}")

    def show(label: str, p: dict) -> None:
        ratio = base["seconds"] / p["seconds"]
        print(f"  {label:42} {p['seconds']:8.1f} {n / p['seconds']:12,.0f} {ratio:6.2f} "
              f"{p['events_moved']:9,} {p['events_rejected']:9,}")

    show("in order, exact (baseline)", base)
    for mode, annotation in MODES.items():
        show(f"1% late up to 2 s, {mode}", checked(spark, mode, disordered, run_dir, args.files_per_batch,
                                                    app_with(annotation)))


if __name__ == "__main__":
    main()
