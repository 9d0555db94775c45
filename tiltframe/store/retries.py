"""Transient store failures retried with backoff, so a database restart does not end a pipeline.

A server that restarts, a dropped connection, a failover or a busy SQLite file fail a store call for a
while, then pass.  Store calls are retried (tenacity: exponential backoff with jitter) for up to
``$TILTFRAME_STORE_RETRY_SECONDS`` (120 s by default); a failure that persists past that, or any other
failure (a constraint, a full disk, a wrong password), is raised at once.  Exactly-once is kept: a batch
write is one transaction that starts by looking for its commit record, so a write whose COMMIT reached
the server before the connection dropped is found committed and not written again.

Only the outermost store call retries (``retried``): a write that calls other store methods inside it
waits one budget, not one per level.
"""

from __future__ import annotations

import functools
import logging
import sqlite3
import threading
from collections.abc import Callable, Iterator
from typing import ParamSpec, TypeVar

import sqlalchemy as sa
import tenacity

from tiltframe.env_values import env_seconds

logger = logging.getLogger(__name__)

RETRY_SECONDS_ENV = "TILTFRAME_STORE_RETRY_SECONDS"
DEFAULT_RETRY_SECONDS = 120.0

#: PostgreSQL SQLSTATEs of a lost or refused connection, a server shutting down or starting, or a
#: transaction the server chose to abort (serialization failure, deadlock).
_PG_TRANSIENT = ("08", "57P01", "57P02", "57P03", "40001", "40P01")
#: MySQL/MariaDB error codes of the same: can't connect (2002, 2003), server gone or connection lost
#: (2006, 2013, 2055), server shutdown (1053, 1927 connection killed), lock wait timeout and deadlock.
_MYSQL_TRANSIENT = frozenset({1053, 1205, 1213, 1927, 2002, 2003, 2006, 2013, 2055})

_depth = threading.local()

P = ParamSpec("P")
R = TypeVar("R")


def retry_seconds() -> float:
    """How long a store call keeps retrying a transient failure (``$TILTFRAME_STORE_RETRY_SECONDS``)."""
    return env_seconds(RETRY_SECONDS_ENV, DEFAULT_RETRY_SECONDS)


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def is_transient(exc: BaseException) -> bool:
    """Whether ``exc`` (or an error it was raised from) is a failure that passes by waiting."""
    for e in _chain(exc):
        if isinstance(e, sa.exc.DBAPIError) and e.connection_invalidated:
            return True
        if isinstance(e, sqlite3.OperationalError):
            return "locked" in str(e) or "busy" in str(e)
        module = type(e).__module__
        if module.startswith("psycopg"):
            import psycopg

            if isinstance(e, psycopg.OperationalError):
                if e.sqlstate is not None:
                    return e.sqlstate.startswith(_PG_TRANSIENT)
                # A failed connection has no SQLSTATE: refused or lost is transient, a server's FATAL
                # refusal (a wrong password, no such database) is not, unless it is starting or stopping.
                text = str(e)
                return "FATAL:" not in text or "the database system is" in text
        if module.startswith("pymysql"):
            import pymysql

            if isinstance(e, pymysql.err.OperationalError | pymysql.err.InterfaceError):
                return not e.args or e.args[0] in _MYSQL_TRANSIENT
    return False


def _log_retry(state: tenacity.RetryCallState) -> None:
    exc = state.outcome.exception() if state.outcome is not None else None
    wait = state.next_action.sleep if state.next_action is not None else 0.0
    cause = next((e for e in _chain(exc) if e is not exc), exc) if exc is not None else None
    logger.warning("the store is unreachable (%s); attempt %d failed, retrying in %.1f s",
                   str(cause or exc).splitlines()[0][:300], state.attempt_number, wait)


def retried(call: Callable[P, R]) -> Callable[P, R]:
    """``call`` retried on transient store failures (only where no retried call is already running)."""

    @functools.wraps(call)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        if getattr(_depth, "value", 0):
            return call(*args, **kwargs)
        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception(is_transient),
            stop=tenacity.stop_after_delay(retry_seconds()),
            wait=tenacity.wait_exponential(multiplier=0.5, max=10.0) + tenacity.wait_random(0, 0.5),
            before_sleep=_log_retry,
            reraise=True,
        )
        for attempt in retrying:
            with attempt:
                _depth.value = 1
                try:
                    return call(*args, **kwargs)
                finally:
                    _depth.value = 0
        raise AssertionError("unreachable")  # pragma: no cover - tenacity returns or raises

    return wrapper
