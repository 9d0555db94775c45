"""Driver memory over a long stream: does the driver keep anything per micro-batch that it never lets go?

It writes a stream of W2's shape ten times as long as the reference (100M events by default: ten W2 runs
of 10M events, each 100 s of event time after the one before, 4000 keys, 1000 files of 100k events), and
runs tiltframe's pipeline over it in micro-batches of ``--files-per-batch`` files into the embedded SQLite
store.  After every micro-batch it samples, on the driver:

- the Python process's resident memory (``/proc/self/status``, VmRSS);
- the driver JVM's resident memory (``/proc/<pid>/status`` of Spark's gateway JVM);
- the JVM's heap in use after a full garbage collection (Python's ``gc.collect()``, whose proxies may hold
  JVM objects, then ``System.gc()``; then total - free), every ``--gc-every`` batches (a collection at every
  batch would weigh on the run), and at each of the five batches around the first tenth and the last five.

Then it compares the samples taken once a tenth of the stream is in (the 10M events of the reference
stream) with those at the end: the growth over the other nine tenths, which should be flat (<= 10%). Each
end is the median of five batches' samples (the tenth's batch and two either side; the last five): what a
heap holds after a full collection moves by a megabyte or two from one batch to the next (the batch just
done, Spark's pools, its bounded caches), which one sample against one sample would read as growth.
Before any figure it checks the totals: events read = aggregated = written; the stored yearly sum of
quantity = the input's.

    python bench/bench_memory.py                         # 100M events (about 1.5 GB of Parquet; minutes)
    python bench/bench_memory.py --events 20000000       # a quicker look
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import bench_core  # noqa: E402  (bench/ on the path above)
import workload  # noqa: E402

#: Each end of the comparison is the median of the samples of ``2 * SPAN + 1`` batches.
SPAN = 2
#: Each chunk is one W2 run of 10M events (100 s of event time); the stream is ``events / 10M`` of them.
CHUNK = workload.STANDARD["W2"]


def write_stream(events: int, out: Path) -> dict[str, Any]:
    """Chunks of W2's shape, one after another in event time, as numbered files with increasing
    modification times (Spark's file source reads them in that order); cached in ``out``."""
    meta_path = out / "meta.json"
    if meta_path.exists():
        return json.loads(meta_path.read_text())
    shutil.rmtree(out, ignore_errors=True)
    folder = out / "parquet"
    folder.mkdir(parents=True)
    chunks = max(1, events // CHUNK.events)
    files = 0
    quantity = 0
    first_mtime = time.time() - chunks * (CHUNK.events // CHUNK.events_per_file) - 10
    for c in range(chunks):
        w = replace(CHUNK, seed=CHUNK.seed + c, start_ms=CHUNK.start_ms + c * CHUNK.span_seconds * 1000)
        table, _ = workload.events(w)
        quantity += int(pc.sum(table["quantity"]).as_py())
        for i in range(0, table.num_rows, w.events_per_file):
            path = folder / f"part-{files:05d}.parquet"
            pq.write_table(table.slice(i, w.events_per_file), path, compression="snappy",
                           row_group_size=w.events_per_file)
            os.utime(path, (first_mtime + files, first_mtime + files))
            files += 1
        print(f"  wrote chunk {c + 1}/{chunks} ({files} files)", flush=True)
    meta = {"events": chunks * CHUNK.events, "files": files, "quantity": quantity, "chunk": CHUNK.events}
    meta_path.write_text(json.dumps(meta))
    return meta


def resident_mb(pid: int | str = "self") -> float:
    """VmRSS of a process in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=100_000_000, help="a multiple of 10M (W2's size)")
    parser.add_argument("--files-per-batch", type=int, default=20)
    parser.add_argument("--gc-every", type=int, default=5, help="a heap sample after a full GC every N batches")
    parser.add_argument("--cache", type=Path, default=ROOT / ".bench-data")
    parser.add_argument("--json", action="store_true", help="also print the growths as one JSON line")
    args = parser.parse_args()

    from tiltframe.engine.spark.session import get_session

    print(f"writing the stream ({args.events:,} events) into {args.cache}", flush=True)
    meta = write_stream(args.events, args.cache / f"memory-{args.events}")
    spark = get_session("local[*]")
    jvm = spark.sparkContext._jvm  # type: ignore[attr-defined]
    gateway = spark.sparkContext._gateway  # type: ignore[attr-defined]
    jvm_pid = gateway.proc.pid if getattr(gateway, "proc", None) is not None else None
    total_batches = -(-meta["files"] // args.files_per_batch)
    batches_in_tenth = max(SPAN + 1, total_batches // 10)
    samples: list[dict[str, Any]] = []
    read = 0

    def sample(report: Any) -> None:
        nonlocal read
        read += report.stats.events_read
        n = len(samples) + 1
        row: dict[str, Any] = {"batch": n, "events": read, "python_mb": resident_mb(),
                               "jvm_mb": resident_mb(jvm_pid) if jvm_pid else float("nan")}
        if n % args.gc_every == 0 or abs(n - batches_in_tenth) <= SPAN or n > total_batches - 2 * SPAN - 1:
            # Python's garbage first: Py4J's proxies are in reference cycles, and the JVM objects they hold
            # (finished batches' plans) wait for Python's cyclic collector, which the pipeline runs at most
            # every 10 s (tiltframe/engine/spark/py4j_cycles.py). What is left is what the driver keeps.
            gc.collect()
            jvm.java.lang.System.gc()
            runtime = jvm.java.lang.Runtime.getRuntime()
            row["heap_mb"] = (runtime.totalMemory() - runtime.freeMemory()) / 2**20
        samples.append(row)

    data_dir = args.cache / f"memory-{args.events}-run"
    run = bench_core.pipeline(spark, args.cache / f"memory-{args.events}" / "parquet", data_dir,
                              args.files_per_batch, on_batch=sample)
    shutil.rmtree(data_dir, ignore_errors=True)
    seconds = run["seconds"]
    # A wrong run is no figure.
    assert run["events_read"] == run["events_aggregated"] == meta["events"], (run["events_read"], meta["events"])
    assert run["stored_total"] == meta["quantity"], (run["stored_total"], meta["quantity"])

    first, last = batches_in_tenth, len(samples)

    def around(batches: range, key: str) -> float:
        """The median of ``key``'s samples at ``batches``."""
        return statistics.median(s[key] for s in samples[batches.start - 1:batches.stop - 1] if key in s)

    near_tenth, at_end = range(first - SPAN, first + SPAN + 1), range(last - 2 * SPAN, last + 1)
    print(f"\n{meta['events']:,} events in {meta['files']} files, {len(samples)} micro-batches of "
          f"{args.files_per_batch} files, {seconds:.1f} s ({meta['events'] / seconds:,.0f} events/s); totals "
          f"checked: events read = aggregated = input, stored sum(quantity) = input's; machine: "
          f"{os.cpu_count()} cores")
    print(f"  driver memory around the first tenth (median of batches {near_tenth.start}-{near_tenth.stop - 1}; "
          f"batch {first} is {samples[first - 1]['events']:,} events) and at the end (batches "
          f"{at_end.start}-{at_end.stop - 1}):")
    growth = {}
    for key, label in (("python_mb", "Python process, resident"), ("jvm_mb", "driver JVM, resident"),
                       ("heap_mb", "driver JVM heap in use after a full GC")):
        a, b = around(near_tenth, key), around(at_end, key)
        growth[key] = 100 * (b - a) / a
        print(f"    {label:<40} {a:9.1f} MB -> {b:9.1f} MB  growth {growth[key]:+6.1f}%")
    print("  heap after a full GC (MB) by batch: " + ", ".join(
        f"{s['batch']}: {s['heap_mb']:.1f}" for s in samples if "heap_mb" in s))
    print("  samples (every twentieth): " + json.dumps(samples[:: max(1, len(samples) // 20)]))
    if args.json:
        print(json.dumps({"events": meta["events"], "batches": len(samples), "growth_pct": growth}))


if __name__ == "__main__":
    main()
