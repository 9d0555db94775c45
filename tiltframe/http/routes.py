"""The HTTP API, the page and ``/metrics`` of ``tiltframe serve`` (FastAPI; docs/http.md).

Every error is JSON ``{"error", "line", "column", "hint"}`` with the status that says whose it is: 400 a
bad query or parameter, 401 a missing or wrong token, 404 an unknown aggregation, 503 a store that
cannot be read; never a stack trace (an unexpected failure is logged and answered 500 without one).
"""

from __future__ import annotations

import io
import logging
import re
import secrets
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import Depends, FastAPI, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import PlainTextResponse, Response
from fastapi.staticfiles import StaticFiles
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException

from tiltframe.errors import DefinitionError, StoreError, TiltframeError
from tiltframe.http.metrics import CountRequests, Metrics
from tiltframe.http.reader import NotFound, Reader
from tiltframe.http.status import skipped_document
from tiltframe.retrieval.formats import csv_text, records, records_json, to_json
from tiltframe.store.credentials import mask_credentials
from tiltframe.timeutil.parse import iso_ts

if TYPE_CHECKING:
    import pandas as pd

    from tiltframe.http.status import PipelineStatus
    from tiltframe.model.app import AppSpec

logger = logging.getLogger(__name__)

ARROW = "application/vnd.apache.arrow.stream"
FORMATS = ("json", "csv", "arrow")
_DID_YOU_MEAN = re.compile(r" — (did you mean '[^']*'\?)")


class QueryBody(BaseModel):
    """``POST /api/query``'s body."""

    query: str


class Json(Response):
    """JSON of whatever the stores and pandas give (Decimals, numpy scalars, NaN as null)."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return to_json(content, indent=None).encode()


def error_body(message: str, *, line: int | None = None, column: int | None = None,
               hint: str | None = None) -> dict[str, Any]:
    """The one error shape; a "did you mean" in the message becomes the hint; credentials masked."""
    message = mask_credentials(message)
    found = _DID_YOU_MEAN.search(message)
    if found and hint is None:
        hint = found.group(1)
    return {"error": message, "line": line, "column": column, "hint": hint}


def answer_json(frame: pd.DataFrame, zone: str) -> str:
    """``POST /api/query``'s JSON: ``{"columns", "zone", "rows"}``, the rows written by pandas at once."""
    head = to_json({"columns": [str(c) for c in frame.columns], "zone": zone}, indent=None)
    return f'{head[:-1]},"rows":{records_json(frame)}}}'


def create_app(app_spec: AppSpec, data_dir: str | Path, *, token: str | None = None,
               status: PipelineStatus | None = None, metrics: Metrics | None = None,
               keep_answers: bool = True) -> FastAPI:
    """The server of ``app_spec``'s data in ``data_dir`` (read-only).  ``status`` is the pipeline running
    in this process (``tiltframe run --serve``), if any; ``token``: every API request needs
    ``Authorization: Bearer <token>`` (the page's static files need none: they hold no data);
    ``keep_answers``: give an answer again while the embedded store is unchanged (``http.reader``)."""
    metrics = metrics or Metrics()
    reader = Reader(app_spec, data_dir, metrics, keep_answers=keep_answers)
    metrics.watch_store(reader.infos, lambda: _watermarks(status))
    server = FastAPI(title="tiltframe", summary="Rollups of event streams: retrieval, series, status, metrics",
                     version=_version())
    server.state.reader = reader
    server.state.metrics = metrics
    server.router.on_shutdown.append(reader.close)

    async def authorized(request: Request) -> None:  # async: FastAPI would run a plain def on a worker thread
        if token is None:
            return
        given = request.headers.get("authorization", "")
        scheme, _, value = given.partition(" ")
        if scheme.lower() != "bearer" or not secrets.compare_digest(value.strip().encode(), token.encode()):
            raise _Unauthorized("missing or wrong token" if given else "this server needs a token")

    auth = [Depends(authorized)]

    server.add_middleware(CountRequests, metrics=metrics)

    _errors(server)

    @server.get("/api/aggregations", dependencies=auth, response_class=Json)
    def aggregations() -> Any:
        """Each aggregation (keys, measures, granularities, zone, stored range and rows per level, event
        counts), the continuous queries and the tables."""
        return Json(reader.catalog())

    @server.get("/api/aggregations/{name}", dependencies=auth, response_class=Json)
    def aggregation(name: str) -> Any:
        """One aggregation, as in the list."""
        return Json(reader.aggregation(name))

    @server.get("/api/aggregations/{name}/series", dependencies=auth, response_class=Json)
    def series(
        name: str,
        per: str | None = None,
        measure: str | None = None,
        start: str | None = None,
        end: str | None = None,
        within: Annotated[list[str] | None, Query()] = None,
        on: str | None = None,
        max_series: Annotated[int, Query(ge=1, le=1000)] = 10,
    ) -> Any:
        """One measure per ``per`` bucket and key, for a chart: ``points`` are ``[AGG_TIMESTAMP, value]``.
        The range is ``within`` (a pattern, or a start and an end, as in a query) or ``start`` / ``end``
        (ISO-8601 or epoch ms; GMT unless an offset is given), else everything stored; ``on`` filters as
        a query's ``on`` does."""
        s = reader.series(name, per=per, measure=measure, start=start, end=end, within=within, on=on,
                          max_series=max_series)
        return Json({
            "aggregation": s.aggregation, "per": s.per, "measure": s.measure, "zone": s.zone,
            "group_by": list(s.keys), "start": s.start, "end": s.end, "series": s.lines, "series_total": s.total,
        })

    @server.post("/api/query", dependencies=auth, response_class=Json)
    async def query(body: QueryBody, request: Request, format: str | None = None) -> Any:
        """Answer a retrieval (``from Agg within ... per ... select ...``) or ``SELECT ... FROM <table>``
        over a pre-aggregated table: JSON ``{"columns", "rows"}``, or ``?format=csv`` / ``arrow`` (or the
        Accept header ``text/csv`` / ``application/vnd.apache.arrow.stream``)."""
        fmt = format or _accepted(request.headers.get("accept", ""))
        if fmt not in FORMATS:
            raise TiltframeError(f"unknown format '{fmt}' (expected one of: {', '.join(FORMATS)})")
        # An answer kept while the store is unchanged goes back from the event loop; any other is computed on
        # a worker thread (a dashboard's repeated requests then never wait for a thread).
        content = reader.kept_encoded(body.query, fmt)
        if content is None:
            content = await run_in_threadpool(reader.encoded, body.query, _ENCODINGS[fmt], fmt)
        return Response(content, media_type=_MEDIA_TYPES[fmt])

    @server.get("/api/status", dependencies=auth, response_class=Json)
    def pipeline_status() -> Any:
        """The pipeline running in this process (null when the server runs alone) and each aggregation's
        committed totals in the store."""
        live = status.document() if status is not None else None
        stored: dict[str, Any] = {}
        for name, info in reader.infos():
            if isinstance(info, TiltframeError):
                stored[name] = {"error": mask_credentials(str(info))}
                continue
            doc = {"batches": info.batches, "events_read": info.events_read,
                   "events_aggregated": info.events_aggregated, "events_moved": info.events_moved,
                   "events_rejected": info.events_rejected, "events_per_second": None, "last_batch_at": None,
                   "values_skipped": skipped_document(info.values_skipped)}
            watermark = info.max_event_ts
            run = live["aggregations"].get(name) if live is not None else None
            if run is not None:
                doc |= {k: run[k] for k in ("events_per_second", "last_batch_at", "last_batch_seconds")}
                doc["run"] = run
                if run["watermark"] is not None:
                    watermark = max(watermark if watermark is not None else run["watermark"], run["watermark"])
            doc["watermark"] = watermark
            doc["watermark_time"] = iso_ts(watermark, reader.layout(name).zone)
            stored[name] = doc
        pipeline = None if live is None else {k: live[k] for k in ("running", "started_at", "uptime_seconds")}
        return Json({"pipeline": pipeline, "aggregations": stored})

    @server.get("/api/rejected/{name}", dependencies=auth, response_class=Json)
    def rejected(name: str, limit: Annotated[int, Query(ge=1, le=10_000)] = 100) -> Any:
        """The latest rejected (or moved) events of aggregation ``name``, newest first, with their reasons."""
        frame = reader.rejected(name, limit)
        zone = reader.layout(name).zone
        rows = records(frame)
        for row in rows:
            ts = row.get("event_timestamp")
            row["event_time"] = iso_ts(int(ts), zone) if ts is not None else None
        return Json({"aggregation": name, "rows": rows})

    @server.get("/metrics", dependencies=auth, include_in_schema=False)
    def prometheus() -> Response:
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    static = Path(str(resources.files("tiltframe.http") / "static"))
    if (static / "index.html").is_file():  # after the routes: the page's relative URLs (app.js, vendor/...)
        server.mount("/", StaticFiles(directory=static, html=True), name="page")
    else:  # a checkout whose page is missing: say so instead of a bare 404
        @server.get("/", include_in_schema=False)
        def no_page() -> PlainTextResponse:
            return PlainTextResponse("the page's files are missing from this installation (tiltframe/http/static); "
                                     "the API is at /api and /docs", status_code=404)
    return server


class _Unauthorized(TiltframeError):
    pass


def _errors(server: FastAPI) -> None:
    """Every failure as the one JSON error shape, with the status that says whose it is."""

    def reply(status_code: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> Response:
        return Json(body, status_code=status_code, headers=headers)

    @server.exception_handler(DefinitionError)
    async def definition(_: Request, exc: DefinitionError) -> Response:
        return reply(400, error_body(exc.message, line=exc.line, column=exc.column))

    @server.exception_handler(TiltframeError)
    async def tiltframe(_: Request, exc: TiltframeError) -> Response:
        if isinstance(exc, _Unauthorized):
            return reply(401, error_body(str(exc), hint="send the header 'Authorization: Bearer <token>'"),
                         {"WWW-Authenticate": "Bearer"})
        if isinstance(exc, NotFound):
            return reply(404, error_body(str(exc)))
        if isinstance(exc, StoreError):
            return reply(503, error_body(str(exc)))
        return reply(400, error_body(str(exc)))

    @server.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> Response:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
        return reply(400, error_body(f"invalid request: {problems}"))

    @server.exception_handler(StarletteHTTPException)
    async def http(_: Request, exc: StarletteHTTPException) -> Response:
        return reply(exc.status_code, error_body(str(exc.detail)), getattr(exc, "headers", None))

    @server.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> Response:
        logger.exception("%s %s failed", request.method, request.url.path)
        return reply(500, error_body(f"internal error ({type(exc).__name__}); the server's log has the details"))


def _csv(frame: pd.DataFrame, _: str) -> bytes:
    return csv_text(frame).encode()


def _json(frame: pd.DataFrame, zone: str) -> bytes:
    return answer_json(frame, zone).encode()


def _arrow(frame: pd.DataFrame, _: str) -> bytes:
    import pyarrow as pa

    table = pa.Table.from_pandas(frame, preserve_index=False)
    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue()


#: ``POST /api/query``'s answer in each format, encoded once per answer kept (``Reader.encoded``).
_ENCODINGS = {"json": _json, "csv": _csv, "arrow": _arrow}
_MEDIA_TYPES = {"json": "application/json", "csv": "text/csv; charset=utf-8", "arrow": ARROW}


def _accepted(accept: str) -> str:
    if ARROW in accept:
        return "arrow"
    if "text/csv" in accept:
        return "csv"
    return "json"


def _watermarks(status: PipelineStatus | None) -> dict[str, int | None]:
    if status is None:
        return {}
    return {name: a["watermark"] for name, a in status.document()["aggregations"].items()}


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("tiltframe")
    except PackageNotFoundError:
        return "0"
