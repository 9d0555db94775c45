"""Answer a retrieval: resolve ``within``/``per``, read the per-granularity table (without ``per``: the
tiles of the range, ``retrieval.range_totals``), merge, finalize and filter by ``on``; the query section
(select, group by, having, order by, limit, offset) is :mod:`tiltframe.retrieval.answer`'s.

Beside ``AGG_TIMESTAMP`` (epoch ms, as Siddhi returns it) every answer can show ``AGG_TIME``, the bucket
start as a datetime in the aggregation's zone (or the zone ``per`` names): in the answer without
``select``, or selected by name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from tiltframe.aggregates.layout import AGG_TIMESTAMP, AggregationLayout
from tiltframe.errors import DefinitionError, QueryError
from tiltframe.model.durations import Granularity, parse_per
from tiltframe.model.expressions import Attr, Expr, Literal, attributes_of
from tiltframe.model.queries import RetrievalQuery
from tiltframe.retrieval.answer import answer
from tiltframe.retrieval.evaluate import holds, is_request_attr
from tiltframe.retrieval.pushdown import pinned_keys
from tiltframe.retrieval.range_totals import other_zone_buckets, rows_of_ranges
from tiltframe.store.base import Store
from tiltframe.store.reads.pandas_merges import finalize, merge_rows
from tiltframe.timeutil.ranges import instant, within_range
from tiltframe.timeutil.time_columns import AGG_TIME, aware_times


@dataclass(frozen=True, slots=True)
class Resolved:
    """The concrete range and granularity of one retrieval request: a level of the aggregation, or None
    for the totals of the range, or of each bucket of ``built`` (a duration in another zone)."""

    start_ms: int
    end_ms: int
    granularity: Granularity | None
    built: tuple[Granularity, str] | None = None


class RequestRejected(QueryError):
    """A request event whose values cannot be answered (a ``per`` that is no duration, a start after the
    end): the retrieval join records it with ``reason``, ``field`` and ``value`` and answers the others."""

    def __init__(self, reason: str, field: str | None, value: str | None) -> None:
        self.reason, self.field, self.value = reason, field, value
        super().__init__(reason)


def _operand(expr: Expr, query: RetrievalQuery, request: Mapping[str, Any] | None) -> Any:
    if isinstance(expr, Literal):
        return expr.value
    if isinstance(expr, Attr) and is_request_attr(expr, query) and request is not None:
        if expr.name not in request:
            msg = f"request event has no attribute '{expr.name}'"
            raise QueryError(msg)
        return request[expr.name]
    msg = f"'{expr}' in within/per needs a request event"
    raise QueryError(msg)


def _from_request(exprs: Sequence[Expr], query: RetrievalQuery) -> list[str]:
    """The request attributes among ``exprs`` (none in on-demand form)."""
    return [e.name for e in exprs if isinstance(e, Attr) and is_request_attr(e, query)]


def _rejected(fields: Sequence[str], values: Sequence[Any], problem: str) -> RequestRejected:
    """The request's ``fields`` (with their ``values``) cannot be answered: ``problem`` (``is not ...``
    after one field's value, a message of its own after several fields)."""
    if len(fields) == 1:
        reason = f"field '{fields[0]}': value {values[0]!r} {problem}"
    else:
        reason = f"fields {', '.join(repr(f) for f in fields)}: {problem}"
    return RequestRejected(reason, ", ".join(fields), ", ".join(str(v) for v in values))


def _range(layout: AggregationLayout, query: RetrievalQuery, values: Sequence[Any]) -> tuple[int, int]:
    """``within``'s ``[start, end)``; a request's bound that is no time, or bounds out of order, named."""
    try:
        return within_range(*values, zone=layout.zone)
    except QueryError as exc:
        fields = _from_request(query.within, query)
        if not fields:
            raise
        problem = exc.args[0] if exc.args else str(exc)
    bounds = [(e.name, v) for e, v in zip(query.within, values, strict=True)
              if isinstance(e, Attr) and is_request_attr(e, query)]
    if len(values) == 2:  # the bound that is no time, else the order of the two
        for name, value in bounds:
            try:
                instant(value, zone=layout.zone)
            except QueryError as bad:
                raise _rejected([name], [value], f"is not a time ({bad})") from None
    if len(bounds) == 1:
        problem = f"does not make a range: {problem}"
    raise _rejected([n for n, _ in bounds], [v for _, v in bounds], problem) from None


def resolve(layout: AggregationLayout, query: RetrievalQuery, request: Mapping[str, Any] | None = None) -> Resolved:
    """``within`` as ``[start, end)`` in epoch ms, and ``per`` as one of the aggregated granularities, or
    as a duration of another zone (``"days in Asia/Kolkata"``), or absent (the totals of the range).

    Raises:
        RequestRejected: a request attribute's value cannot be answered (naming the attribute and value).
        QueryError: the query itself cannot be answered.
    """
    values = [_operand(w, query, request) for w in query.within]
    start, end = _range(layout, query, values)
    if query.per is None:
        return Resolved(start, end, None)
    per = _operand(query.per, query, request)
    fields = _from_request([query.per], query)
    if not isinstance(per, str):
        msg = f"per takes a duration name such as \"days\", got {per!r}"
        raise _rejected(fields, [per], "is not a duration name such as \"days\"") if fields else QueryError(msg)
    try:
        g, zone = parse_per(per)
        if zone is None or (zone == layout.zone.strip() and g in layout.spec.granularities):
            return Resolved(start, end, layout.spec.granularity(g))
    except (DefinitionError, QueryError) as exc:
        message = exc.message if isinstance(exc, DefinitionError) else str(exc)
        if fields:
            raise _rejected(fields, [per], f"is not a duration aggregation {layout.name} keeps ({message})") from None
        raise QueryError(message) from None
    return Resolved(start, end, None, (g, zone))


def retrieve(
    layout: AggregationLayout,
    store: Store,
    query: RetrievalQuery,
    request: Mapping[str, Any] | None = None,
) -> pd.DataFrame:
    """The rows a retrieval query returns for one request (or for none, in on-demand form)."""
    r = resolve(layout, query, request)
    keys = pinned_keys(layout, query, request)
    if r.granularity is not None:
        rows = store.read(layout, r.granularity, r.start_ms, r.end_ms, keys=keys)
    elif r.built is None:  # one range: its tiles' rows merge per group as if one bucket spanned it
        rows = rows_of_ranges(layout, store, [(r.start_ms, r.end_ms)], keys)
    else:
        rows = rows_of_ranges(layout, store, other_zone_buckets(layout, store, r.start_ms, r.end_ms, *r.built), keys)
    final = finalize(merge_rows(rows, layout), layout)
    _mask_incomplete(final, layout, store.complete_from(layout))
    if _reads_agg_time(query):
        final.insert(1, AGG_TIME, aware_times(final[AGG_TIMESTAMP], r.built[1] if r.built else layout.zone))
    if not _in_key_order(final):
        final = final.sort_values(list(layout.key_names), kind="stable").reset_index(drop=True)
    if query.on is not None and not final.empty:
        keep = holds(query.on, final, query, request)
        if not keep.all():
            final = final[keep]
    return answer(final, layout, query, request)


def _mask_incomplete(final: pd.DataFrame, layout: AggregationLayout, complete_from: Mapping[str, int]) -> None:
    """NULL for each measure in the rows (buckets, or ranges) that start before it is complete: they hold
    events aggregated before it was added (``tiltframe migrate``), so any value would be partial."""
    if final.empty:
        return
    starts = final[AGG_TIMESTAMP].to_numpy()
    for measure, since in complete_from.items():
        early = starts < since
        if early.any():
            for name in layout.outputs_of(measure):
                if name in final.columns:
                    column = final[name]
                    if column.dtype.kind in "iub":  # NumPy's integers and booleans hold no NULL
                        column = column.astype("Int64" if column.dtype.kind != "b" else "boolean")
                    final[name] = column.mask(early, None)


def _reads_agg_time(query: RetrievalQuery) -> bool:
    """Whether the answer shows ``AGG_TIME`` or a clause reads it (its zone-aware times cost a tenth of a
    small retrieval, so they are made only then)."""
    if query.select is None:
        return True
    exprs = [*(i.expr for i in query.select), *query.group_by, *(o.expr for o in query.order_by),
             *(e for e in (query.on, query.having) if e is not None)]
    return any(a.name == AGG_TIME for e in exprs for a in attributes_of(e))


def _in_key_order(final: pd.DataFrame) -> bool:
    """Rows already in (bucket, keys) order, certainly: buckets strictly increasing (one key's rows)."""
    buckets = final[AGG_TIMESTAMP].to_numpy()
    return bool((buckets[1:] > buckets[:-1]).all())
