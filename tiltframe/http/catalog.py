"""What an app offers a reader over HTTP: its aggregations with their stored ranges and counts, its
continuous queries and its pre-aggregated tables, as JSON-ready documents (``GET /api/aggregations``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tiltframe.aggregates.layout import AggregationLayout
from tiltframe.aggregates.registry import get
from tiltframe.timeutil.parse import iso_ts

if TYPE_CHECKING:
    from tiltframe.model.app import AppSpec
    from tiltframe.store.base import AggregationInfo

#: Result types a chart can draw.
NUMERIC = frozenset({"int", "long", "float", "double"})


def measures(layout: AggregationLayout) -> list[dict[str, Any]]:
    """Each column a retrieval returns beside the time and the keys: output name, function, type."""
    types = layout.output_types
    out: list[dict[str, Any]] = []
    for item in layout.spec.aggregates:
        for name in get(item.function).output_names(item.alias, layout.settings(item)):
            kind = types[name].value
            out.append({"name": name, "function": item.function, "type": kind, "numeric": kind in NUMERIC})
    for value in layout.values:
        out.append({"name": value.name, "function": None, "type": value.type.value,
                    "numeric": value.type.value in NUMERIC})
    return out


def aggregation_document(app: AppSpec, name: str, info: AggregationInfo) -> dict[str, Any]:
    """One aggregation: its definition (keys, measures, granularities, zone) and what the store holds."""
    layout = AggregationLayout.of(app, name)
    agg = layout.spec
    return {
        "name": agg.name,
        "source": agg.source,
        "group_by": [{"name": k.name, "type": k.type.value} for k in layout.keys],
        "measures": measures(layout),
        "granularities": [str(g) for g in agg.granularities],
        "zone": layout.zone,
        "tables": [
            {"table": t.table, "granularity": t.granularity, "rows": t.rows, "first_bucket": t.first_bucket,
             "last_bucket": t.last_bucket}
            for t in info.tables
        ],
        "first_event": info.min_event_ts,
        "last_event": info.max_event_ts,
        "first_event_time": iso_ts(info.min_event_ts, layout.zone),
        "last_event_time": iso_ts(info.max_event_ts, layout.zone),
        "batches": info.batches,
        "events": {"read": info.events_read, "aggregated": info.events_aggregated, "moved": info.events_moved,
                   "rejected": info.events_rejected},
        "rejected_by_reason": [{"reason": r, "events": n} for r, n in info.rejected_by_reason],
        "shards": list(info.shards),
    }


def continuous_documents(app: AppSpec) -> list[dict[str, Any]]:
    """The continuous queries: name, input stream, window, group by, emit policy and output columns (also
    ``tiltframe validate --format json``'s)."""
    out = []
    for i, q in enumerate(app.continuous):
        w, sizes = q.window, dict(q.window.sizes())
        out.append({
            "name": app.continuous_name(i),
            "source": q.stream,
            "window": w.kind,
            "size_ms": sizes.get("size"),
            "slide_ms": sizes.get("slide"),
            "gap_ms": sizes.get("gap"),
            "group_by": [str(e) for e in q.group_by],
            "emit": q.emit.policy.value if q.emit.policy is not None else None,
            "columns": list(q.output_names),
        })
    return out


def table_documents(app: AppSpec) -> list[dict[str, Any]]:
    """The defined tables: columns, and for a pre-aggregated one its interval, dimensions, measures and
    workers (also ``tiltframe validate --format json``'s)."""
    out = []
    for t in app.tables:
        pre = t.preaggregation
        out.append({
            "name": t.name,
            "columns": [{"name": c.name, "type": c.type.value} for c in t.columns],
            "time_column": t.time_column,
            "preaggregated": pre is not None,
            "interval": str(pre.granularity) if pre is not None else None,
            "dimensions": list(pre.dimensions) if pre is not None else [],
            "measures": [m.describe() for m in pre.measures] if pre is not None else [],
            "workers": pre.workers if pre is not None else None,
        })
    return out

