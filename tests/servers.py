"""Fresh databases on the test servers that ``scripts/services.sh`` starts (PostgreSQL and MariaDB).

The servers are named by ``TILTFRAME_TEST_POSTGRES_URL`` and ``TILTFRAME_TEST_MYSQL_URL`` (JDBC URLs with
user and password); ``scripts/test.sh`` starts them and sets both.  Without them a server test is
skipped, except under CI, where a missing server is a failure.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import sqlalchemy as sa

from tiltframe.model.aggregations import StoreSpec
from tiltframe.store.urls import store_target

SERVERS = {"postgresql": "TILTFRAME_TEST_POSTGRES_URL", "mysql": "TILTFRAME_TEST_MYSQL_URL"}
#: Every store a test runs on: the embedded SQLite, then the servers (MariaDB answers for "mysql").
STORES = ("sqlite", *SERVERS)
SERVER_STORES = tuple(SERVERS)


def server_jdbc_url(kind: str) -> str:
    """The JDBC URL of the test server ``kind``, or skip (fail under CI) when it is not running."""
    url = os.environ.get(SERVERS[kind])
    if not url:
        message = f"{SERVERS[kind]} is not set; start the test servers with: eval \"$(bash scripts/services.sh)\""
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return url


@contextmanager
def fresh_database(kind: str, options: str = "") -> Iterator[str]:
    """A new, empty database on the test server ``kind``, dropped afterwards; yields its JDBC URL.
    ``options``: the rest of its ``CREATE DATABASE`` statement (a collation, say)."""
    with database_beside(server_jdbc_url(kind), options=options) as url:
        yield url


@contextmanager
def database_beside(base: str, prefix: str = "tiltframe_t", options: str = "") -> Iterator[str]:
    """A new, empty database on the server of JDBC URL ``base`` (same user), dropped afterwards; yields
    its JDBC URL.  The benchmarks use it too."""
    name = f"{prefix}{uuid.uuid4().hex[:12]}"
    # pool_pre_ping: a test may restart the server meanwhile (tests/engine/test_store_restarts.py).
    admin = sa.create_engine(store_target(StoreSpec("rdbms", base)), isolation_level="AUTOCOMMIT", pool_pre_ping=True)
    try:
        with admin.connect() as conn:
            conn.exec_driver_sql(f"CREATE DATABASE {name} {options}".rstrip())
        head, _, query = base.partition("?")
        yield f"{head.rsplit('/', 1)[0]}/{name}" + (f"?{query}" if query else "")
    finally:
        with admin.connect() as conn:
            force = " WITH (FORCE)" if admin.dialect.name == "postgresql" else ""
            conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {name}{force}")
        admin.dispose()


def app_with_store(app_text: str, jdbc_url: str | None, password_env: str | None = None) -> tuple[str, dict[str, str]]:
    """``app_text`` with a seed-style ``@store`` on its aggregation for the database ``jdbc_url`` (the text
    unchanged for None: the embedded store), and the environment that text needs.

    With ``password_env`` the credentials leave the URL for ``username`` and ``password`` elements, as in
    the seeds, the password read from that environment variable (``${NAME}``).
    """
    if jdbc_url is None:
        return app_text, {}
    if password_env is None:
        store, env = f"@store(type='rdbms', jdbc.url='{jdbc_url}')", {}
    else:
        base, _, query = jdbc_url.partition("?")
        credentials = dict(p.split("=", 1) for p in query.split("&"))
        store = (f"@store(type='rdbms', jdbc.url='{base}', username='{credentials['user']}', "
                 f"password='${{{password_env}}}')")
        env = {password_env: credentials["password"]}
    return app_text.replace("define aggregation", f"{store}\ndefine aggregation", 1), env


def staged_batches(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The ids of the batches pipelines stage from now on (``engine.rollup.staged_writes.stage``), noted as
    they come."""
    import tiltframe.engine.rollup.pipeline as pipeline_module

    noted: list[int] = []
    stage = pipeline_module.stage

    def noting(levels: Any, target: Any, pipeline_id: str, batch_id: int, n_levels: int) -> Any:
        noted.append(batch_id)
        return stage(levels, target, pipeline_id, batch_id, n_levels)

    monkeypatch.setattr(pipeline_module, "stage", noting)
    return noted
