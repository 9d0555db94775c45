"""``GET /metrics``: Prometheus metrics of the store, the pipeline running in this process and the server.

Three sources, one registry per server (never the global one, so several servers live in one process):

- the store's committed totals per aggregation (events read, aggregated, moved, rejected by reason,
  batches, rows per level, latest event time), read when Prometheus scrapes: they survive restarts and
  agree with ``tiltframe inspect``;
- this process's micro-batches (duration histogram, rows written, store write seconds, watermark lag),
  fed by the run's ``on_batch``;
- the server's requests (count by route and status, latency) and retrievals (latency by aggregation).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from tiltframe.engine.rollup.reports import BatchReport
from tiltframe.errors import TiltframeError
from tiltframe.store.credentials import mask_credentials

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

    from tiltframe.store.base import AggregationInfo

logger = logging.getLogger(__name__)

#: Retrievals answer in milliseconds, micro-batches in seconds to minutes.
RETRIEVAL_BUCKETS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
BATCH_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)


class _StoreCollector(Collector):
    """The store's committed figures, read at each scrape through ``infos`` (name -> info, or the error
    that kept the store from answering)."""

    def __init__(self, infos: Callable[[], Iterable[tuple[str, AggregationInfo | TiltframeError]]],
                 watermarks: Callable[[], dict[str, int | None]]) -> None:
        self._infos = infos
        self._watermarks = watermarks

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily("tiltframe_store_up", "1 when the aggregation's store answered this scrape",
                               labels=["aggregation"])
        families = {
            key: CounterMetricFamily(f"tiltframe_events_{key}", f"Events {key} by committed micro-batches",
                                     labels=["aggregation"])
            for key in ("read", "aggregated", "moved", "rejected")
        }
        reasons = CounterMetricFamily("tiltframe_events_rejected_by_reason", "Rejected events by reason",
                                      labels=["aggregation", "reason"])
        batches = CounterMetricFamily("tiltframe_batches_committed", "Micro-batches committed to the store",
                                      labels=["aggregation"])
        rows = GaugeMetricFamily("tiltframe_rollup_rows", "Rows stored per granularity",
                                 labels=["aggregation", "granularity"])
        latest = GaugeMetricFamily("tiltframe_latest_event_timestamp_seconds",
                                   "Greatest event time aggregated (epoch seconds)", labels=["aggregation"])
        lag = GaugeMetricFamily("tiltframe_watermark_lag_seconds",
                                "Wall-clock time minus the greatest event time aggregated", labels=["aggregation"])
        live = self._watermarks()
        now = time.time()
        for name, info in self._infos():
            if isinstance(info, TiltframeError):
                up.add_metric([name], 0)
                logger.warning("metrics: the store of %s cannot be read: %s", name, mask_credentials(str(info)))
                continue
            up.add_metric([name], 1)
            for key, value in (("read", info.events_read), ("aggregated", info.events_aggregated),
                               ("moved", info.events_moved), ("rejected", info.events_rejected)):
                families[key].add_metric([name], value)
            for reason, n in info.rejected_by_reason:
                reasons.add_metric([name, reason], n)
            batches.add_metric([name], info.batches)
            for t in info.tables:
                rows.add_metric([name, t.granularity], t.rows)
            watermark = live.get(name) or info.max_event_ts
            if watermark is not None:
                latest.add_metric([name], watermark / 1000)
                lag.add_metric([name], now - watermark / 1000)
        yield from (up, *families.values(), reasons, batches, rows, latest, lag)


class Metrics:
    """The server's registry and the instruments the pipeline and the request handlers feed."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.batch_seconds = Histogram("tiltframe_batch_duration_seconds", "Micro-batch duration (Spark and store)",
                                       ["aggregation"], buckets=BATCH_BUCKETS, registry=r)
        self.rows_written = Counter("tiltframe_rows_written", "Rollup rows written by this process",
                                    ["aggregation"], registry=r)
        self.store_seconds = Counter("tiltframe_store_write_seconds", "Seconds spent writing to the store",
                                     ["aggregation"], registry=r)
        self.batch_events = Counter("tiltframe_process_events_read", "Events read by this process's micro-batches",
                                    ["aggregation"], registry=r)
        self.retrieval_seconds = Histogram("tiltframe_retrieval_duration_seconds", "Retrieval latency",
                                           ["aggregation"], buckets=RETRIEVAL_BUCKETS, registry=r)
        self.requests = Counter("tiltframe_http_requests", "HTTP requests", ["method", "route", "status"],
                                registry=r)
        self.request_seconds = Histogram("tiltframe_http_request_duration_seconds", "HTTP request latency",
                                         ["route"], buckets=RETRIEVAL_BUCKETS, registry=r)

    def watch_store(self, infos: Callable[[], Iterable[tuple[str, AggregationInfo | TiltframeError]]],
                    watermarks: Callable[[], dict[str, int | None]]) -> None:
        """Report the store's figures at each scrape (see :class:`_StoreCollector`)."""
        self.registry.register(_StoreCollector(infos, watermarks))

    def on_batch(self, r: BatchReport) -> None:
        """The run's ``on_batch``: one micro-batch's duration, rows and store time."""
        if r.skipped:
            return
        self.batch_seconds.labels(r.aggregation).observe(r.seconds)
        self.rows_written.labels(r.aggregation).inc(r.rows_written)
        self.store_seconds.labels(r.aggregation).inc(r.store_seconds)
        self.batch_events.labels(r.aggregation).inc(r.stats.events_read)


class CountRequests:
    """ASGI middleware feeding the request count (by method, route and status) and latency of ``metrics``.

    Plain ASGI rather than Starlette's ``BaseHTTPMiddleware``, which added about half a millisecond to every
    request (a task and a stream per call).  A request that fails without an answer counts as a 500.
    """

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            route: Any = scope.get("route")
            path = getattr(route, "path", None) or "/"  # the page's files have no route of their own
            self.metrics.requests.labels(scope["method"], path, str(status)).inc()
            self.metrics.request_seconds.labels(path).observe(time.perf_counter() - started)
