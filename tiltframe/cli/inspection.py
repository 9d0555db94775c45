"""``tiltframe inspect``: what the store holds for each aggregation, as tables or as one JSON document."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from tiltframe.cli.options import store_location
from tiltframe.cli.output import cell, ts_or_none
from tiltframe.model.lateness import Lateness
from tiltframe.model.retention import Retention
from tiltframe.retrieval.formats import records
from tiltframe.timeutil.parse import format_ts

if TYPE_CHECKING:
    import pandas as pd

    from tiltframe.engine.inputs.file_manifest import ChangedFile
    from tiltframe.model.aggregations import AggregationSpec
    from tiltframe.model.app import AppSpec
    from tiltframe.store.base import AggregationInfo, SkippedValues


def info_document(
    spec: AppSpec, agg: AggregationSpec, info: AggregationInfo, rejected: pd.DataFrame, data_dir: Path,
    changed: Sequence[ChangedFile] = (),
) -> dict[str, Any]:
    """One aggregation's inspection as JSON-ready data (numbers as the store gave them: see ``to_json``)."""
    doc = dataclasses.asdict(info)
    doc["files_changed"] = [{**dataclasses.asdict(c), "message": c.message} for c in changed]
    doc["rejected_by_reason"] = [{"reason": r, "events": n} for r, n in info.rejected_by_reason]
    for t in doc["tables"]:
        t["first_bucket_gmt"] = ts_or_none(t["first_bucket"])
        t["last_bucket_gmt"] = ts_or_none(t["last_bucket"])
    doc["min_event_time_gmt"] = ts_or_none(info.min_event_ts)
    doc["max_event_time_gmt"] = ts_or_none(info.max_event_ts)
    doc["store"] = str(store_location(spec, agg, data_dir))
    doc["latest_rejected"] = records(rejected)
    doc["complete_from"] = [{"measure": m, "complete_from": at, "complete_from_gmt": ts_or_none(at)}
                            for m, at in info.complete_from]
    return doc


def skipped_table(values: Sequence[SkippedValues]) -> Table:
    """Per measure that takes an argument, the events whose argument was null or NaN, which it skipped: of
    the events aggregated in the batches that counted them, and how many batches did not count (committed
    by a version of tiltframe that did not, or before the measure was added): unknown."""
    table = Table(title="values skipped (argument null or NaN)", title_justify="left")
    table.add_column("measure", no_wrap=True)
    for column in ("skipped", "of events", "share", "batches not counted"):
        table.add_column(column, justify="right")
    for v in values:
        share = "unknown" if v.skipped is None else f"{v.skipped / v.events:.1%}" if v.events else "—"
        table.add_row(v.measure, "unknown" if v.skipped is None else f"{v.skipped:,}", f"{v.events:,}", share,
                      f"{v.batches_not_counted:,}")
    return table


def print_info(
    out: Console, spec: AppSpec, agg: AggregationSpec, info: Any, rejected: pd.DataFrame, data_dir: Path,
    changed: Sequence[ChangedFile] = (),
) -> None:
    """One aggregation's inspection as rich tables."""
    out.rule(f"[bold]{info.name}[/] (from {agg.source}, zone {info.zone}, spec {info.spec_hash})")
    out.print(f"store: {store_location(spec, agg, data_dir)}", markup=False)
    if info.shards:
        out.print(f"shards: {', '.join(info.shards)} (rows merged on read)")
    tables = Table(title="tables", title_justify="left")
    for name, justify in (
        ("table", "left"),
        ("per", "left"),
        ("rows", "right"),
        ("first bucket (GMT)", "left"),
        ("last bucket (GMT)", "left"),
    ):
        tables.add_column(name, justify=justify, no_wrap=name == "table")  # type: ignore[arg-type]
    for t in info.tables:
        tables.add_row(
            t.table, t.granularity, f"{t.rows:,}", format_ts(t.first_bucket), format_ts(t.last_bucket)
        )
    out.print(tables)
    counts = Table(show_header=False, box=None)
    counts.add_column(style="bold")
    counts.add_column(justify="right")
    counts.add_row("late events", Lateness.of(agg).describe())
    counts.add_row("retention", Retention.of(agg).describe(agg))
    counts.add_row("micro-batches committed", f"{info.batches:,}")
    counts.add_row("events read", f"{info.events_read:,}")
    counts.add_row("events aggregated (own bucket)", f"{info.events_aggregated:,}")
    counts.add_row("events moved (another bucket)", f"{info.events_moved:,}")
    counts.add_row("events rejected", f"{info.events_rejected:,}")
    counts.add_row("first event (GMT)", format_ts(info.min_event_ts))
    counts.add_row("last event (GMT)", format_ts(info.max_event_ts))
    out.print(counts)
    if info.values_skipped:
        out.print(skipped_table(info.values_skipped))
    if info.purges:
        purged = Table(title="purged", title_justify="left")
        for column in ("table", "keeps buckets from (GMT)", "rows purged", "last purge (GMT)"):
            purged.add_column(column, justify="right" if column == "rows purged" else "left", no_wrap=column == "table")
        for p in info.purges:
            purged.add_row(p.table, format_ts(p.purged_before), f"{p.rows_purged:,}",
                           format_ts(p.purged_at))
        out.print(purged)
    if info.complete_from:
        added = Table(title="measures added later (NULL in buckets that start before)", title_justify="left")
        added.add_column("measure", no_wrap=True)
        added.add_column("complete from (GMT)")
        for measure, at in info.complete_from:
            added.add_row(measure, format_ts(at))
        out.print(added)
    if info.recorded_by_kind:
        kinds = Table(title="recorded events by kind", title_justify="left")
        kinds.add_column("kind")
        kinds.add_column("events", justify="right")
        for kind, n in info.recorded_by_kind:
            kinds.add_row(kind, f"{n:,}")
        out.print(kinds)
    if info.rejected_by_reason:
        reasons = Table(title="rejected by reason", title_justify="left")
        reasons.add_column("reason", overflow="fold")
        reasons.add_column("events", justify="right")
        for reason, n in info.rejected_by_reason:
            reasons.add_row(reason, f"{n:,}")
        out.print(reasons)
    if changed:
        files = Table(title="input files changed after they were read (not read again)", title_justify="left")
        files.add_column("file", overflow="fold")
        files.add_column("read in batch", justify="right")
        files.add_column("bytes read", justify="right")
        files.add_column("bytes now", justify="right")
        for c in changed:
            files.add_row(c.path, str(c.batch_id), f"{c.size_read:,}",
                          "gone" if c.size_now is None else f"{c.size_now:,}")
        out.print(files)
    if not rejected.empty:
        latest = Table(title=f"latest {len(rejected)} rejected or moved events", title_justify="left")
        import pandas as pd  # only here: the CLI starts without it

        rejected = rejected.assign(event_time=[ts_or_none(None if pd.isna(v) else int(v))
                                               for v in rejected["event_timestamp"]])
        shown = ("batch_id", "stream", "kind", "reason", "value", "event_time", "raw")
        cols = [c for c in shown if c in rejected.columns]
        for c in cols:
            latest.add_column(c, overflow="fold", max_width=90 if c == "raw" else None)
        for rec in rejected[cols].itertuples(index=False):
            latest.add_row(*(cell(v) for v in rec))
        out.print(latest)
