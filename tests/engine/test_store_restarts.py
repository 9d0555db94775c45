"""A following run outlives a restart of its database, and a store that stays away ends the run clearly.

A real server of the test's own (``tests/private_servers.py``; the shared test servers stay up for the
other tests) is stopped for 12 seconds while a ``follow`` run has new files to commit: the micro-batch
retries its store calls (``tiltframe.store.retries``, several times, backing off) until the server is back,
and the stored totals equal a DuckDB rollup of the raw events (nothing lost, nothing doubled).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import sqlalchemy as sa

import tiltframe as tf
from tests.oracle import APP, rollup
from tests.private_servers import PrivateServer, private_server
from tests.servers import SERVER_STORES, app_with_store
from tiltframe.engine.rollup.reports import BatchReport
from tiltframe.errors import TiltframeError
from tiltframe.model.aggregations import StoreSpec
from tiltframe.store.retries import RETRY_SECONDS_ENV
from tiltframe.store.urls import store_target

pytestmark = pytest.mark.slow

DOWN_S = 12


def _events(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "symbol": rng.choice(["IBM", "WSO2", "ORCL"], n),
        "price": rng.integers(1, 400, n) / 4,
        "quantity": rng.integers(1, 100, n),
        "ts": 1_700_000_000_000 + rng.integers(0, 3_600_000, n),
    })


def _wait(condition: Callable[[], bool], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"waited {seconds} s for {what}")
        time.sleep(0.5)


def _answers(url: str) -> bool:
    engine = sa.create_engine(store_target(StoreSpec("rdbms", url)))
    try:
        with engine.connect() as conn:
            conn.exec_driver_sql("SELECT 1")
        return True
    except sa.exc.SQLAlchemyError:
        return False
    finally:
        engine.dispose()


@contextmanager
def server_down(server: PrivateServer) -> Iterator[None]:
    """``server`` stopped for the block, started again (and answering) after it."""
    server.stop()
    try:
        _wait(lambda: not _answers(server.url), 30, f"{server.kind} to stop")
        yield
    finally:
        server.start()
        _wait(lambda: _answers(server.url), 120, f"{server.kind} to start again")


@pytest.mark.parametrize("kind", SERVER_STORES)
def test_a_following_run_outlives_a_database_restart(
    spark, tmp_path: Path, kind: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    first, second = _events(300, 1), _events(200, 2)
    inbox = tmp_path / "in"
    inbox.mkdir()
    first.to_csv(inbox / "a.csv", index=False)
    with private_server(kind) as server:
        app = tf.load_app(app_with_store(APP, server.url)[0])
        reports: list[BatchReport] = []
        handle = tf.start(app, {"TradeStream": inbox}, data_dir=tmp_path / "data", spark=spark, follow=True,
                          on_batch=reports.append)
        try:
            committed = lambda: sum(r.stats.events_read for r in reports if not r.skipped)  # noqa: E731
            _wait(lambda: committed() == len(first), 120, "the first file")
            with server_down(server):
                second.to_csv(inbox / ".b.csv", index=False)
                (inbox / ".b.csv").rename(inbox / "b.csv")
                time.sleep(DOWN_S)
                assert committed() == len(first)  # the second file's batch waits for the store
                retries = [r for r in caplog.records if r.name == "tiltframe.store.retries"]
                assert len(retries) >= 3, [r.getMessage() for r in retries]  # it did try, and backed off
            _wait(lambda: committed() == len(first) + len(second), 180, "the second file after the restart")
        finally:
            handle.stop()
            handle.close()
        events = pd.concat([first, second], ignore_index=True).assign(arrival=lambda d: np.arange(len(d)))
        got = tf.query(app, 'from TradeAggregation within 0L, 4102444800000L per "minutes" '
                       "select AGG_TIMESTAMP, symbol, total, trades", data_dir=tmp_path / "data")
    want = rollup(events, "minutes")[["AGG_TIMESTAMP", "symbol", "total", "trades"]]
    got = got.sort_values(["AGG_TIMESTAMP", "symbol"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(got, want, check_dtype=False)


def test_a_store_that_stays_away_ends_the_run_with_one_clear_error(
    spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(RETRY_SECONDS_ENV, "3")
    inbox = tmp_path / "in"
    inbox.mkdir()
    _events(10, 3).to_csv(inbox / "a.csv", index=False)
    app = tf.load_app(app_with_store(APP, "jdbc:postgresql://127.0.0.1:1/nowhere?user=x&password=y")[0])
    started = time.monotonic()
    with pytest.raises(TiltframeError) as failed:
        tf.run(app, {"TradeStream": inbox}, data_dir=tmp_path / "data", spark=spark)
    assert time.monotonic() - started < 60
    assert "127.0.0.1" in str(failed.value) and "Connection refused" in str(failed.value)
