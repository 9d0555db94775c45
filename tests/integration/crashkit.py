"""Helpers of the kill -9 test: input files with a well-defined arrival order, a look into the store and
the Spark checkpoint from outside the driver, and process groups that are killed whole (the JVM too)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import sqlalchemy as sa

from tiltframe.model.aggregations import StoreSpec
from tiltframe.store.urls import store_target

AGGREGATION = "TradeAggregation"
SYMBOLS = ("IBM", "WSO2", "ORCL", "MSFT", "GOOG")
#: Events from 2024-01-31 18:00 GMT over three days: the Jan/Feb month boundary lies inside.
START_MS = pd.Timestamp("2024-01-31 18:00", tz="UTC").value // 1_000_000
SPAN_MS = 3 * 86_400_000
HOUR_MS = 3_600_000
#: Marks every process of one driver run (the JVM and Python workers inherit it).
TAG_ENV = "TILTFRAME_CRASH_TEST_RUN"


def write_inputs(folder: Path, rng: np.random.Generator, files: int) -> pd.DataFrame:
    """JSON Lines files of a few hundred to a few thousand events each, returned with ``arrival``.

    Files drift forward in time but overlap (disorder across files and batches); rows inside a file are
    unordered; some files are bursts of a few minutes; a few events are days late; a few repeat the
    symbol and time of an earlier event, so that "latest value" ties are broken by arrival order across
    micro-batches.  Modification times increase with the file index, one second apart, so Spark's
    file source and tiltframe's arrival order (modification time, path, row) both follow the index.
    """
    folder.mkdir(parents=True)
    first_mtime = time.time() - 2 * files - 60
    frames: list[pd.DataFrame] = []
    for i in range(files):
        n = int(rng.integers(200, 2500))
        centre = START_MS + SPAN_MS * i // files
        half = int(rng.integers(60_000, 600_000)) if rng.random() < 0.25 else 3 * HOUR_MS
        ts = centre + rng.integers(-half, half, n)
        late = rng.random(n) < 0.03
        ts[late] = rng.integers(START_MS, centre + 1, int(late.sum()))
        symbol = rng.choice(SYMBOLS, n)
        earlier = pd.concat(frames, ignore_index=True) if frames else None
        if earlier is not None:
            ties = np.flatnonzero(rng.random(n) < 0.03)
            picks = earlier.iloc[rng.integers(0, len(earlier), len(ties))]
            ts[ties], symbol[ties] = picks["ts"].to_numpy(), picks["symbol"].to_numpy()
        frame = pd.DataFrame({"symbol": symbol, "price": rng.integers(1, 100_000, n) / 100,
                              "quantity": rng.integers(1, 1000, n), "ts": ts})
        path = folder / f"trades-{i:03d}.jsonl"
        rows = zip(frame["symbol"].tolist(), frame["price"].tolist(), frame["quantity"].tolist(),
                   frame["ts"].tolist(), strict=True)
        path.write_text("".join(json.dumps({"symbol": s, "price": p, "quantity": q, "ts": t}) + "\n"
                                for s, p, q, t in rows))
        os.utime(path, (first_mtime + i, first_mtime + i))
        frames.append(frame)
    events = pd.concat(frames, ignore_index=True)
    events["arrival"] = np.arange(len(events))
    return events


_FIELDS = ("pipeline_id", "batch_id", "events_read", "events_aggregated")
_TABLE = sa.table("TILTFRAME_BATCHES", sa.column("aggregation"), *(sa.column(c) for c in _FIELDS))
#: Built with SQLAlchemy so that each dialect quotes the upper-case table name as tiltframe created it.
_BATCHES_QUERY = (sa.select(*(_TABLE.c[c] for c in _FIELDS)).where(_TABLE.c.aggregation == AGGREGATION)
                  .order_by(_TABLE.c.batch_id))


@dataclass(frozen=True)
class Batch:
    """One row of TILTFRAME_BATCHES."""

    pipeline_id: str
    batch_id: int
    events_read: int
    events_aggregated: int


class StoreProbe:
    """Reads the store's commit records from outside the driver, and tells whether a write transaction is
    open (to kill the driver inside one)."""

    _BATCHES = _BATCHES_QUERY
    #: Another session of this database holds a transaction id: it has written in an open transaction.
    _PG_WRITING = ("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                   "AND pid <> pg_backend_pid() AND backend_xid IS NOT NULL")
    #: Without the PROCESS privilege MariaDB shows no transactions, but it shows our user's statements.
    _MY_WRITING = ("SELECT count(*) FROM information_schema.processlist WHERE db = DATABASE() "
                   "AND id <> CONNECTION_ID() AND info LIKE 'INSERT%%'")

    def __init__(self, kind: str, data_dir: Path, jdbc_url: str | None) -> None:
        self.kind = kind
        self._sqlite_path = data_dir / "tiltframe.db"
        self._locker: sqlite3.Connection | None = None
        self._engine = None
        if jdbc_url is not None:
            target = store_target(StoreSpec("rdbms", jdbc_url))
            self._engine = sa.create_engine(target, isolation_level="AUTOCOMMIT", pool_pre_ping=True)

    def batches(self) -> list[Batch]:
        """The committed batches of the aggregation (none before its tables exist)."""
        if self._engine is None:
            if not self._sqlite_path.exists():
                return []
            uri = f"{self._sqlite_path.resolve().as_uri()}?mode=ro"
            with contextlib.closing(sqlite3.connect(uri, uri=True, timeout=10)) as conn:
                try:
                    sql = self._BATCHES.compile(compile_kwargs={"literal_binds": True})
                    rows = conn.execute(str(sql)).fetchall()
                except sqlite3.OperationalError as e:
                    if "no such table" in str(e):
                        return []
                    raise
        else:
            with self._engine.connect() as conn:
                if not sa.inspect(conn).has_table("TILTFRAME_BATCHES"):
                    return []
                rows = conn.execute(self._BATCHES).all()
        return [Batch(str(p), int(b), int(r), int(a)) for p, b, r, a in rows]

    def in_write_transaction(self) -> bool:
        """True while the driver is inside a store write transaction.

        SQLite has no view of other connections' transactions, so this tries ``BEGIN IMMEDIATE`` without
        waiting: it fails exactly while a writer holds the write lock, and otherwise holds it for a few
        microseconds and writes nothing (the driver's busy timeout covers that).
        """
        if self._engine is None:
            if self._locker is None:
                self._locker = sqlite3.connect(self._sqlite_path, timeout=0, isolation_level=None)
            try:
                self._locker.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError:
                return True
            self._locker.execute("ROLLBACK")
            return False
        with self._engine.connect() as conn:
            return bool(conn.exec_driver_sql(self._PG_WRITING if self.kind == "postgresql" else self._MY_WRITING)
                        .scalar())

    def close(self) -> None:
        if self._locker is not None:
            self._locker.close()
        if self._engine is not None:
            self._engine.dispose()


def spark_log(data_dir: Path, log: str) -> set[int]:
    """Batch ids in the Spark checkpoint's ``offsets`` (planned) or ``commits`` (finished) log."""
    found = sorted((data_dir / "checkpoints").glob(f"{AGGREGATION}-*/spark/{log}"))
    if not found:
        return set()
    return {int(p.name) for p in found[0].iterdir() if p.name.isdigit()}


def phase_after_kill(data_dir: Path, committed: set[int]) -> str:
    """Where the kill left the batch in flight, read from the checkpoint and the store's commit records."""
    planned, finished = spark_log(data_dir, "offsets"), spark_log(data_dir, "commits")
    last = max(planned, default=-1)
    if last <= max(finished, default=-1):
        return "between batches"
    if last in committed:
        return f"batch {last} in store, not in Spark's commit log"
    return f"inside batch {last} (Spark job or store write)"


def start_group(command: list[str], env: dict[str, str], log: Path, tag: str) -> subprocess.Popen[bytes]:
    """``command`` as the leader of a new process group (its JVM and Python workers join the group), every
    process of it marked with ``TAG_ENV=tag`` in its environment so it can be found even if it left."""
    with log.open("ab") as out:  # the child keeps its own copy of the descriptor
        return subprocess.Popen(command, env={**env, TAG_ENV: tag}, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)


def tagged(tag: str) -> list[int]:
    """Live processes (not zombies) started with ``TAG_ENV=tag``: robust to process ids being reused."""
    marker = f"{TAG_ENV}={tag}".encode()
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            environ = (proc / "environ").read_bytes()
            stat = (proc / "stat").read_text()
        except OSError:
            continue
        if marker in environ.split(b"\0") and stat[stat.rfind(")") + 2] not in "ZX":
            found.append(int(proc.name))
    return found


def kill_group(proc: subprocess.Popen[bytes], tag: str, timeout: float = 60) -> None:
    """SIGKILL the group of ``proc`` (and any process of ``tag`` that left it), wait until none is alive.

    The group is signalled only while its leader is not reaped: until then its id cannot be reused.
    """
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=timeout)
    deadline = time.monotonic() + timeout
    while live := tagged(tag):
        for pid in live:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if time.monotonic() > deadline:
            msg = f"processes {live} of run {tag} survived SIGKILL"
            raise TimeoutError(msg)
        time.sleep(0.1)
