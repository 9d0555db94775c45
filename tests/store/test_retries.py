"""Which store failures pass by waiting: told apart on the real drivers' own errors, and retried for a
bounded time only."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import psycopg
import pymysql
import pytest
import sqlalchemy as sa

from tests.servers import server_jdbc_url
from tiltframe.errors import StoreError
from tiltframe.model.aggregations import StoreSpec
from tiltframe.store.retries import RETRY_SECONDS_ENV, is_transient, retried
from tiltframe.store.urls import store_target


def _error(call) -> BaseException:
    try:
        call()
    except Exception as exc:  # the driver's own error is the subject
        return exc
    pytest.fail("no error")


def test_a_refused_connection_is_transient_a_refused_login_is_not() -> None:
    assert is_transient(_error(lambda: psycopg.connect("host=127.0.0.1 port=1 user=x dbname=x connect_timeout=2")))
    assert is_transient(_error(lambda: pymysql.connect(host="127.0.0.1", port=1, user="x", connect_timeout=2)))
    pg = store_target(StoreSpec("rdbms", server_jdbc_url("postgresql"))).set(password="wrong")
    assert not is_transient(_error(lambda: sa.create_engine(pg).connect()))
    my = store_target(StoreSpec("rdbms", server_jdbc_url("mysql"))).set(password="wrong")
    assert not is_transient(_error(lambda: sa.create_engine(my).connect()))


def test_a_locked_sqlite_file_is_transient_a_missing_table_is_not(tmp_path: Path) -> None:
    path = tmp_path / "x.db"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("CREATE TABLE t (x)")
    holder.execute("BEGIN IMMEDIATE")
    other = sqlite3.connect(path, timeout=0, isolation_level=None)
    assert is_transient(_error(lambda: other.execute("BEGIN IMMEDIATE")))
    assert not is_transient(_error(lambda: other.execute("SELECT * FROM missing")))
    holder.close()
    other.close()


def test_a_transient_failure_is_retried_until_the_budget_is_spent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(RETRY_SECONDS_ENV, "2")
    calls: list[float] = []

    @retried
    def connect() -> None:
        calls.append(time.monotonic())
        try:
            psycopg.connect("host=127.0.0.1 port=1 user=x dbname=x connect_timeout=2")
        except psycopg.Error as exc:
            raise StoreError("could not reach the store") from exc

    with pytest.raises(StoreError, match="could not reach the store"):
        connect()
    assert len(calls) >= 2 and calls[-1] - calls[0] < 15


def test_a_lasting_failure_is_raised_at_once() -> None:
    calls: list[int] = []

    @retried
    def missing() -> None:
        calls.append(1)
        sqlite3.connect(":memory:").execute("SELECT * FROM missing")

    with pytest.raises(sqlite3.OperationalError):
        missing()
    assert calls == [1]
