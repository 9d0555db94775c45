"""A PostgreSQL or MariaDB server of a test's own, which the test may stop and start at will.

The tests of runs that outlive a database restart stop their server for half a minute. Stopping the
shared test servers (``scripts/services.sh``) would fail every other test of the parallel suite, so each
such test gets a server of its own: the same Debian packages, a data directory in a temporary folder, a
free port on loopback and the ``tiltframe`` login. It takes a few seconds to create, needs root (the
servers run as their system users) and is removed afterwards.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest

USER = PASSWORD = DATABASE = "tiltframe"
WAIT_S = 60


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(*args: str, user: str | None = None, **kwargs) -> subprocess.CompletedProcess:
    command = ["runuser", "-u", user, "--", *args] if user else list(args)
    return subprocess.run(command, check=True, capture_output=True, text=True, timeout=WAIT_S, **kwargs)


def _wait_for(condition, what: str, log: Path) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if time.monotonic() > deadline:
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else "(no log)"
            raise RuntimeError(f"{what} did not happen within {WAIT_S} s; its log ends with:\n{tail}")
        time.sleep(0.2)


class PrivateServer(ABC):
    """One server in ``folder`` on 127.0.0.1:``port``: ``start``, ``stop`` and its JDBC ``url``."""

    kind = ""

    def __init__(self, folder: Path) -> None:
        self.folder, self.port = folder, _free_port()

    @property
    def url(self) -> str:
        return f"jdbc:{self.kind}://127.0.0.1:{self.port}/{DATABASE}?user={USER}&password={PASSWORD}"

    @abstractmethod
    def create(self) -> None: ...

    @abstractmethod
    def start(self) -> None: ...

    @abstractmethod
    def stop(self) -> None: ...


class PrivatePostgres(PrivateServer):
    kind = "postgresql"

    def __init__(self, folder: Path) -> None:
        super().__init__(folder)
        (binary,) = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"))[-1:] or [None]
        if binary is None:
            raise RuntimeError("no PostgreSQL server under /usr/lib/postgresql (scripts/services.sh installs it)")
        self.bin, self.data, self.log = Path(binary).parent, folder / "data", folder / "server.log"

    def _ctl(self, *args: str) -> None:
        _run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-w", "-t", str(WAIT_S), *args,
             user="postgres")

    def create(self) -> None:
        shutil.chown(self.folder, "postgres", "postgres")
        _run(str(self.bin / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync",
             user="postgres")
        self.start()
        sql = (f"CREATE ROLE {USER} LOGIN CREATEDB PASSWORD '{PASSWORD}';"
               f"CREATE DATABASE {DATABASE} OWNER {USER};")
        for statement in sql.split(";")[:-1]:
            _run(str(self.bin / "psql"), "-X", "-q", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres",
                 "-d", "postgres", "-c", statement, user="postgres")

    def start(self) -> None:
        options = f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._ctl("-o", options, "start")

    def stop(self) -> None:
        self._ctl("-m", "fast", "stop")


class PrivateMariaDB(PrivateServer):
    kind = "mysql"

    def __init__(self, folder: Path) -> None:
        super().__init__(folder)
        self.data, self.log, self.sock = folder / "data", folder / "server.log", folder / "mysqld.sock"
        self.process: subprocess.Popen | None = None

    def _admin(self, *args: str) -> list[str]:
        return [*args, "--no-defaults", f"--socket={self.sock}", "--user=root"]

    def create(self) -> None:
        shutil.chown(self.folder, "mysql", "mysql")
        _run("mariadb-install-db", "--no-defaults", "--user=mysql", f"--datadir={self.data}",
             "--auth-root-authentication-method=socket", "--skip-test-db")
        self.start()
        sql = (f"CREATE DATABASE {DATABASE}; CREATE USER '{USER}'@'127.0.0.1' IDENTIFIED BY '{PASSWORD}'; "
               f"GRANT ALL PRIVILEGES ON *.* TO '{USER}'@'127.0.0.1';")
        _run(*self._admin("mariadb"), "-e", sql)

    def start(self) -> None:
        self.process = subprocess.Popen(
            ["mariadbd", "--no-defaults", "--user=mysql", f"--datadir={self.data}", f"--port={self.port}",
             "--bind-address=127.0.0.1", f"--socket={self.sock}", f"--pid-file={self.folder / 'mysqld.pid'}",
             f"--log-error={self.log}", "--innodb-flush-log-at-trx-commit=2", "--local-infile=1"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        ping = [*self._admin("mariadb-admin"), "--connect-timeout=2", "ping"]
        _wait_for(lambda: subprocess.run(ping, capture_output=True).returncode == 0, "MariaDB's start", self.log)

    def stop(self) -> None:
        subprocess.run([*self._admin("mariadb-admin"), "shutdown"], capture_output=True, timeout=WAIT_S)
        if self.process is not None:
            self.process.wait(timeout=WAIT_S)
            self.process = None


KINDS: dict[str, type[PrivateServer]] = {"postgresql": PrivatePostgres, "mysql": PrivateMariaDB}


@contextmanager
def private_server(kind: str) -> Iterator[PrivateServer]:
    """A running server of ``kind`` (``postgresql`` or ``mysql``) for this test alone, removed afterwards;
    skipped (a failure under CI) where it cannot be made: not root, or the packages are missing."""
    if os.geteuid() != 0 or not shutil.which("runuser"):
        message = "a private database server needs root (its daemon runs as the server's system user)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    folder = Path(tempfile.mkdtemp(prefix=f"tiltframe-{kind}-"))
    folder.chmod(0o755)
    server = KINDS[kind](folder)
    try:
        server.create()
        yield server
    finally:
        with suppress(subprocess.SubprocessError, RuntimeError):  # already stopped, or never started
            server.stop()
        shutil.rmtree(folder, ignore_errors=True)
