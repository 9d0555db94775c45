"""Serving benchmark: one key's per-day rows over a year of second-level data, over HTTP.

In one run it

1. generates a year (2023, GMT) of trades for ``--keys`` keys, ``--events`` in all, at random times of the
   year (numpy; Parquet files of 100k events each, in ``--workdir`` or a temporary directory);
2. aggregates them with a real pipeline run (``tf.run``) into an aggregation ``every sec ... year``, in the
   embedded SQLite store (the default) or a fresh database on a PostgreSQL or MySQL/MariaDB server
   (``--store``; named by ``--postgres-url``/``--mysql-url``, by default TILTFRAME_TEST_POSTGRES_URL/
   TILTFRAME_TEST_MYSQL_URL; dropped afterwards);
3. serves the store with ``tiltframe serve``'s app (``create_app`` on uvicorn, in a process of its own by
   default, or on a thread of this one with ``--server thread``) and asks it, over loopback,
   ``POST /api/query`` of one key's 365 per-day rows (``from A on symbol == "K0" within "2023-**-**
   **:**:**" per "days" select AGG_TIMESTAMP, symbol, trades, total``): ``--requests`` requests from one
   client one after the other; then ``--clients`` concurrent clients (aiohttp tasks on one event loop, in a
   process of their own, a kept-alive connection each) sending ``--requests-per-client`` requests each, one
   every ``--interval-ms`` (on a schedule from a random phase); then the same clients without a pause (a
   closed loop: with N clients a request waits for the N - 1 others, so it measures the server's capacity,
   not its latency);
4. answers the same retrieval in this process: the server's own reader (``Reader.query``, one store
   connection for its life), and ``tf.query`` (the read-only store it shares within the process); and the same
   per-day answer by DuckDB scanning the raw Parquet events.

Before any figure it checks the totals: events read = aggregated = generated; the stored per-day
trades and total of the key = DuckDB's group-by over the raw events, for the reader and ``tf.query``;
every HTTP answer during the load = that answer (the rows compared), and counts non-200 answers.  A wrong
answer exits with status 1; a missed target (p50 <= 5 ms, p99 <= 20 ms, no errors, with 1 client and with
``--clients`` clients on their schedule) is printed as FAIL and exits with status 0.

The clients run on the same machine as the server (and, with ``--server thread``, in the same process):
they share its cores.

    python bench/bench_serve.py                          # 1M events, 3 keys (one event per key every ~95 s)
    python bench/bench_serve.py --events 100000 --requests 500 --requests-per-client 20
    eval "$(bash scripts/services.sh)"                   # the servers on loopback, then:
    python bench/bench_serve.py --store postgresql
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import cProfile
import io
import json
import multiprocessing
import os
import pstats
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from bench_core import ROOT, SERVER_URL_ENV, STORES

YEAR = 2023
YEAR_START_MS = 1_672_531_200_000  # 2023-01-01T00:00:00Z
YEAR_MS = 365 * 86_400_000
DAY_MS = 86_400_000
EVENTS_PER_FILE = 100_000
APP = """
define stream S (symbol string, price double, quantity long, timestamp long);
define aggregation A
from S
select symbol, count() as trades, sum(quantity) as total
group by symbol
aggregate by timestamp every sec ... year;
"""
QUERY = ('from A on symbol == "{key}" within "{year}-**-** **:**:**" per "days" '
         "select AGG_TIMESTAMP, symbol, trades, total")
COLUMNS = ["AGG_TIMESTAMP", "symbol", "trades", "total"]
TARGET_P50_MS, TARGET_P99_MS = 5.0, 20.0


# --- input and store --------------------------------------------------------------------------------------

def generate(folder: Path, events: int, keys: int, seed: int) -> None:
    """``events`` trades of ``keys`` keys at random milliseconds of the year, in time order, as Parquet
    files of ``EVENTS_PER_FILE`` events."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    times = np.sort(rng.integers(YEAR_START_MS, YEAR_START_MS + YEAR_MS, size=events, dtype=np.int64))
    names = np.array([f"K{i}" for i in range(keys)], dtype=object)
    for part, lo in enumerate(range(0, events, EVENTS_PER_FILE)):
        n = min(EVENTS_PER_FILE, events - lo)
        table = pa.table({
            "symbol": pa.array(names[rng.integers(0, keys, size=n)], pa.string()),
            "price": pa.array(np.round(rng.uniform(10, 500, size=n), 2), pa.float64()),
            "quantity": pa.array(rng.integers(1, 1001, size=n, dtype=np.int64), pa.int64()),
            "timestamp": pa.array(times[lo : lo + n], pa.int64()),
        })
        pq.write_table(table, folder / f"part-{part:05d}.parquet")


def build(app_text: str, parquet: Path, data_dir: Path) -> tuple[Any, float]:
    """The pipeline's run over every file in one micro-batch: its totals and seconds."""
    import tiltframe as tf
    from tiltframe.engine.inputs.sources import FileInput
    from tiltframe.engine.spark.session import get_session

    spark = get_session("local[*]")
    t0 = time.perf_counter()
    result = tf.run(tf.load_app(app_text), {"S": FileInput(str(parquet), "parquet", None, max_bytes_per_trigger=0)},
                    data_dir=data_dir, spark=spark)
    seconds = time.perf_counter() - t0
    spark.stop()  # the JVM would keep memory and threads through the load
    return result.aggregations["A"], seconds


def oracle_sql(parquet: Path, key: str) -> str:
    return (f"SELECT (timestamp // {DAY_MS}) * {DAY_MS} AS day, count(*) AS trades, sum(quantity) AS total "
            f"FROM read_parquet('{parquet}/*.parquet') WHERE symbol = '{key}' GROUP BY day ORDER BY day")


def expected_rows(parquet: Path, key: str) -> list[dict[str, Any]]:
    """The key's per-day rows as the API answers them, computed by DuckDB from the raw events."""
    days = duckdb.sql(oracle_sql(parquet, key)).fetchall()
    return [{"AGG_TIMESTAMP": int(d), "symbol": key, "trades": int(c), "total": int(s)} for d, c, s in days]


def json_body(answer: tuple[Any, str]) -> str:
    """The body ``POST /api/query`` makes of an answer."""
    from tiltframe.http.routes import answer_json

    return answer_json(*answer)


def frame_rows(frame: Any) -> list[dict[str, Any]]:
    assert list(frame.columns) == COLUMNS, list(frame.columns)
    return [{"AGG_TIMESTAMP": int(t), "symbol": str(k), "trades": int(c), "total": int(s)}
            for t, k, c, s in frame.itertuples(index=False, name=None)]


# --- the server ---------------------------------------------------------------------------------------------

def _serve(app_text: str, data_dir: str, env: dict[str, str], keep: bool, conn: Any, stop: Any) -> None:
    """A server process: ``tiltframe serve``'s app on uvicorn; sends its URL, serves until ``stop``."""
    os.environ.update(env)
    import tiltframe as tf
    from tiltframe.http.routes import create_app
    from tiltframe.http.server import BackgroundServer

    with BackgroundServer(create_app(tf.load_app(app_text), data_dir, keep_answers=keep)) as server:
        conn.send(server.url)
        stop.wait()


@contextlib.contextmanager
def serving(mode: str, app_text: str, data_dir: Path, env: dict[str, str], keep: bool) -> Iterator[str]:
    """The server's URL while it runs: in a process of its own (``process``) or on a thread (``thread``);
    ``keep``: whether it gives kept answers again while the store is unchanged (``tiltframe serve``'s way)."""
    if mode == "thread":
        import tiltframe as tf
        from tiltframe.http.routes import create_app
        from tiltframe.http.server import BackgroundServer

        with BackgroundServer(create_app(tf.load_app(app_text), data_dir, keep_answers=keep)) as server:
            yield server.url
        return
    ctx = multiprocessing.get_context("spawn")
    here, there = ctx.Pipe()
    stop = ctx.Event()
    child = ctx.Process(target=_serve, args=(app_text, str(data_dir), env, keep, there, stop),
                        name="tiltframe-serve")
    child.start()
    try:
        if not here.poll(120):
            raise RuntimeError("the server process did not start within 120 s")
        yield here.recv()
    finally:
        stop.set()
        child.join(30)
        if child.is_alive():
            child.terminate()
            child.join()


# --- load -----------------------------------------------------------------------------------------------------

class Answers:
    """Checks each HTTP answer against the expected rows (bytes equal to a checked answer, else the rows
    parsed and compared) and counts the errors."""

    def __init__(self, want: list[dict[str, Any]]) -> None:
        self.want = want
        self.good: set[bytes] = set()
        self.lock = threading.Lock()
        self.non_200: dict[int, int] = {}
        self.wrong = 0
        self.failed: list[str] = []

    def check(self, status: int, body: bytes) -> None:
        if status != 200:
            with self.lock:
                self.non_200[status] = self.non_200.get(status, 0) + 1
                if len(self.failed) < 3:
                    self.failed.append(f"{status}: {body[:200]!r}")
            return
        if body in self.good:
            return
        rows = json.loads(body).get("rows")
        with self.lock:
            if rows == self.want:
                self.good.add(body)
            else:
                self.wrong += 1
                if len(self.failed) < 3:
                    self.failed.append(f"200 with other rows: {body[:200]!r}")

    def merge(self, other: Answers) -> None:
        """Count what another process's clients saw."""
        for status, n in other.non_200.items():
            self.non_200[status] = self.non_200.get(status, 0) + n
        self.wrong += other.wrong
        self.failed.extend(other.failed[: max(0, 3 - len(self.failed))])
        self.good |= other.good

    @property
    def errors(self) -> int:
        return sum(self.non_200.values())


def client_run(url: str, query: str, requests: int, warmup: int, answers: Answers) -> list[float]:
    """One client: ``warmup`` untimed requests, then ``requests`` timed ones, each as soon as the answer
    before it came; their latencies in s."""
    import httpx

    body = json.dumps({"query": query}).encode()
    headers = {"content-type": "application/json"}
    latencies = []
    with httpx.Client(base_url=url, timeout=60) as client:
        for _ in range(warmup):
            r = client.post("/api/query", content=body, headers=headers)
            answers.check(r.status_code, r.content)
        for _ in range(requests):
            t0 = time.perf_counter()
            r = client.post("/api/query", content=body, headers=headers)
            latencies.append(time.perf_counter() - t0)
            answers.check(r.status_code, r.content)
    return latencies


def load(url: str, query: str, clients: int, requests: int, warmup: int, answers: Answers,
         interval: float = 0.0) -> tuple[list[float], float]:
    """``clients`` concurrent clients of ``requests`` requests each (one every ``interval`` seconds, or
    without a pause): all latencies and the wall time of the timed part (from the moment every client is
    warm).  One client runs here; several run in a process of their own (:func:`async_clients`)."""
    if clients == 1:
        client_run(url, query, 0, warmup, answers)
        t0 = time.perf_counter()
        latencies = client_run(url, query, requests, 0, answers)
        return latencies, time.perf_counter() - t0
    ctx = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=ctx) as pool:
        latencies, wall, seen = pool.submit(async_clients, url, query, clients, requests, warmup, interval,
                                            answers.want).result()
    answers.merge(seen)
    return latencies, wall


def async_clients(url: str, query: str, clients: int, requests: int, warmup: int, interval: float,
                  want: list[dict[str, Any]]) -> tuple[list[float], float, Answers]:
    """:func:`load`'s clients as tasks of one asyncio loop (aiohttp, uvloop when installed): fifty threads of
    one interpreter would measure, in their tail, their own waits for its lock rather than the server, and
    httpx's asyncio client spent more of the shared cores than the server did."""
    import asyncio

    import aiohttp

    answers = Answers(want)
    body = json.dumps({"query": query}).encode()
    headers = {"content-type": "application/json"}

    async def client(barrier: asyncio.Barrier) -> list[float]:
        latencies = []
        connector = aiohttp.TCPConnector(limit=1)  # one kept-alive connection per client
        async with aiohttp.ClientSession(url, connector=connector, timeout=aiohttp.ClientTimeout(60)) as c:
            async def post() -> None:
                async with c.post("/api/query", data=body, headers=headers) as r:
                    answers.check(r.status, await r.read())

            for _ in range(warmup):
                await post()
            await barrier.wait()
            due = time.perf_counter() + interval * float(np.random.default_rng().random())
            for _ in range(requests):
                if interval:
                    await asyncio.sleep(max(0.0, due - time.perf_counter()))
                    due += interval
                t0 = time.perf_counter()
                await post()
                latencies.append(time.perf_counter() - t0)
        return latencies

    async def everyone() -> tuple[list[float], float]:
        barrier = asyncio.Barrier(clients + 1)
        tasks = [asyncio.create_task(client(barrier)) for _ in range(clients)]
        await barrier.wait()
        t0 = time.perf_counter()
        results = await asyncio.gather(*tasks)
        return [x for r in results for x in r], time.perf_counter() - t0

    try:
        import uvloop

        latencies, wall = uvloop.run(everyone())
    except ImportError:
        latencies, wall = asyncio.run(everyone())
    answers.lock = None  # type: ignore[assignment]  # not picklable, and not needed past here
    return latencies, wall, answers


def empty_round_trips(url: str, warmup: int, requests: int) -> list[float]:
    """Latencies of a request that does no work (``GET`` of an unknown path: 404) on one kept-alive
    connection: the floor of the HTTP layer, client and server."""
    import httpx

    latencies = []
    with httpx.Client(base_url=url, timeout=60) as client:
        for i in range(warmup + requests):
            t0 = time.perf_counter()
            r = client.get("/api/no-such-route")
            if i >= warmup:
                latencies.append(time.perf_counter() - t0)
            assert r.status_code == 404, r.status_code
    return latencies


def server_seconds(url: str) -> tuple[float, int]:
    """The server's own time and count of ``POST /api/query`` requests so far (its /metrics)."""
    import httpx

    total, count = 0.0, 0
    for line in httpx.get(f"{url}/metrics", timeout=30).text.splitlines():
        if 'route="/api/query"' not in line:
            continue
        if line.startswith("tiltframe_http_request_duration_seconds_sum"):
            total = float(line.rsplit(" ", 1)[1])
        elif line.startswith("tiltframe_http_request_duration_seconds_count"):
            count = int(float(line.rsplit(" ", 1)[1]))
    return total, count


# --- figures -----------------------------------------------------------------------------------------------

def quantile(sorted_values: list[float], q: float) -> float:
    """The ``q`` quantile (nearest rank) of sorted values."""
    return sorted_values[min(len(sorted_values) - 1, max(0, int(np.ceil(q * len(sorted_values))) - 1))]


def summary(latencies: list[float]) -> dict[str, float]:
    s = sorted(latencies)
    return {"p50": quantile(s, 0.50) * 1000, "p99": quantile(s, 0.99) * 1000, "max": s[-1] * 1000,
            "mean": statistics.fmean(s) * 1000}


def timed_runs(run: Callable[[], Any], repeat: int, warmup: int = 3) -> list[float]:
    for _ in range(warmup):
        run()
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        run()
        out.append(time.perf_counter() - t0)
    return out


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=1_000_000, help="events over the year, all keys together")
    parser.add_argument("--keys", type=int, default=3, help="keys (symbols) of the events")
    parser.add_argument("--key", default="K0", help="the key retrieved")
    parser.add_argument("--requests", type=int, default=2000, help="timed requests of the single client")
    parser.add_argument("--clients", type=int, default=50, help="concurrent clients of the second load")
    parser.add_argument("--requests-per-client", type=int, default=100, help="timed requests of each of them")
    parser.add_argument("--interval-ms", type=float, default=100.0,
                        help="each of the concurrent clients sends one request every this many ms (default 100: "
                             "10 a second each, 20 times as often as the page refreshes)")
    parser.add_argument("--warmup", type=int, default=20, help="untimed requests of each client first")
    parser.add_argument("--in-process", type=int, default=500, help="timed runs of Reader.query in this process")
    parser.add_argument("--server", choices=("process", "thread"), default="process",
                        help="the server in a process of its own (as `tiltframe serve`) or on a thread of this one")
    parser.add_argument("--profile", action="store_true", help="also print a cProfile of Reader.query")
    parser.add_argument("--workdir", type=Path,
                        help="keep the events and the store here (reused when there); default: a temporary directory")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", action="store_true",
                        help="also print the figures as one JSON line (bench/bench_all.py reads it)")
    parser.add_argument("--store", choices=STORES, default="sqlite",
                        help="the embedded SQLite store or a fresh database on a server")
    parser.add_argument("--postgres-url", default=os.environ.get(SERVER_URL_ENV["postgresql"]),
                        help=f"JDBC URL of a PostgreSQL database (default ${SERVER_URL_ENV['postgresql']})")
    parser.add_argument("--mysql-url", default=os.environ.get(SERVER_URL_ENV["mysql"]),
                        help=f"JDBC URL of a MySQL/MariaDB database (default ${SERVER_URL_ENV['mysql']})")
    args = parser.parse_args()
    if args.key not in {f"K{i}" for i in range(args.keys)}:
        parser.error(f"--key must be one of K0..K{args.keys - 1}")
    server_url = {"postgresql": args.postgres_url, "mysql": args.mysql_url}.get(args.store)
    if args.store != "sqlite" and not server_url:
        option = "--postgres-url" if args.store == "postgresql" else "--mysql-url"
        parser.error(f"--store {args.store} needs {option} or {SERVER_URL_ENV[args.store]} "
                     "(start the test servers with: eval \"$(bash scripts/services.sh)\")")

    with contextlib.ExitStack() as stack:
        if args.workdir is None:
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="tiltframe-bench-serve-")))
        else:
            workdir = args.workdir
        sys.exit(run(args, workdir, server_url, stack))


def run(args: argparse.Namespace, workdir: Path, server_url: str | None, stack: contextlib.ExitStack) -> int:
    import tiltframe as tf
    from tests.servers import app_with_store, database_beside
    from tiltframe.http.reader import Reader

    parquet = workdir / f"events-{args.events}-{args.keys}-{args.seed}"
    if not (parquet / "_done").exists():
        shutil.rmtree(parquet, ignore_errors=True)
        t0 = time.perf_counter()
        generate(parquet, args.events, args.keys, args.seed)
        (parquet / "_done").touch()
        print(f"generated {args.events:,} events in {time.perf_counter() - t0:.1f} s", flush=True)
    url = None if server_url is None else stack.enter_context(database_beside(server_url, "tiltframe_bench_"))
    app_text, env = app_with_store(APP, url)
    data_dir = workdir / f"store-{parquet.name}"
    if url is not None or not (data_dir / "_done").exists():
        shutil.rmtree(data_dir, ignore_errors=True)
        totals, build_s = build(app_text, parquet, data_dir)
        # A fast wrong run is no figure: every event read and aggregated once.
        if not (totals.events_read == totals.events_aggregated == args.events):
            print(f"FAIL: events read {totals.events_read:,}, aggregated {totals.events_aggregated:,}, "
                  f"generated {args.events:,}")
            return 1
        built = (f"built in {build_s:.1f} s (tf.run, {totals.batches} micro-batch(es), {totals.rows_written:,} "
                 f"rows stored at six levels); events read = aggregated = generated")
        if url is None:
            (data_dir / "_done").write_text(built)
    else:
        built = (data_dir / "_done").read_text() + " (reused from --workdir)"
    app = tf.load_app(app_text)
    query = QUERY.format(key=args.key, year=YEAR)

    # Checks before figures: the stored per-day rows of the key = DuckDB's over the raw events.
    want = expected_rows(parquet, args.key)
    reader = Reader(app, data_dir, keep_answers=False)  # computes every answer
    stack.callback(reader.close)
    keeper = Reader(app, data_dir)  # as tiltframe serve: an answer kept while the store is unchanged
    stack.callback(keeper.close)
    got = {"Reader.query": frame_rows(reader.query(query)[0]), "kept": frame_rows(keeper.query(query)[0]),
           "tf.query": frame_rows(tf.query(app, query, data_dir=data_dir))}
    for label, rows in got.items():
        if rows != want:
            bad = next((w, g) for w, g in zip([*want, None], [*rows, None], strict=False) if w != g)
            print(f"FAIL: {label}'s per-day rows of {args.key} differ from DuckDB's over the raw events "
                  f"({len(rows)} rows, DuckDB {len(want)}; first difference: DuckDB {bad[0]}, {label} {bad[1]})")
            return 1
    key_events = sum(r["trades"] for r in want)

    # In process: the server's reader (persistent connection), tf.query (its shared read-only store), DuckDB.
    reader_s = summary(timed_runs(lambda: reader.query(query), args.in_process))
    kept_s = summary(timed_runs(lambda: keeper.query(query), args.in_process))
    body_s = summary(timed_runs(lambda: json_body(reader.query(query)), args.in_process))
    tfq_s = summary(timed_runs(lambda: tf.query(app, query, data_dir=data_dir), max(20, args.in_process // 10)))
    con = duckdb.connect()
    stack.callback(con.close)
    sql = oracle_sql(parquet, args.key)
    duck_s = summary(timed_runs(lambda: con.sql(sql).fetchall(), 20, warmup=2))
    profile = None
    if args.profile:
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(200):
            reader.query(query)
        prof.disable()
        out = io.StringIO()
        ours = r"tiltframe/|lark/lark|pandas/core/frame|sqlite3|sqlalchemy/engine/reflection"  # the stages
        pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(ours, 30)
        profile = out.getvalue()

    # Over HTTP: computing every answer, then as tiltframe serve does (answers kept while the store is unchanged).
    answers = Answers(want)
    http: dict[bool, dict[str, Any]] = {}
    for keep in (False, True):
        with serving(args.server, app_text, data_dir, env, keep) as base:
            empty = summary(empty_round_trips(base, args.warmup, 200))
            errors_before, before = answers.errors, server_seconds(base)
            loads = []
            for clients, requests, interval in ((1, args.requests, 0.0),
                                                (args.clients, args.requests_per_client, args.interval_ms / 1000),
                                                (args.clients, args.requests_per_client, 0.0)):
                errors_before, before = answers.errors, server_seconds(base)
                latencies, wall = load(base, query, clients, requests, args.warmup, answers, interval)
                after = server_seconds(base)
                own = (after[0] - before[0]) / max(1, after[1] - before[1]) * 1000
                loads.append((clients, interval, latencies, wall, answers.errors - errors_before, own))
        http[keep] = {"empty": empty, "loads": loads}
    if answers.wrong:
        print(f"FAIL: {answers.wrong} HTTP answer(s) with other rows than DuckDB's: {answers.failed}")
        return 1

    cores = os.cpu_count()
    where = "in a process of its own" if args.server == "process" else "on a thread of the clients' process"
    print(f"\n{args.events:,} events of {args.keys} keys over {YEAR} (GMT), one every "
          f"{YEAR_MS / 1000 * args.keys / args.events:.0f} s per key on average; aggregation every sec ... year in "
          f"{'the embedded SQLite store' if url is None else args.store}; {built}")
    print(f"  retrieval: {query}")
    print(f"  answer: {len(want)} rows, {key_events:,} events of {args.key}; checked: the reader's and tf.query's "
          f"rows = DuckDB's group-by over the raw events; every HTTP answer = those rows")
    print(f"  machine: {cores} cores; the server (uvicorn, FastAPI) {where}; one client (httpx) in this process, "
          f"concurrent clients as aiohttp tasks in a process of their own; all on the same cores over loopback")
    print("\n  in process                                      p50        p99        max")
    for label, s in (("Reader.query, computed (store read, merge)", reader_s),
                     ("Reader.query, kept (store unchanged)", kept_s),
                     ("computed + the route's JSON body", body_s),
                     ("tf.query (shared read-only store)", tfq_s),
                     ("DuckDB scan of the raw Parquet events", duck_s)):
        print(f"    {label:<42}{s['p50']:7.2f} ms {s['p99']:7.2f} ms {s['max']:7.2f} ms")
    rows = []
    for keep, title in ((False, "computing every answer"), (True, "as tiltframe serve: answers kept while the "
                                                                  "store is unchanged")):
        print(f"\n  over HTTP (POST /api/query), {title}")
        print("                                                  p50        p99        max     req/s   non-200"
              "   server's own time (mean)")
        for clients, interval, latencies, wall, errors, own in http[keep]["loads"]:
            s = summary(latencies)
            label = f"{clients} client{'s' if clients > 1 else ''} x {len(latencies) // clients}"
            if clients > 1:
                label += f", each every {interval * 1000:g} ms" if interval else ", no pause (saturation)"
            if clients == 1 or interval:  # the closed loop at full speed measures capacity, not latency
                rows.append((keep, label, s, errors))
            print(f"    {label:<42}{s['p50']:7.2f} ms {s['p99']:7.2f} ms {s['max']:7.2f} ms "
                  f"{len(latencies) / wall:9.0f} {errors:9d}   {own:7.2f} ms")
        empty = http[keep]["empty"]
        print(f"    {'empty round trip (GET, 404; 1 client)':<42}{empty['p50']:7.2f} ms {empty['p99']:7.2f} ms "
              f"{empty['max']:7.2f} ms")
    if answers.errors:
        print(f"    non-200 answers by status: {answers.non_200}; the first: {answers.failed}")
    print("    (server's own time: its /metrics, from the request's arrival at the app to its response, queueing "
          "for a worker thread included; the empty round trip: the HTTP layer's floor on a kept-alive connection)")
    computed_1 = rows[0][2]["p50"]
    print(f"    ratios (p50): HTTP 1 client computing / Reader.query computed {computed_1 / reader_s['p50']:.1f}x; "
          f"DuckDB scan / HTTP 1 client computing {duck_s['p50'] / computed_1:.1f}x; "
          f"DuckDB scan / Reader.query computed {duck_s['p50'] / reader_s['p50']:.1f}x")

    print(f"\n  targets (p50 <= {TARGET_P50_MS:g} ms, p99 <= {TARGET_P99_MS:g} ms, 0 errors):")
    for keep, label, s, errors in rows:
        way = "kept    " if keep else "computed"
        p50 = f"p50 {verdict(s['p50'] <= TARGET_P50_MS)} ({s['p50']:.2f} ms)"
        p99 = f"p99 {verdict(s['p99'] <= TARGET_P99_MS)} ({s['p99']:.2f} ms)"
        print(f"    {way} {label:<32} {p50}   {p99}   errors {verdict(errors == 0)} ({errors})")
    if profile is not None:
        print("\n  cProfile of 200 Reader.query calls (cumulative):")
        print(profile)
    if args.json:
        print(json.dumps({
            "events": args.events, "keys": args.keys, "cores": cores, "data_dir": str(data_dir), "app": app_text,
            "query": query, "in_process": {"reader": reader_s, "kept": kept_s, "tf_query": tfq_s, "duckdb": duck_s},
            "http": [{"kept": keep, "load": label, **s, "errors": errors} for keep, label, s, errors in rows],
        }))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
