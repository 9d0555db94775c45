"""Exactly-once under ``kill -9``: the CLI driver is killed (with its JVM) at several points while it
ingests, restarted on the same checkpoint, and the final tables equal the oracle on every store.

Kills land after the store shows progress in this run (so every restart gets further), then either at
once (likely between the store commit and Spark's commit log: the replay must be skipped), after a
random delay (inside a Spark job or between batches), or while a store write transaction is open (it
must roll back and be redone).  The killed runs take turns between the two ways a batch reaches a server
store (staged by the executors, through the driver).  ``TILTFRAME_CRASH_SEED`` reproduces the input and the
kill schedule.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

import tiltframe as tf
from tests.integration.crashkit import (
    StoreProbe,
    kill_group,
    phase_after_kill,
    spark_log,
    start_group,
    tagged,
    write_inputs,
)
from tests.oracle import APP, check_against_oracle
from tests.servers import STORES, app_with_store, fresh_database
from tiltframe.engine.inputs.batch_sessions import SMALL_BATCH_ENV
from tiltframe.engine.rollup.staged_writes import STAGED_WRITES_ENV

MODES = ("at-progress", "random-delay", "in-store-transaction")
#: Kills per store: each mode once (three times over the three stores) keeps CI short;
#: ``TILTFRAME_CRASH_ROUNDS=4`` kills in each mode 4 times to hunt for a rare interleaving.
ROUNDS = int(os.environ.get("TILTFRAME_CRASH_ROUNDS", "1"))
KILLS = ROUNDS * len(MODES)
MIN_KILLS = KILLS - 1  # a kill may come after the last batch on a fast run
FILES = 12 + 4 * KILLS  # two per micro-batch: enough batches to outlive every kill (36 for 6 kills)
PROGRESS_TIMEOUT = 300.0  # a JVM start plus a batch, on a busy two-core machine
FINAL_TIMEOUT = 600.0
PASSWORD_ENV = "TF_CRASH_STORE_PASSWORD"


@dataclass
class KillPoint:
    """One kill, as observed: what the store held before the run and at the kill, and the phase."""

    run: int
    mode: str
    alive: bool
    seconds: float
    committed_before: int
    committed_at_kill: int
    in_store_transaction: bool
    phase: str

    def __str__(self) -> str:
        tx = " (store transaction open)" if self.in_store_transaction else ""
        state = "alive" if self.alive else "already exited"
        return (f"run {self.run}: {self.mode:<20} at {self.seconds:5.1f}s, {state}, batches committed "
                f"{self.committed_before} -> {self.committed_at_kill}; {self.phase}{tx}")


def wait_for(condition: Callable[[], bool], proc: subprocess.Popen[bytes], timeout: float, interval: float) -> bool:
    """Poll ``condition`` until it holds (True) or ``proc`` exits (False); fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while proc.poll() is None:
        try:
            if condition():
                return True
        except Exception:  # a store mid-crash or mid-start may refuse a read; poll again
            pass
        if time.monotonic() > deadline:
            pytest.fail(f"no progress within {timeout:.0f}s")
        time.sleep(interval)
    return False


def kill_once(run: int, mode: str, delay: float, proc: subprocess.Popen[bytes], tag: str, probe: StoreProbe,
              data_dir: Path, started: float) -> KillPoint:
    """Wait until this run commits a batch, then kill the driver's group as ``mode`` says."""
    before = len(probe.batches())
    alive = wait_for(lambda: len(probe.batches()) > before, proc, PROGRESS_TIMEOUT, 0.01)
    in_tx = False
    if alive and mode == "random-delay":
        time.sleep(delay)
    elif alive and mode == "in-store-transaction":
        in_tx = wait_for(probe.in_write_transaction, proc, PROGRESS_TIMEOUT, 0.002)
    alive = proc.poll() is None
    seconds = time.monotonic() - started
    kill_group(proc, tag)
    committed = probe.batches()
    phase = phase_after_kill(data_dir, {b.batch_id for b in committed})
    return KillPoint(run, mode, alive, seconds, before, len(committed), in_tx and alive, phase)


def tail(log: Path, chars: int = 4000) -> str:
    return log.read_text(errors="replace")[-chars:] if log.exists() else ""


@pytest.mark.slow
@pytest.mark.timeout(1200)
@pytest.mark.parametrize("store", STORES)
def test_kill9_and_restart_counts_every_event_once(store: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seed = int(os.environ.get("TILTFRAME_CRASH_SEED") or np.random.SeedSequence().entropy % 2**32)
    print(f"\ncrash test on {store}: seed {seed} (TILTFRAME_CRASH_SEED={seed} reproduces it)")
    rng = np.random.default_rng(seed)
    events = write_inputs(tmp_path / "in", rng, FILES)
    schedule = [str(m) for m in rng.permutation(np.repeat(MODES, KILLS // len(MODES)))]
    delays = rng.uniform(0, 3, KILLS)
    data_dir, log = tmp_path / "data", tmp_path / "driver.log"
    started_all = time.monotonic()
    with fresh_database(store) if store != "sqlite" else nullcontext(None) as jdbc_url:
        text, secrets = app_with_store(APP, jdbc_url, PASSWORD_ENV)
        app_file = tmp_path / "app.siddhi"
        app_file.write_text(text)
        for name, value in secrets.items():
            monkeypatch.setenv(name, value)
        env = {**os.environ, **secrets, "TILTFRAME_SPARK_MASTER": "local[2]", "TILTFRAME_SHUFFLE_PARTITIONS": "4",
               "TILTFRAME_DRIVER_MEMORY": "1g", "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
        final = [sys.executable, "-m", "tiltframe", "run", str(app_file), "--input", f"TradeStream={tmp_path / 'in'}",
                 "--data-dir", str(data_dir)]
        # Two files a micro-batch while kills come; the final run replays the batch a kill left planned (its
        # files fixed in Spark's offset log) and takes the rest in one, as a restart with other options does.
        command = [*final, "--max-files-per-trigger", "2"]
        # The inputs make small batches on a local master, which a server store takes through the driver:
        # every other killed run makes none and stages (``$TILTFRAME_SMALL_BATCH_BYTES=0``,
        # ``$TILTFRAME_STAGED_WRITES=1``), so its batches are staged by the executors, and a batch killed on
        # one path may be replayed on the other.
        staged = {**env, SMALL_BATCH_ENV: "0", STAGED_WRITES_ENV: "1"}
        probe = StoreProbe(store, data_dir, jdbc_url)
        tags: list[str] = []
        proc: subprocess.Popen[bytes] | None = None
        kills: list[KillPoint] = []
        try:
            for run, mode in enumerate(schedule):
                started = time.monotonic()
                tags.append(uuid.uuid4().hex)
                proc = start_group(command, staged if run % 2 == 0 else env, log, tags[-1])
                kills.append(kill_once(run, mode, float(delays[run]), proc, tags[-1], probe, data_dir, started))
                print(kills[-1], "(staged)" if run % 2 == 0 and store != "sqlite" else "")
                assert kills[-1].alive or proc.returncode == 0, f"driver failed:\n{tail(log)}"
                if not kills[-1].alive:
                    break  # finished before the kill: nothing left to interrupt
            started = time.monotonic()
            tags.append(uuid.uuid4().hex)
            proc = start_group(final, env, log, tags[-1])
            code = proc.wait(timeout=FINAL_TIMEOUT)
            print(f"final run: exit {code} after {time.monotonic() - started:.1f}s")
            assert code == 0, f"final run failed:\n{tail(log)}"
        finally:
            if proc is not None:
                kill_group(proc, tags[-1])  # after a normal exit: ends only what outlived it
            batches = probe.batches()
            probe.close()

        assert sum(k.alive for k in kills) >= MIN_KILLS, "\n".join(map(str, kills))
        assert len({b.pipeline_id for b in batches}) == 1, "a restart started a new pipeline"
        assert [b.batch_id for b in batches] == list(range(len(batches))), "a batch is missing from the store"
        assert spark_log(data_dir, "commits") == spark_log(data_dir, "offsets") == set(range(len(batches)))
        assert sum(b.events_read for b in batches) == len(events), "events lost or counted twice"
        assert sum(b.events_aggregated for b in batches) == len(events)
        check_against_oracle(tf.load_app(text), data_dir, events)
    assert not [pid for t in tags for pid in tagged(t)], "stray processes of a driver run"
    print(f"{store}: {len(events)} events, {len(batches)} batches, {sum(k.alive for k in kills)} kills, "
          f"{time.monotonic() - started_all:.0f}s in all")
