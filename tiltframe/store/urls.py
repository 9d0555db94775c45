"""From a ``@store`` annotation to the database it names: an SQLite file, or a server URL.

Siddhi apps name their database with a JDBC URL (``jdbc:mysql://localhost:3306/TestDB``) plus ``username``
and ``password`` elements.  The same URLs work here; the drivers are psycopg 3 (PostgreSQL) and PyMySQL
(MySQL and MariaDB).  Any element may read an environment variable, ``${NAME}``, so that passwords need
not live in app files.  Nothing here opens a connection.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import parse_qsl, unquote, urlsplit

import sqlalchemy as sa

from tiltframe.errors import DefinitionError, NotSupportedYet
from tiltframe.model.aggregations import StoreSpec
from tiltframe.store.credentials import mask_credentials

#: URL schemes (after an optional ``jdbc:``) and the SQLAlchemy driver each one uses.
SERVER_DRIVERS = {
    "postgresql": "postgresql+psycopg",
    "postgres": "postgresql+psycopg",
    "mysql": "mysql+pymysql",
    "mariadb": "mariadb+pymysql",
}
DEFAULT_PORTS = {"postgresql": 5432, "mysql": 3306, "mariadb": 3306}
#: JDBC options that also mean something to the Python drivers; others (useSSL, serverTimezone, ...)
#: configure the Java driver only and are left out.
_KEPT_OPTIONS = frozenset({"sslmode", "connect_timeout", "application_name", "charset"})
_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def expand_env(value: str | None, element: str) -> str | None:
    """``value`` with each ``${NAME}`` replaced by that environment variable (an error if unset)."""
    if value is None:
        return None

    def variable(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in os.environ:
            msg = f"@store({element}=...) reads the environment variable {name}, which is not set"
            raise DefinitionError(msg)
        return os.environ[name]

    return _ENV.sub(variable, value)


def store_target(spec: StoreSpec) -> Path | sa.URL:
    """The SQLite file or the server URL that ``spec`` names, checked but not opened."""
    kind = spec.type.strip().lower()
    if kind not in ("rdbms", "sqlite"):
        msg = (f"@store(type='{spec.type}') is not supported yet; use type='rdbms' with a PostgreSQL, "
               f"MySQL/MariaDB or SQLite jdbc.url, or no @store for the embedded store")
        raise NotSupportedYet(msg)
    url = (expand_env(spec.url, "jdbc.url") or "").strip()
    if not url:
        msg = f"@store(type='{spec.type}') needs jdbc.url, e.g. jdbc.url='jdbc:postgresql://localhost:5432/rollups'"
        raise DefinitionError(msg)
    lowered = url.lower()
    for prefix in ("jdbc:sqlite:", "sqlite:///"):
        if lowered.startswith(prefix):
            return _sqlite_file(url[len(prefix):], url)
    if kind == "sqlite" and ":" not in url.split("/", 1)[0]:
        return _sqlite_file(url, url)
    return _server_url(spec, url)


def _server_url(spec: StoreSpec, url: str) -> sa.URL:
    try:
        parts = urlsplit(url[len("jdbc:"):] if url.lower().startswith("jdbc:") else url)
    except ValueError as exc:  # an unclosed '[' of an IPv6 host
        msg = f"@store(jdbc.url='{hide_password(url)}') cannot be read as a URL: {exc}"
        raise DefinitionError(msg) from None
    scheme = parts.scheme.lower().split("+", 1)[0]
    if scheme not in SERVER_DRIVERS:
        known = "jdbc:postgresql://, jdbc:mysql://, jdbc:mariadb:// or jdbc:sqlite:"
        msg = f"@store(jdbc.url='{hide_password(url)}'): unknown database '{parts.scheme}'; expected {known}"
        raise NotSupportedYet(msg)
    database = unquote(parts.path.lstrip("/"))
    if not database or "/" in database:
        msg = (f"@store(jdbc.url='{hide_password(url)}') must name one database, as in "
               f"jdbc:{scheme}://host:port/DATABASE")
        raise DefinitionError(msg)
    options = dict(parse_qsl(parts.query))
    user = expand_env(spec.username, "username") or options.pop("user", None) or unquote(parts.username or "")
    password = expand_env(spec.password, "password") or options.pop("password", None) or unquote(
        parts.password or "")
    options.pop("user", None)
    options.pop("password", None)
    try:
        port = parts.port
    except ValueError:
        msg = f"@store(jdbc.url='{hide_password(url)}'): the port is not a number from 0 to 65535"
        raise DefinitionError(msg) from None
    canonical = "postgresql" if scheme == "postgres" else scheme
    return sa.URL.create(
        SERVER_DRIVERS[scheme],
        username=user or None,
        password=password or None,
        host=parts.hostname or "localhost",
        port=port or DEFAULT_PORTS[canonical],
        database=database,
        query={k: v for k, v in options.items() if k in _KEPT_OPTIONS},
    )


def _sqlite_file(rest: str, url: str) -> Path:
    """``PATH`` of ``jdbc:sqlite:PATH`` (relative to the current directory), without URL options."""
    rest = rest.split("?", 1)[0]
    if rest.lower().startswith("file:"):
        rest = rest[len("file:"):]
    if not rest or rest == ":memory:":
        msg = (f"@store(jdbc.url='{hide_password(url)}') must name a database file (an in-memory database "
               f"would be lost)")
        raise DefinitionError(msg)
    return Path(rest)


def hide_password(url: str | sa.URL) -> str:
    """``url`` fit for a message, a log line or an HTTP answer: every credential in it masked
    (``store.credentials``), whether or not it parses; a SQLAlchemy URL rendered with its password hidden
    first."""
    if isinstance(url, sa.URL):
        url = url.render_as_string(hide_password=True)
    return mask_credentials(url)
