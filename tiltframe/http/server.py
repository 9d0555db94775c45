"""Run the HTTP server: in the foreground (``tiltframe serve``) or beside a pipeline in the same process
(``tiltframe run --serve``), on uvicorn."""

from __future__ import annotations

import logging
import socket
import threading
import time
from types import TracebackType

import uvicorn
from fastapi import FastAPI

from tiltframe.errors import UsageError

logger = logging.getLogger(__name__)


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` (0: any free port), bound before the server starts so that a
    port in use is a clear usage error and the chosen port is known at once."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP named: asyncio sets TCP_NODELAY only on connections of such a socket; without it each
    # answer (headers, then body) waits for the client's delayed ACK, ~40 ms a request on a kept-alive one.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        msg = f"cannot serve on {host}:{port}: {exc.strerror or exc}"
        raise UsageError(msg) from None
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def _config(app: FastAPI) -> uvicorn.Config:
    # uvicorn's own access log would go to stdout line by line; requests are counted in /metrics instead.
    return uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on", timeout_graceful_shutdown=5)


def serve_on(app: FastAPI, sock: socket.socket) -> None:
    """Serve on a bound socket (:func:`bind`) in the foreground until Ctrl-C or SIGTERM, then return: uvicorn
    finishes the requests under way and raises the signal again, which is the normal way to stop here."""
    try:
        uvicorn.Server(_config(app)).run(sockets=[sock])
    except KeyboardInterrupt:
        pass
    finally:
        sock.close()


class BackgroundServer:
    """The server on a thread of this process, started and stopped around a pipeline run or a test."""

    def __init__(self, app: FastAPI, host: str = "127.0.0.1", port: int = 0) -> None:
        self.sock = bind(host, port)
        self.host = host
        self.port = self.sock.getsockname()[1]
        self._server = uvicorn.Server(_config(app))
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self.sock]},
                                        name="tiltframe-http", daemon=True)

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def start(self, timeout: float = 30.0) -> BackgroundServer:
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                msg = f"the HTTP server did not start on {self.url}"
                raise UsageError(msg)
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self.sock.close()

    def __enter__(self) -> BackgroundServer:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()
