"""``tiltframe serve`` and ``tiltframe run --serve``: the HTTP API, the page and /metrics (docs/http.md)."""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING, Annotated

import typer

from tiltframe import api
from tiltframe.cli.failing import handle_errors
from tiltframe.cli.options import AppArg, DataDirOpt, resolve_data_dir
from tiltframe.cli.output import stderr_console

if TYPE_CHECKING:
    from pathlib import Path

    from rich.console import Console

    from tiltframe.http.server import BackgroundServer
    from tiltframe.http.status import PipelineStatus
    from tiltframe.model.app import AppSpec

HostOpt = Annotated[
    str, typer.Option("--host", help="The address to listen on; another than loopback wants a --token.")
]
TokenOpt = Annotated[
    str | None,
    typer.Option("--token", envvar="TILTFRAME_TOKEN", show_default=False,
                 help="Every API request then needs 'Authorization: Bearer TOKEN'."),
]


def serve(
    app_file: AppArg,
    data_dir: DataDirOpt = None,
    host: HostOpt = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", "-p", min=0, max=65535, help="The port (0: any free one).")] = 8000,
    token: TokenOpt = None,
) -> None:
    """Serve the store over HTTP (read-only): the query API (/api, OpenAPI at /docs), a page with charts
    (/) and Prometheus metrics (/metrics), until Ctrl-C."""
    from tiltframe.http.routes import create_app
    from tiltframe.http.server import bind, serve_on

    with handle_errors():
        spec = api.load_app(app_file)
        directory = resolve_data_dir(data_dir)
        sock = bind(host, port)
        server = create_app(spec, directory, token=token)
    err = stderr_console()
    announce(err, spec, directory, host, sock.getsockname()[1], token)
    serve_on(server, sock)
    err.print("stopped")


def serve_beside(spec: AppSpec, directory: Path, port: int, host: str, token: str | None,
                 status: PipelineStatus, err: Console) -> BackgroundServer:
    """The server on a thread of this process, for ``tiltframe run --serve`` (the caller stops it)."""
    from tiltframe.http.metrics import Metrics
    from tiltframe.http.routes import create_app
    from tiltframe.http.server import BackgroundServer

    metrics = Metrics()
    status.listeners.append(metrics.on_batch)
    server = BackgroundServer(create_app(spec, directory, token=token, status=status, metrics=metrics), host, port)
    announce(err, spec, directory, host, server.port, token)
    return server.start()


def announce(err: Console, spec: AppSpec, directory: Path, host: str, port: int, token: str | None) -> None:
    """Where to point a browser, and a warning when the data is open to the network."""
    shown = f"[{host}]" if ":" in host else host
    names = ", ".join(a.name for a in spec.aggregations) or "no aggregation"
    err.print(f"serving {names} from {directory} at http://{shown}:{port}/ (API docs /docs, metrics /metrics)",
              highlight=False, soft_wrap=True)
    if token is None and not _loopback(host):
        err.print(f"warning: serving on {host} without a token: anyone who reaches this port reads the data "
                  f"(give --token or $TILTFRAME_TOKEN)", style="yellow", highlight=False, soft_wrap=True)


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
