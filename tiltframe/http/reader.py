"""The server's reads: each store opened once, read-only, for the server's life, and the answers the routes
turn into JSON (queries, chart series, the catalog, rejected events), kept while the store is unchanged.

Nothing here writes: the stores are opened read-only, as ``tiltframe query`` opens them.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from functools import lru_cache, partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from tiltframe.aggregates.layout import AGG_TIMESTAMP, AggregationLayout
from tiltframe.errors import DefinitionError, QueryError, StoreError, TiltframeError, unknown
from tiltframe.http.catalog import aggregation_document, continuous_documents, measures, table_documents
from tiltframe.lang.siddhiql.parser import parse_retrieval, parse_table_query
from tiltframe.model.durations import Granularity
from tiltframe.retrieval.retrieve import retrieve
from tiltframe.store.credentials import mask_credentials
from tiltframe.store.open_stores import StoreRegistry
from tiltframe.timeutil.parse import iso_ts, parse_timestamp
from tiltframe.timeutil.ranges import within_range

if TYPE_CHECKING:
    import pandas as pd

    from tiltframe.http.metrics import Metrics
    from tiltframe.model.app import AppSpec
    from tiltframe.store.base import AggregationInfo, Store

#: Query texts kept parsed per server.
PARSED_QUERIES = 512
_AT = re.compile(r" at line \d+, column \d+")
#: Buckets per key a chart series may hold.
MAX_POINTS = 50_000
#: Answers kept per server while their store is unchanged, each of at most ``KEPT_ROWS`` rows.
KEPT_ANSWERS = 256
KEPT_ROWS = 100_000
T = TypeVar("T")
#: ``within`` of a series without a range: every bucket a store can hold (years 1 to 9999).
ALL_TIME = (-62_135_596_800_000, 253_402_300_800_000)


class NotFound(TiltframeError):
    """A name in the URL (an aggregation) that the app does not define: HTTP 404."""


@dataclass(frozen=True)
class Series:
    """A chart's data: one line of ``(AGG_TIMESTAMP, value)`` points per key, the first ``len(lines)`` of
    ``total`` keys in key order."""

    aggregation: str
    per: str
    measure: str
    zone: str
    keys: tuple[str, ...]
    start: int
    end: int
    lines: list[dict[str, Any]]
    total: int


class Reader:
    """Read-only access to the stores of one app for a server's life (thread-safe: each read is one
    transaction on a connection of its own)."""

    def __init__(self, app: AppSpec, data_dir: str | Path, metrics: Metrics | None = None, *,
                 keep_answers: bool = True) -> None:
        self.app = app
        self.data_dir = Path(data_dir)
        self.stores = StoreRegistry(self.data_dir, read_only=True)
        self.metrics = metrics
        # Dashboards send the same few queries again and again: parse and validate each text once (about a
        # third of a small retrieval's time).  Refused texts raise, and are not kept.
        self._retrieval = lru_cache(maxsize=PARSED_QUERIES)(partial(parse_retrieval, app=app))
        self._table_query = lru_cache(maxsize=PARSED_QUERIES)(partial(parse_table_query, app=app))
        # ... and ask the same of a store that has not changed (a page refreshes every 2 s): answers are kept
        # with the store's change token and given again while the token is the same (the embedded store's;
        # a server store has none, and is always asked).
        self._answers: OrderedDict[Hashable, tuple[object, Any, Store]] = OrderedDict()
        self._lock = threading.Lock()
        # Answers computed at once: one per core.  The server's threads (forty) computing together only take
        # the interpreter from each other, which cut the answers per second by more than half.
        self._computing = threading.BoundedSemaphore(os.cpu_count() or 1)
        self.keep_answers = keep_answers

    def _kept(self, key: Hashable, store: Store, compute: Callable[[], T], size: Callable[[T], int] = len) -> T:
        """``compute()``, or the answer kept for ``key`` while ``store`` has not changed since it was computed.
        The token is taken before computing, so a commit meanwhile makes the kept answer stale at once."""
        token = store.change_token() if self.keep_answers else None
        if token is None:
            with self._computing:
                return compute()
        found = self._fresh(key, token)
        if found is not None:
            return found[0]  # type: ignore[no-any-return]
        with self._computing:
            found = self._fresh(key, token)  # computed meanwhile by a request that came first (many after a commit)
            if found is not None:
                return found[0]  # type: ignore[no-any-return]
            value = compute()
        if size(value) <= KEPT_ROWS:
            with self._lock:
                self._answers[key] = (token, value, store)
                while len(self._answers) > KEPT_ANSWERS:
                    self._answers.popitem(last=False)
        return value

    def _fresh(self, key: Hashable, token: object) -> tuple[Any] | None:
        """The answer kept for ``key`` at ``token`` (in a tuple, since an answer may be None), or None."""
        with self._lock:
            kept = self._answers.get(key)
            if kept is None or kept[0] != token:
                return None
            self._answers.move_to_end(key)
            return (kept[1],)

    def close(self) -> None:
        self.stores.close()

    def layout(self, name: str) -> AggregationLayout:
        """The aggregation ``name`` (not a pre-aggregated table's rollup), or :class:`NotFound`."""
        if name not in {a.name for a in self.app.aggregations}:
            raise NotFound(unknown("aggregation", name, [a.name for a in self.app.aggregations]))
        return AggregationLayout.of(self.app, name)

    # --- catalog ------------------------------------------------------------------------------------------

    def info(self, name: str) -> AggregationInfo:
        layout = self.layout(name)
        store = self.stores.for_aggregation(layout.spec)
        return self._kept(("info", name), store, lambda: store.info(layout), size=_one)

    def infos(self) -> list[tuple[str, AggregationInfo | TiltframeError]]:
        """Each aggregation's info, or the error its store gave (for metrics: one bad store hides nothing else)."""
        out: list[tuple[str, AggregationInfo | TiltframeError]] = []
        for agg in self.app.aggregations:
            try:
                out.append((agg.name, self.info(agg.name)))
            except TiltframeError as exc:
                out.append((agg.name, exc))
        return out

    def catalog(self) -> dict[str, Any]:
        return {
            "aggregations": [self.aggregation(a.name) for a in self.app.aggregations],
            "continuous": continuous_documents(self.app),
            "tables": self.tables(),
        }

    def tables(self) -> list[dict[str, Any]]:
        """The defined tables, each with what the store holds of it: rows (partial rows of a pre-aggregated
        one, with its first and last interval), or the reason the store could not say."""
        from tiltframe.store.raw_rows import count_raw_rows

        docs = table_documents(self.app)
        for doc, table in zip(docs, self.app.tables, strict=True):
            try:
                store = self.stores.for_spec(table.store)
                if table.preaggregation is None:
                    doc["rows"] = self._kept(("raw rows", table.name), store, partial(count_raw_rows, store, table),
                                             size=_one)
                    continue
                layout = AggregationLayout.of(self.app, table.name)
                (stored,) = self._kept(("info", table.name), store, partial(store.info, layout), size=_one).tables
                doc |= {"rows": stored.rows, "first_interval": stored.first_bucket,
                        "last_interval": stored.last_bucket}
            except StoreError as exc:
                doc |= {"rows": None, "error": mask_credentials(str(exc))}
        return docs

    def aggregation(self, name: str) -> dict[str, Any]:
        return aggregation_document(self.app, name, self.info(name))

    def rejected(self, name: str, limit: int) -> pd.DataFrame:
        layout = self.layout(name)
        store = self.stores.for_aggregation(layout.spec)
        return self._kept(("rejected", name, limit), store, partial(store.rejected, layout, limit))

    # --- answers ------------------------------------------------------------------------------------------

    def kept_encoded(self, text: str, form: Hashable) -> Any | None:
        """The encoding :meth:`encoded` keeps for ``text`` while its store is unchanged, or None; reads no
        store (a few file stats), so the server's event loop may ask it before handing a request to a thread."""
        key = ("query", text, form)
        with self._lock:
            kept = self._answers.get(key)
        if kept is None or not self.keep_answers:
            return None
        token, (value, _, name), store = kept
        if store.change_token() != token:
            return None
        if self.metrics is not None:
            self.metrics.retrieval_seconds.labels(name).observe(0.0)
        return value

    def query(self, text: str) -> tuple[pd.DataFrame, str]:
        """The answer of a retrieval or of ``SELECT ... FROM <table>``, and the zone of its times."""
        return self.encoded(text, lambda frame, zone: (frame, zone), "frame")

    def encoded(self, text: str, encode: Callable[[pd.DataFrame, str], T], form: Hashable) -> T:
        """``encode(answer, zone)`` of the answer to ``text``, kept as encoded (``form`` names the encoding)
        while the store is unchanged: a repeated request then costs neither the retrieval nor the encoding."""
        from tiltframe.retrieval.select import select

        if text.lstrip()[:6].lower() == "select":  # SQL over a pre-aggregated table
            q = self._table_query(text)
            store = self.stores.for_spec(self.app.table(q.table).store)
            name, zone, compute = q.table, self.app.timezone or "UTC", partial(select, self.app, q, store)
        else:
            retrieval = self._retrieval(text)
            if retrieval.request_stream is not None:
                raise QueryError(f"this query joins request stream {retrieval.request_stream}; ask in the "
                                 f"on-demand form (from ...)")
            layout = AggregationLayout.of(self.app, retrieval.aggregation)
            store = self.stores.for_aggregation(layout.spec)
            name, zone, compute = layout.name, layout.zone, partial(retrieve, layout, store, retrieval)

        def answer() -> tuple[T, int, str]:
            frame = compute()
            return encode(frame, zone), len(frame), name

        with self._timed(name):
            return self._kept(("query", text, form), store, answer, size=_rows)[0]

    def series(self, name: str, *, per: str | None, measure: str | None, start: str | None = None,
               end: str | None = None, within: list[str] | None = None, on: str | None = None,
               max_series: int = 10) -> Series:
        """One measure per ``per`` bucket and key over a range (default: everything stored), for charts.

        ``on`` is a condition in the query language (``symbol == "IBM"``); its errors point into it.
        """
        layout = self.layout(name)
        g = _granularity(layout, per)
        numeric = [m["name"] for m in measures(layout) if m["numeric"]]
        if measure is None:
            if not numeric:
                raise QueryError(f"aggregation {name} has no numeric measure to draw")
            measure = numeric[0]
        elif measure not in numeric:
            raise QueryError(unknown("numeric measure of " + name, measure, numeric))
        s, e = _range(start, end, within, layout.zone)
        self._check_points(name, g, s, e)
        keys = [k.name for k in layout.keys]
        prefix = f"from {name} on "
        rest = f"within {s}L, {e}L per \"{g}\" select {', '.join([AGG_TIMESTAMP, *keys, measure])}"
        text = f"{prefix}{on}\n{rest}" if on else f"from {name} {rest}"
        try:
            query = self._retrieval(text)
        except DefinitionError as exc:
            if on and exc.line is not None and exc.column is not None and (exc.line, exc.column) > (1, len(prefix)):
                column = exc.column - len(prefix) if exc.line == 1 else exc.column
                message = _AT.sub("", exc.message)  # the place is the composed text's: given as line and column
                raise DefinitionError(f"in on: {message}", line=exc.line, column=column) from None
            raise
        if on and dataclasses.replace(query, on=None) != self._retrieval(f"from {name} {rest}"):
            raise QueryError("on takes one condition on the group-by attributes (a comment or a clause of its "
                             "own would change the series' query)")
        store = self.stores.for_aggregation(layout.spec)
        with self._timed(name):
            frame = self._kept(("query", text), store, partial(retrieve, layout, store, query))
        groups = frame.groupby(keys, sort=True, dropna=False) if keys else [((), frame)]
        lines: list[dict[str, Any]] = []
        total = 0
        for key, rows in groups:
            total += 1
            if len(lines) >= max_series:
                continue
            values = key if isinstance(key, tuple) else (key,)
            lines.append({
                "key": dict(zip(keys, (_plain(v) for v in values), strict=True)),
                "label": ", ".join(str(_plain(v)) for v in values) or measure,
                "points": [[int(t), _plain(v)] for t, v in zip(rows[AGG_TIMESTAMP], rows[measure], strict=True)],
            })
        return Series(name, str(g), measure, layout.zone, tuple(keys), s, e, lines, total)

    def _check_points(self, name: str, g: Granularity, start: int, end: int) -> None:
        """Refuse a series of more than ``MAX_POINTS`` buckets per key (a chart draws no more, and reading
        them would hold the server): a year of seconds asks for 31 million.  Open sides reach as far as the
        level's stored buckets; months and years, whose lengths vary, are never that many."""
        if g.unit.fixed_ms is None:
            return
        length = g.unit.fixed_ms * g.multiple
        lo, hi = start, end
        if start == ALL_TIME[0] or end == ALL_TIME[1]:
            stored = next((t for t in self.info(name).tables if t.granularity == str(g)), None)
            if stored is None or stored.first_bucket is None or stored.last_bucket is None:
                return
            lo, hi = max(lo, stored.first_bucket), min(hi, stored.last_bucket + length)
        buckets = (hi - lo) // length
        if buckets > MAX_POINTS:
            raise QueryError(f"per \"{g}\" from {iso_ts(lo)} to {iso_ts(hi)} is {buckets:,} buckets for each key, "
                             f"more than the {MAX_POINTS:,} a series holds: narrow the range or choose a coarser per "
                             f"(POST /api/query answers any size, as Arrow too)")

    def _timed(self, name: str) -> _Timer:
        return _Timer(self.metrics, name)


class _Timer:
    """Observes a retrieval's latency into the metrics (when there are any)."""

    def __init__(self, metrics: Metrics | None, name: str) -> None:
        self.metrics, self.name, self.started = metrics, name, 0.0

    def __enter__(self) -> None:
        self.started = time.perf_counter()

    def __exit__(self, *exc: object) -> None:
        if self.metrics is not None:
            self.metrics.retrieval_seconds.labels(self.name).observe(time.perf_counter() - self.started)


def _one(_: object) -> int:
    return 1


def _rows(answer: tuple[object, int, str]) -> int:
    return answer[1]


def _granularity(layout: AggregationLayout, per: str | None) -> Granularity:
    if per is None:
        return layout.spec.granularities[-1]
    try:
        return layout.spec.granularity(Granularity.parse(per))
    except DefinitionError as exc:
        raise QueryError(f"per: {exc.message}") from None


def _range(start: str | None, end: str | None, within: list[str] | None, zone: str) -> tuple[int, int]:
    """``[start, end)`` in epoch ms from ``within`` (a period, or two times) or ``start`` / ``end`` (ISO
    times or epoch ms; an open side reaches as far as a store can hold); no offset: ``zone``."""
    if within:
        if start is not None or end is not None:
            raise QueryError("give either within or start/end, not both")
        if len(within) > 2:
            raise QueryError(f"within takes a pattern or a start and an end, got {len(within)} values")
        return within_range(*within, zone=zone)
    s = parse_timestamp(start, zone) if start else ALL_TIME[0]
    e = parse_timestamp(end, zone) if end else ALL_TIME[1]
    if s >= e:
        raise QueryError(f"start {start!r} must be before end {end!r} (the range is [start, end))")
    return s, e


def _plain(value: Any) -> Any:
    """A JSON-ready scalar: numpy scalars as Python ones, NaN and pandas' NA (a NULL of the nullable arrays
    sketch quantiles come in) as None."""
    if type(value).__name__ == "NAType":  # pandas is not imported for this
        return None
    item = getattr(value, "item", None)
    if callable(item) and type(value).__module__ == "numpy":
        value = item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value

