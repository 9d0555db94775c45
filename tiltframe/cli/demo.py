"""The demo: generate about three months of trades, roll them up every sec ... year, query the rollups.

The data is synthetic but shaped like the real thing so the rollups have something to show: symbols
with geometric-Brownian-motion prices, log-normal trade sizes, busier market hours than nights and
weekends, events that cross month and year boundaries, about 1% of events arriving a few seconds late,
and a handful of deliberately malformed events that end up in the rejected-events table.

Generation is deterministic (fixed seed), so a second ``tiltframe demo`` on the same data directory
reuses the files, and Spark's checkpoint skips the files it already processed: the second run reads no
new events and answers the same queries from the store.
"""

from __future__ import annotations

import json
import os
import shlex
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from importlib.resources import files as package_files
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from tiltframe.errors import UsageError

if TYPE_CHECKING:
    from rich.console import Console

START = datetime(2023, 11, 15, tzinfo=UTC)
SEED = 20231115
DAY_MS = 86_400_000
HOUR_MS = 3_600_000
MS_PER_YEAR = 365.25 * DAY_MS

#: Symbols in order of popularity, with a start price and an annual volatility.
SYMBOLS: tuple[tuple[str, float, float], ...] = (
    ("WSO2", 54.20, 0.35),
    ("IBM", 151.80, 0.22),
    ("ACME", 88.10, 0.40),
    ("ORCL", 104.50, 0.28),
    ("GLOBX", 23.75, 0.55),
    ("NOVA", 312.40, 0.45),
    ("QNTM", 7.82, 0.80),
    ("HELIO", 61.35, 0.38),
    ("ARGO", 45.10, 0.30),
    ("BRKT", 129.90, 0.25),
    ("CEDR", 18.44, 0.50),
    ("DYNA", 77.70, 0.33),
    ("ELMT", 240.15, 0.27),
    ("FJRD", 12.05, 0.65),
    ("GRNT", 98.60, 0.20),
    ("HRBR", 36.90, 0.42),
    ("IONX", 5.61, 0.90),
    ("JADE", 142.30, 0.31),
    ("KRNL", 67.25, 0.36),
    ("LMNS", 410.00, 0.29),
    ("MRDN", 28.80, 0.47),
    ("NRTH", 83.45, 0.24),
    ("OPAL", 52.10, 0.39),
    ("PRSM", 175.60, 0.34),
    ("QRTZ", 9.95, 0.70),
    ("RVRS", 64.40, 0.41),
    ("SLTE", 118.20, 0.26),
    ("TNDR", 31.15, 0.58),
    ("UMBR", 205.75, 0.32),
    ("VRTX", 46.30, 0.44),
)


@dataclass(frozen=True)
class DemoData:
    """What was generated, kept as ``manifest.json`` next to the input so a second run can reuse it."""

    events: int
    days: int
    files: int
    seed: int
    start: str
    end: str
    symbols: int
    late_events: int
    malformed_events: int
    valid_events: int
    seconds: float


def example_app() -> Path:
    """The packaged demo app, ``tiltframe/examples/trades.siddhi``."""
    return Path(str(package_files("tiltframe") / "examples" / "trades.siddhi"))


def _event_times(rng: np.random.Generator, events: int, start_ms: int, days: int) -> np.ndarray:
    """Event times (ms, sorted): busy weekday market hours (14:00-21:00 GMT), quiet nights and weekends."""
    hour_starts = start_ms + np.arange(days * 24, dtype=np.int64) * HOUR_MS
    weekday = (hour_starts // DAY_MS + 3) % 7  # 1970-01-01 was a Thursday (Monday = 0)
    hour = (hour_starts // HOUR_MS) % 24
    weight = np.where(weekday < 5, np.where((hour >= 14) & (hour < 21), 10.0, 1.0), 0.4)
    counts = rng.multinomial(events, weight / weight.sum())
    ts = np.repeat(hour_starts, counts) + rng.integers(0, HOUR_MS, events)
    ts.sort()
    return ts


def _prices(rng: np.random.Generator, symbol_idx: np.ndarray, ts: np.ndarray, start_ms: int) -> np.ndarray:
    """Geometric Brownian motion per symbol, sampled at that symbol's trade times."""
    price = np.empty(len(ts))
    for k, (_, s0, sigma) in enumerate(SYMBOLS[: int(symbol_idx.max()) + 1]):
        idx = np.flatnonzero(symbol_idx == k)
        if idx.size == 0:
            continue
        dt = np.diff(ts[idx], prepend=start_ms) / MS_PER_YEAR
        mu = 0.08
        steps = (mu - 0.5 * sigma**2) * dt + sigma * np.sqrt(dt) * rng.standard_normal(idx.size)
        price[idx] = s0 * np.exp(np.cumsum(steps))
    return np.round(price, 2)


def _malformed(rng: np.random.Generator, ts: np.ndarray, n: int) -> list[str]:
    """``n`` broken events: bad price, missing symbol, unparsable timestamp, bad quantity, broken JSON."""
    lines = []
    for i in range(n):
        t = int(ts[rng.integers(0, len(ts))])
        sym = SYMBOLS[int(rng.integers(0, 5))][0]
        kind = i % 5
        if kind == 0:
            rec: dict[str, object] = {"symbol": sym, "price": "n/a", "quantity": 100, "timestamp": t}
        elif kind == 1:
            rec = {"price": 42.0, "quantity": 10, "timestamp": t}
        elif kind == 2:
            rec = {"symbol": sym, "price": 42.0, "quantity": 10, "timestamp": "2024-13-45 25:61:00"}
        elif kind == 3:
            rec = {"symbol": sym, "price": 42.0, "quantity": "a lot", "timestamp": t}
        else:
            lines.append(f'{{"symbol": "{sym}", "price": 42.0, "quantity": 1')  # truncated line
            continue
        lines.append(json.dumps(rec))
    return lines


def generate(
    out_dir: Path,
    *,
    events: int,
    days: int,
    files: int = 20,
    malformed: int = 20,
    seed: int = SEED,
) -> DemoData:
    """Write ``events`` trades and ``malformed`` broken ones as numbered JSON Lines files (arrival order)."""
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    start_ms = int(START.timestamp() * 1000)
    ts = _event_times(rng, events, start_ms, days)
    popularity = 1.0 / np.arange(1, len(SYMBOLS) + 1) ** 0.8
    symbol_idx = rng.choice(len(SYMBOLS), size=events, p=popularity / popularity.sum())
    price = _prices(rng, symbol_idx, ts, start_ms)
    quantity = np.maximum(1, np.round(rng.lognormal(np.log(100), 1.0, events))).astype(np.int64)
    # Arrival order: a few ms after the event, but 1% of events arrive 2-10 seconds late.
    delay = rng.integers(0, 50, events)
    late = rng.random(events) < 0.01
    delay[late] = rng.integers(2_000, 10_000, int(late.sum()))
    order = np.argsort(ts + delay, kind="stable")
    arrived = ts[order]
    late_events = int((arrived < np.maximum.accumulate(arrived)).sum())
    names = np.array([s for s, _, _ in SYMBOLS])
    frame = pd.DataFrame(
        {
            "symbol": names[symbol_idx[order]],
            "price": price[order],
            "quantity": quantity[order],
            "timestamp": arrived,
        }
    )
    bad = _malformed(rng, ts, malformed)
    where = rng.integers(0, files, len(bad))
    out_dir.mkdir(parents=True, exist_ok=True)
    for i, chunk in enumerate(np.array_split(np.arange(events), files)):
        text = frame.iloc[chunk].to_json(orient="records", lines=True, double_precision=10)
        lines = text.rstrip("\n").split("\n") if len(chunk) else []
        for line in (b for b, f in zip(bad, where, strict=True) if f == i):
            lines.insert(int(rng.integers(0, len(lines) + 1)), line)
        target = out_dir / f"trades-{i + 1:04d}.jsonl"
        tmp = out_dir / f".{target.name}.tmp"  # hidden from Spark until renamed
        tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
        os.replace(tmp, target)
    end = START + timedelta(days=days)
    return DemoData(
        events=events,
        days=days,
        files=files,
        seed=seed,
        start=START.strftime("%Y-%m-%d %H:%M:%S"),
        end=end.strftime("%Y-%m-%d %H:%M:%S"),
        symbols=len(SYMBOLS),
        late_events=late_events,
        malformed_events=len(bad),
        valid_events=events,
        seconds=time.perf_counter() - t0,
    )


def prepare_input(
    data_dir: Path, *, events: int, days: int, files: int, err: Console
) -> tuple[Path, DemoData, bool]:
    """The demo input directory: generated now, or reused when a previous run made the same data set."""
    base = data_dir / "demo-input"
    input_dir = base / "TradeStream"
    manifest = base / "manifest.json"
    if manifest.exists():
        data = DemoData(**json.loads(manifest.read_text(encoding="utf-8")))
        if (data.events, data.days, data.files) == (events, days, files):
            return input_dir, data, True
        msg = (
            f"{data_dir} already holds a demo data set of {data.events:,} events over {data.days} days in "
            f"{data.files} files; its rollups would mix with a different one. Use another --data-dir, "
            f"or delete {data_dir} to start over"
        )
        raise UsageError(msg)
    if input_dir.exists() and any(input_dir.iterdir()):
        msg = f"{input_dir} holds files the demo did not write; use another --data-dir"
        raise UsageError(msg)
    err.print(f"generating {events:,} trades over {days} days into {input_dir} ...", markup=False)
    data = generate(input_dir, events=events, days=days, files=files)
    manifest.write_text(json.dumps(asdict(data), indent=2), encoding="utf-8")
    return input_dir, data, False


def _fmt_day(d: datetime) -> str:
    return d.strftime("%Y-%m-%d %H:%M:%S")


def demo_queries(days: int) -> tuple[str, str]:
    """A per-day retrieval (one symbol, two weeks around the middle) and a per-month one (all symbols)."""
    end = START + timedelta(days=days)
    mid = START + timedelta(days=days // 2)
    first = max(START, mid - timedelta(days=7)).replace(hour=0)
    last = min(end, first + timedelta(days=14))
    daily = (
        f'from TradeAggregation on symbol == "{SYMBOLS[0][0]}" '
        f'within "{_fmt_day(first)}", "{_fmt_day(last)}" per "days" '
        f"select AGG_TIMESTAMP, symbol, trades, total, avgPrice, minPrice, maxPrice order by AGG_TIMESTAMP"
    )
    month0 = START.replace(day=1)
    month_end = (end.replace(day=1) + timedelta(days=32)).replace(day=1)
    monthly = (
        f'from TradeAggregation within "{_fmt_day(month0)}", "{_fmt_day(month_end)}" per "months" '
        f"select AGG_TIMESTAMP, symbol, trades, total, avgPrice order by AGG_TIMESTAMP, symbol"
    )
    return daily, monthly


def _monthly_table(frame: pd.DataFrame) -> object:
    """Months as columns, symbols as rows: traded volume and average price."""
    from rich.table import Table

    from tiltframe.timeutil.parse import format_ts

    table = Table(
        title="per month, all symbols: volume (sum of quantity) @ average price", title_justify="left"
    )
    table.add_column("symbol")
    months = sorted(frame["AGG_TIMESTAMP"].unique())
    for m in months:
        table.add_column(format_ts(int(m))[:7], justify="right")
    cells = {(r.symbol, r.AGG_TIMESTAMP): f"{int(r.total):,} @ {r.avgPrice:,.2f}" for r in frame.itertuples()}
    for sym, _, _ in SYMBOLS:
        if any((sym, m) in cells for m in months):
            table.add_row(sym, *(cells.get((sym, m), "-") for m in months))
    trades = frame.groupby("AGG_TIMESTAMP")["trades"].sum()
    table.add_row("[bold]trades[/]", *(f"[bold]{int(trades.get(m, 0)):,}[/]" for m in months))
    return table


def run_demo(
    *,
    events: int,
    data_dir: Path,
    days: int,
    files: int,
    files_per_trigger: int,
    master: str | None,
    out: Console,
    err: Console,
) -> None:
    """The whole demo: data, run with live progress, two retrievals, and what to try next."""
    from tiltframe import api
    from tiltframe.cli.options import checkpoint_location, store_location
    from tiltframe.cli.output import result_table
    from tiltframe.cli.progress import RunProgress

    t0 = time.perf_counter()
    app_path = example_app()
    spec = api.load_app(app_path)
    agg = spec.aggregation("TradeAggregation")
    data_dir = data_dir.resolve()
    input_dir, data, reused = prepare_input(data_dir, events=events, days=days, files=files, err=err)
    out.rule("[bold]tiltframe demo[/]")
    out.print(f"app:   {app_path}", markup=False)
    verb = "reusing" if reused else f"generated in {data.seconds:.1f}s:"
    out.print(
        f"input: {verb} {data.events:,} trades of {data.symbols} symbols, {data.start} .. {data.end} GMT, "
        f"{data.files} JSON Lines files in {input_dir}\n"
        f"       {data.late_events:,} events arrive late (after a later event), "
        f"{data.malformed_events} are malformed on purpose"
    )
    if reused:
        out.print(
            "       (this data directory was used before: Spark's checkpoint remembers which files were "
            "processed, so this run skips them and the store keeps its rollups — exactly once)"
        )

    from tiltframe.engine.inputs.sources import FileInput
    from tiltframe.engine.spark.session import get_session

    err.print(f"starting Spark ({master or 'default master'}) ...", style="dim")
    spark = get_session(master)
    progress = RunProgress(err, [agg.name])
    with progress:
        result = api.run(
            spec,
            {"TradeStream": FileInput(str(input_dir), "json", files_per_trigger)},
            data_dir=data_dir,
            spark=spark,
            on_batch=progress.on_batch,
        )
    totals = result.aggregations[agg.name]
    if totals.batches:
        rate = totals.events_read / max(totals.spark_seconds + totals.store_seconds, 1e-9)
        out.print(
            f"run:   {totals.batches} micro-batch{'es' if totals.batches != 1 else ''} (up to "
            f"{files_per_trigger} files each), "
            f"{totals.events_read:,} events read, {totals.events_aggregated:,} aggregated, "
            f"{totals.events_rejected:,} rejected, "
            f"{totals.rows_written:,} rollup rows written; {totals.spark_seconds:.1f}s Spark + "
            f"{totals.store_seconds:.1f}s store ({rate:,.0f} events/s)"
        )
    else:
        out.print("run:   no new input files — everything was already processed; answering from the store")

    daily, monthly = demo_queries(days)
    zone = spec.zone_of(agg)
    day_frame = api.query(spec, daily, data_dir=data_dir)
    out.print()
    out.print(f"[bold]query[/]: {daily}", markup=True, highlight=False)
    out.print(result_table(day_frame, zone=zone, title=f"per day, {SYMBOLS[0][0]}, two weeks"))
    month_frame = api.query(spec, monthly, data_dir=data_dir)
    out.print(f"[bold]query[/]: {monthly}", highlight=False)
    out.print(_monthly_table(month_frame))
    counted = int(month_frame["trades"].sum()) if not month_frame.empty else 0
    check = "matches" if counted == data.valid_events else "DOES NOT match"
    out.print(
        f"check: the monthly rollups count {counted:,} trades; {check} the {data.valid_events:,} "
        f"valid events generated"
    )

    app_arg = shlex.quote(str(app_path))
    dir_arg = shlex.quote(str(data_dir))
    out.print()
    out.rule("where the data went")
    out.print(f"store (SQLite):  {store_location(spec, agg, data_dir)}", markup=False)
    out.print(f"checkpoints:     {checkpoint_location(spec, agg, data_dir)}", markup=False)
    out.print(f"input files:     {input_dir}", markup=False)
    generated = "" if reused else f", of which {data.seconds:.0f}s generating the data"
    out.print(f"demo time:       {time.perf_counter() - t0:.0f}s{generated}")
    out.print()
    out.print("[bold]try next[/]:")
    out.print(
        f"  tiltframe query {app_arg} {shlex.quote(daily)} --data-dir {dir_arg}",
        highlight=False,
        soft_wrap=True,
    )
    out.print(
        f"  tiltframe query {app_arg} {shlex.quote(monthly)} --format csv --data-dir {dir_arg}",
        highlight=False,
        soft_wrap=True,
    )
    out.print(f"  tiltframe inspect {app_arg} --data-dir {dir_arg}", highlight=False, soft_wrap=True)
    out.print(f"  tiltframe serve {app_arg} --data-dir {dir_arg}   # the API and a page with charts: "
              f"http://127.0.0.1:8000/", highlight=False, soft_wrap=True)
    out.print(
        f"  tiltframe run {app_arg} --input TradeStream={shlex.quote(str(input_dir))} "
        f"--data-dir {dir_arg} --follow   # then drop more files into the input directory",
        highlight=False,
        soft_wrap=True,
    )
