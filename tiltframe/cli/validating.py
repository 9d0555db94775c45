"""``tiltframe validate``: check an app and list what it defines, as tables or as one JSON document."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from tiltframe import api, lifecycle
from tiltframe.cli.failing import handle_errors
from tiltframe.cli.options import AppArg, LangOpt, check_format, is_trickle
from tiltframe.cli.output import stdout_console
from tiltframe.retrieval.formats import to_json

if TYPE_CHECKING:
    from tiltframe.model.app import AppSpec
    from tiltframe.model.expressions import Expr
    from tiltframe.model.trickle import TrickleQuery

FORMATS = ("text", "json")


def _text(expr: Expr) -> str:
    """A string constant as its text (``2024-01-** **:**:**``, ``days``), other expressions as written."""
    from tiltframe.model.expressions import Literal

    return expr.value if isinstance(expr, Literal) and isinstance(expr.value, str) else str(expr)


def app_document(spec: AppSpec, app_file: Path) -> dict[str, Any]:
    """What an app defines, as JSON-ready data.  Its keys (stable; new keys may be added, none removed):

    - ``app``: the file as given; ``name``: ``@app:name``, or null; ``valid``: true (an invalid app gives
      no document, only the error on stderr and exit code 2);
    - ``streams``: ``name``, ``attributes`` (``name``, ``type``), ``from`` (null for an input stream, else
      the stream a stream query makes it from) and ``where`` (that query's filter, or null);
    - ``aggregations``: ``name``, ``from`` (its stream), ``group_by``, ``time`` (the event-time attribute,
      null for arrival time), ``levels`` (``per``: the granularity, ``table``: the store table holding it),
      ``table`` (the ``define table`` it pre-aggregates, or null);
    - ``queries`` (retrieval queries, in text order): ``index``, ``name`` (``@info(name=...)`` or null),
      ``from`` (the request stream of a join, null on demand), ``aggregation``, ``within``, ``per``,
      ``insert_into`` (or null);
    - ``continuous`` (continuous queries, in text order, as ``GET /api/aggregations`` lists them): ``name``
      (``@info(name=...)``, else ``continuous<i>``: what ``run --output`` names), ``source`` (its stream),
      ``window`` (global, tumble, hop, session, count or tilt), ``size_ms``, ``slide_ms``, ``gap_ms``,
      ``group_by``, ``emit`` (the EMIT policy), ``columns`` (the columns of its rows);
    - ``tables`` (as ``GET /api/aggregations`` lists them): ``name``, ``columns`` (``name``, ``type``),
      ``time_column`` (or null), ``preaggregated``, and for a pre-aggregated one ``interval``,
      ``dimensions``, ``measures`` and ``workers`` (null and empty lists otherwise).
    """
    from tiltframe.aggregates.layout import AggregationLayout

    tables = {t.name for t in spec.tables}
    streams = []
    for s in spec.streams:
        writer = spec.writer_of(s.name)
        streams.append({
            "name": s.name,
            "attributes": [{"name": a.name, "type": a.type.value} for a in s.attributes],
            "from": None if writer is None else writer.source,
            "where": None if writer is None or writer.where is None else str(writer.where),
        })
    aggregations = []
    for agg in spec.aggregations:
        layout = AggregationLayout.of(spec, agg.name)
        aggregations.append({
            "name": agg.name,
            "from": agg.source,
            "group_by": list(agg.group_by),
            "time": agg.time_attribute,
            "levels": [{"per": str(g), "table": layout.table_name(g)} for g in agg.granularities],
            "table": agg.name if agg.name in tables and agg.workers is not None else None,
        })
    queries = [{
        "index": i,
        "name": q.name,
        "from": q.request_stream,
        "aggregation": q.aggregation,
        "within": [_text(w) for w in q.within],
        "per": _text(q.per) if q.per is not None else None,
        "insert_into": q.insert_into,
    } for i, q in enumerate(spec.queries)]
    from tiltframe.http.catalog import continuous_documents, table_documents

    continuous, defined = continuous_documents(spec), table_documents(spec)
    return {"app": str(app_file), "name": spec.name, "valid": True, "streams": streams,
            "aggregations": aggregations, "queries": queries, "continuous": continuous, "tables": defined}


def _table(title: str, columns: tuple[str, ...], rows: list[tuple[str, ...]], whole: int = 1) -> Table:
    """A table whose first ``whole`` columns (names) are never wrapped; the others wrap to fit."""
    table = Table(title=title, title_justify="left")
    for i, c in enumerate(columns):
        table.add_column(c, overflow="fold", no_wrap=i < whole)
    for row in rows:
        table.add_row(*row)
    return table


def _names(values: list[str] | None) -> str:
    return ", ".join(values or []) or "-"


def print_changes(out: Console, changes: dict[str, list[str]], verb: str) -> None:
    """Per aggregation or table: "up to date", or what ``verb`` (e.g. "changed") one step per line."""
    for name, steps in changes.items():
        if not steps:
            out.print(f"{name}: up to date", markup=False)
            continue
        out.print(f"{name}: {verb}", markup=False)
        for step in steps:
            out.print(f"  - {step}", markup=False)


def print_document(out: Console, doc: dict[str, Any]) -> None:
    """The document as tables: one per kind of definition the app has (streams and aggregations always).
    Names come first and are kept whole; the descriptions after them wrap to fit the width."""
    out.print("[green]ok[/]: ", end="")
    out.print(doc["app"], markup=False, soft_wrap=True)  # a path as written: never wrapped, no markup
    out.print(_table("streams", ("stream", "attributes", "events"), [
        (s["name"], ", ".join(f"{a['name']} {a['type']}" for a in s["attributes"]),
         "input" if s["from"] is None else f"from {s['from']}" + (f"[{s['where']}]" if s["where"] else ""))
        for s in doc["streams"]]))
    out.print(_table("aggregations", ("aggregation", "tables", "every", "from", "group by", "by"), [
        (a["name"], "\n".join(level["table"] for level in a["levels"]),
         "\n".join(level["per"] for level in a["levels"]), a["from"], _names(a["group_by"]),
         a["time"] or "arrival time")
        for a in doc["aggregations"]], whole=4))
    if doc["queries"]:
        named = any(q["name"] for q in doc["queries"])
        out.print(_table("retrieval queries", ("#", *(("name",) if named else ()), "aggregation", "per", "within",
                                               "from", "insert into"), [
            (str(q["index"]), *((q["name"] or "-",) if named else ()), q["aggregation"], q["per"],
             "\nto ".join(q["within"]), q["from"] or "(on demand)", q["insert_into"] or "-")
            for q in doc["queries"]], whole=4 + named))
    if doc["continuous"]:
        out.print(_table("continuous queries", ("name", "stream", "window", "emit", "group by", "columns"), [
            (c["name"], c["source"], c["window"], c["emit"] or "-", _names(c["group_by"]), _names(c["columns"]))
            for c in doc["continuous"]], whole=3))
    if doc["tables"]:
        out.print(_table("tables", ("table", "time", "kind", "dimensions", "measures", "columns"), [
            (t["name"], t["time_column"] or "-",
             f"pre-aggregated per {t['interval']}, {t['workers']} workers" if t["preaggregated"] else "raw rows",
             _names(t["dimensions"]), "\n".join(t["measures"] or ["-"]),
             ", ".join(f"{c['name']} {c['type']}" for c in t["columns"]))
            for t in doc["tables"]], whole=2))


def validate(
    app_file: AppArg,
    fmt: Annotated[
        str,
        typer.Option("--format", metavar="text|json",
                     help="text (tables), or json (one document; its keys below)."),
    ] = "text",
    data_dir: Annotated[
        Path | None,
        typer.Option("--data-dir", "-d", show_default=False,
                      help="Also compare the app with what this data directory stores: what 'tiltframe migrate' "
                           "would change in each aggregation's tables (Spark is not started)."),
    ] = None,
    lang: LangOpt = None,
) -> None:
    """Parse and check an app (and that this release can run it); list its streams, aggregations (with
    their levels and store tables), retrieval queries, continuous queries and tables.  With --data-dir,
    also the plan of changes 'tiltframe migrate' would carry out there (key "changes" in JSON).

    With --format json, one JSON document on stdout with the keys app, name, valid, streams,
    aggregations (levels: per, table), queries, continuous (each by its @info(name=...), else continuous0,
    continuous1, ... as run --output names them) and tables.  An invalid app prints no document: the error
    goes to stderr, with exit code 2.
    """
    with handle_errors():
        check_format(fmt, FORMATS)
        trickle = is_trickle(app_file, lang)
    if trickle:
        _validate_trickle(app_file, fmt)
        return
    with handle_errors(str(app_file)):
        spec = api.load_app(app_file)
        from tiltframe.lang.checks.cross_references import check_runnable

        check_runnable(spec)
        doc = app_document(spec, app_file)
        if data_dir is not None:
            from tiltframe.cli.options import resolve_data_dir

            doc["changes"] = lifecycle.plan_changes(spec, data_dir=resolve_data_dir(data_dir))
    if fmt == "json":
        typer.echo(to_json(doc))
        return
    out = stdout_console()
    print_document(out, doc)
    if data_dir is not None:
        out.print(f"against the data in {data_dir}:", markup=False)
        print_changes(out, doc["changes"], "tiltframe migrate would change")


def trickle_document(query: TrickleQuery, query_file: Path) -> dict[str, Any]:
    """What a trickle query defines, as JSON-ready data: ``app``, ``language`` ("trickle"), ``valid``,
    ``windows`` (``name``, ``interval_ns`` or ``size``, ``max_groups``, ``emit_empty_windows``, ``script``:
    whether one gives the time or weight), ``streams`` (made with ``create stream``) and ``selects`` (``index``,
    ``from``, ``windows``: the tilt frame, ``into``, ``grouped``, ``aggregates``: the functions it applies)."""
    from tiltframe.lang.checks.trickle_queries import aggregate_calls

    windows = [{"name": w.name, "interval_ns": w.interval_ns, "size": w.size, "max_groups": w.max_groups,
                "emit_empty_windows": w.emit_empty_windows, "script": w.script is not None} for w in query.windows]
    selects = [{"index": i, "from": s.source, "windows": list(s.windows), "into": s.into,
                "grouped": s.group_by is not None,
                "aggregates": sorted({c.name for c in aggregate_calls(s.target)})}
               for i, s in enumerate(query.selects)]
    return {"app": str(query_file), "language": "trickle", "valid": True, "windows": windows,
            "streams": list(query.streams), "selects": selects}


def _validate_trickle(query_file: Path, fmt: str) -> None:
    with handle_errors(str(query_file)):
        doc = trickle_document(api.load_trickle(query_file), query_file)
    if fmt == "json":
        typer.echo(to_json(doc))
        return
    out = stdout_console()
    out.print("[green]ok[/]: ", end="")
    out.print(doc["app"], markup=False, soft_wrap=True)
    out.print(_table("windows", ("window", "tumbling by", "max groups", "emit empty", "script"), [
        (w["name"], f"interval {w['interval_ns']:_} ns" if w["interval_ns"] else f"size {w['size']}",
         str(w["max_groups"] or "-"), "yes" if w["emit_empty_windows"] else "no", "yes" if w["script"] else "no")
        for w in doc["windows"]]))
    out.print(_table("selects", ("#", "from", "tilt frame", "into", "grouped", "aggregates"), [
        (str(s["index"]), s["from"], ", ".join(s["windows"]) or "-", s["into"], "yes" if s["grouped"] else "no",
         _names(s["aggregates"]))
        for s in doc["selects"]], whole=4))
