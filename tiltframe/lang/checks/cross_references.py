"""Cross-reference validation of an app, and the gate for features that are not built yet.

``validate_app`` is what makes a spec *valid*: the parser and the Python builder both end with it, so
both report the same errors.  ``check_runnable`` is separate: a definition that uses an annotation whose
behaviour is not built yet still parses (and ``explain`` shows it), but the engine refuses to run it
rather than silently ignoring the annotation.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

from tiltframe.aggregates.registry import get, is_aggregate
from tiltframe.errors import DefinitionError
from tiltframe.lang.checks.continuous_queries import validate_continuous
from tiltframe.lang.checks.names import validate_names
from tiltframe.lang.checks.plain_queries import validate_stream_queries
from tiltframe.lang.checks.retrieval import output_stream, validate_query
from tiltframe.model.aggregations import AggregateItem, AggregationSpec, ExpressionItem, KeyItem
from tiltframe.model.app import AppSpec
from tiltframe.model.durations import Granularity, Unit, rollup_source
from tiltframe.model.expressions import Expr, Pos, attributes_of, calls_of
from tiltframe.model.retention import Retention
from tiltframe.model.streams import AttrType, StreamDef
from tiltframe.timeutil.zones import resolve_zone

_RESERVED = "AGG_"
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_DAY_MS = 86_400_000


def _fail(message: str, pos: Pos | None) -> DefinitionError:
    return DefinitionError.at(message, pos)


@contextmanager
def _located(pos: Pos | None) -> Iterator[None]:
    """Give an error raised without a position (by a helper that knows no text) that of the definition."""
    try:
        yield
    except DefinitionError as exc:
        if exc.line is not None or pos is None:
            raise
        try:
            located = type(exc)(exc.message, line=pos.line, column=pos.column)
        except TypeError:  # a subclass with another signature: keep it as it is
            raise exc from None
        raise located from exc


def validate_app(app: AppSpec) -> AppSpec:
    """Check every reference and type in ``app``; returns it when valid, its continuous queries filled in
    by :func:`~tiltframe.lang.checks.continuous_queries.validate_continuous`, its plain stream queries' target
    streams added (:func:`~tiltframe.lang.checks.plain_queries.validate_stream_queries`)."""
    app = validate_stream_queries(app)
    definitions = (*app.streams, *app.aggregations)
    names = Counter(d.name for d in definitions)
    for name, n in names.items():
        if n > 1:  # pointed at the second definition
            msg = f"'{name}' is defined {n} times; stream and aggregation names must be unique"
            found = sorted((d.pos for d in definitions if d.name == name and d.pos), key=lambda p: (p.line, p.column))
            raise _fail(msg, found[1] if len(found) > 1 else None)
    if app.timezone is not None:
        resolve_zone(app.timezone)
    for stream in app.streams:
        with _located(stream.pos):
            _validate_stream(stream)
    for agg in app.aggregations:
        with _located(agg.pos):
            _validate_aggregation(app, agg)
    validate_names(app)
    queries = []
    for query in app.queries:
        with _located(query.pos):
            queries.append(validate_query(app, query))
    app = dataclasses.replace(app, queries=tuple(queries))
    joined = {q.insert_into: s for q in app.queries if q.insert_into and (s := output_stream(app, q)) is not None}
    app = validate_stream_queries(app, joined)
    if not app.continuous:
        return app
    seen: dict[str, int] = {}
    for query in app.continuous:
        if query.name is not None and query.name in seen:
            msg = f"continuous query name '{query.name}' is given twice (first at line {seen[query.name]})"
            raise _fail(msg, query.pos)
        if query.name is not None:
            seen[query.name] = query.pos.line if query.pos else 0
    return dataclasses.replace(app, continuous=tuple(validate_continuous(app, q) for q in app.continuous))


def _validate_stream(stream: StreamDef) -> None:
    seen: set[str] = set()
    for a in stream.attributes:
        if a.name in seen:
            raise _fail(f"attribute '{a.name}' is defined twice in stream {stream.name}", a.pos)
        seen.add(a.name)
    if not stream.attributes:
        raise _fail(f"stream {stream.name} has no attributes", stream.pos)
    if stream.event_time is not None:
        found = [a.pos for a in stream.annotations if a.name.lower() == "eventtime" and a.pos is not None]
        pos = found[0] if found else stream.pos
        try:
            t = stream.attribute(stream.event_time, pos)
        except DefinitionError as exc:
            raise _fail(f"@eventTime of stream {stream.name}: {exc.message}", pos) from None
        if t.type not in (AttrType.LONG, AttrType.STRING):
            msg = (
                f"@eventTime of stream {stream.name}: the event-time attribute '{t.name}' must be long (epoch ms) "
                f"or string ('yyyy-MM-dd HH:mm:ss[ Z]'), got {t.type.value}"
            )
            raise _fail(msg, pos)


def _validate_aggregation(app: AppSpec, agg: AggregationSpec) -> None:
    if not _NAME.match(agg.name):
        raise _fail(f"aggregation name '{agg.name}' must be a plain identifier", agg.pos)
    for item in agg.select:
        if item.output_name.upper().startswith(_RESERVED):
            msg = f"'{item.output_name}' starts with {_RESERVED}, which is reserved for tiltframe's columns"
            raise _fail(msg, item.pos)
    try:
        stream = app.stream(agg.source, agg.pos)
    except DefinitionError as exc:
        raise _fail(f"aggregation {agg.name} reads from {exc.message}", agg.pos) from None
    for key in agg.group_by:
        stream.attribute(key, agg.pos)
    if agg.time_attribute is not None:
        t = stream.attribute(agg.time_attribute, agg.pos)
        if t.type not in (AttrType.LONG, AttrType.STRING):
            msg = (
                f"aggregate by '{t.name}': the event-time attribute must be long (epoch ms) or string "
                f"('yyyy-MM-dd HH:mm:ss[ Z]'), got {t.type.value}"
            )
            raise _fail(msg, agg.pos)
    if not agg.select:
        raise _fail(f"aggregation {agg.name} selects nothing", agg.pos)
    outputs = Counter(i.output_name for i in agg.select)
    for name, n in outputs.items():
        if n > 1:
            raise _fail(f"'{name}' is selected {n} times in aggregation {agg.name}", agg.pos)
    for item in agg.select:
        _validate_item(agg, stream, item)
    for item in agg.aggregates:  # a quantile sketch outputs <alias>_p50, ...: none may take another's name
        fn = get(item.function)
        for name in fn.output_names(item.alias, fn.resolve(item.params)):
            if name != item.alias and name in outputs:
                raise _fail(f"'{name}', an output of {item.alias}, is also selected in aggregation {agg.name}",
                            item.pos)
    if not agg.aggregates:
        msg = f"aggregation {agg.name} has no aggregate function (sum, count, avg, min, max, ...)"
        raise _fail(msg, agg.pos)
    _validate_granularities(agg)
    if agg.timezone is not None:
        resolve_zone(agg.timezone)
    _validate_lateness(agg)
    _validate_retention(agg)


def _annotation_pos(agg: AggregationSpec, name: str) -> Pos | None:
    """Where annotation ``name`` was written (the definition itself for a Python-built spec)."""
    found = [a.pos for a in agg.annotations if a.name.lower() == name.lower() and a.pos is not None]
    return found[0] if found else agg.pos


def _validate_lateness(agg: AggregationSpec) -> None:
    """Seed 000's rules for the buffer, and ours for the bounded alternative."""
    buffer_pos, lateness_pos = _annotation_pos(agg, "BufferSize"), _annotation_pos(agg, "allowedLateness")
    if agg.buffer_size is not None:
        if agg.buffer_size < 1:
            raise _fail(f"@BufferSize must be a positive integer, got {agg.buffer_size}", buffer_pos)
        if agg.time_attribute is None:
            msg = (f"@BufferSize of aggregation {agg.name} needs an event-time attribute (aggregate by ...): "
                   f"events aggregated by arrival time are never out of order")
            raise _fail(msg, buffer_pos)
        if agg.finest.unit.rank > Unit.DAYS.rank:
            msg = (f"@BufferSize of aggregation {agg.name} needs its finest duration to be seconds, minutes, "
                   f"hours or days; it is {agg.finest}")
            raise _fail(msg, buffer_pos)
    if agg.allowed_lateness_ms is not None:
        if agg.buffer_size is not None or agg.ignore_events_older_than_buffer is not None:
            msg = (f"aggregation {agg.name} declares both @allowedLateness and Siddhi's buffer "
                   f"(@BufferSize / @IgnoreEventsOlderThanBuffer); choose one policy for late events")
            raise _fail(msg, lateness_pos)
        if agg.time_attribute is None:
            msg = (f"@allowedLateness of aggregation {agg.name} needs an event-time attribute (aggregate by ...): "
                   f"events aggregated by arrival time are never late")
            raise _fail(msg, lateness_pos)


def _validate_retention(agg: AggregationSpec) -> None:
    """Seed 001's rules for @purge and @retentionPeriod (see ``model.retention``)."""
    try:
        Retention.of(agg)
    except DefinitionError as exc:
        name = "purge" if exc.message.startswith("@purge") or agg.retention is None else "retentionPeriod"
        raise _fail(exc.message, _annotation_pos(agg, name)) from None


def _validate_item(agg: AggregationSpec, stream: StreamDef, item: object) -> None:
    from tiltframe.aggregates.layout import expression_type

    if isinstance(item, KeyItem):
        stream.attribute(item.name, item.pos)
        if item.name not in agg.group_by:
            msg = f"'{item.name}' is selected as a key but is not in group by"
            raise _fail(msg, item.pos)
        return
    if isinstance(item, AggregateItem):
        fn = get(item.function)
        if not fn.bounded:
            msg = (
                f"{item.function}() keeps every value, so a rollup's day and year buckets would grow without end; "
                "use it in a continuous query, whose groups close"
            )
            raise _fail(msg, item.pos)
        if item.arg is not None:
            _check_plain(item.arg, stream, f"{item.function}(...) as {item.alias}")
            arg_type = expression_type(item.arg, stream)
        else:
            arg_type = None
        fn.check_arg(arg_type, where=f"'{item.alias}'")
        fn.resolve(item.params, where=f"'{item.alias}'")
        return
    if isinstance(item, ExpressionItem):
        _check_plain(item.expr, stream, item.alias)
        expression_type(item.expr, stream)


def _check_plain(expr: Expr, stream: StreamDef, where: str) -> None:
    """An expression over stream attributes with no aggregate calls inside it."""
    for call in calls_of(expr):
        if is_aggregate(call.name):
            msg = f"aggregate {call.name}() inside the expression of '{where}'; select aggregates separately"
        else:
            msg = f"unknown function {call.name}() in '{where}'"
        raise _fail(msg, call.pos)
    for attr in attributes_of(expr):
        stream.attribute(attr.name, attr.pos)


def _validate_granularities(agg: AggregationSpec) -> None:
    """Durations listed once, finest first, each dividing the next (so each level rolls up from the last)."""
    gs = agg.granularities
    if not gs:
        raise _fail(f"aggregation {agg.name} has no durations after 'every'", agg.pos)
    counts = Counter(gs)
    for g, n in counts.items():
        if n > 1:
            raise _fail(f"duration '{g}' is listed {n} times in aggregation {agg.name}", agg.pos)
    if list(gs) != sorted(gs, key=lambda g: g.sort_key):
        msg = f"durations of aggregation {agg.name} must go from finest to coarsest"
        raise _fail(msg, agg.pos)
    for i, g in enumerate(gs):
        source = rollup_source(gs, i)
        problem = _too_long(g) or _week_problem(gs, i) or (_nesting_problem(gs[source], g) if i else None)
        if problem:
            raise _fail(f"durations of aggregation {agg.name}: {problem}", agg.pos)


def _week_problem(gs: tuple[Granularity, ...], i: int) -> str | None:
    """Weeks are ISO weeks, one at a time, and months or years roll up from a level finer than weeks."""
    g = gs[i]
    if g.unit is Unit.WEEKS and g.multiple != 1:
        return f"{_written(g)}: a week level is one ISO week (Monday to Sunday); write 'week'"
    if i and g.unit.rank > Unit.WEEKS.rank and gs[rollup_source(gs, i)].unit is Unit.WEEKS:
        return (f"{_written(g)} cannot roll up from weeks, which straddle months and years: list 'day' (or a "
                f"finer duration) before 'week'")
    return None


# Each level rolls up from a finer one (engine.partials.Levels takes the bucket of a finer bucket's start),
# which is right only if every finer bucket lies inside one coarser bucket: each duration must divide the
# next, and so every coarser one.  engine.buckets cuts fixed levels at offset changes, so these rules
# are enough in every time zone (docs/time.md, "Tilt frames").


def _written(g: Granularity, multiple: int | None = None) -> str:
    """A duration the way ``every`` takes it (``'10 sec'``, ``'day'``); the spec keeps no spelling."""
    n = g.multiple if multiple is None else multiple
    return f"'{g.unit.word}'" if n == 1 else f"'{n} {g.unit.word}'"


def _examples(g: Granularity, whole: int) -> str:
    """Multiples of ``g``'s unit that divide ``whole`` (in that unit), the nearest below and above ``g``."""
    divisors = [d for d in range(1, whole) if whole % d == 0 and d != g.multiple]
    below = [d for d in divisors if d < g.multiple][-1:]
    above = [d for d in divisors if d > g.multiple][:1]
    picks = [_written(g, d) for d in below + above]
    return f" (for example {' or '.join(picks)})" if picks else ""


def _too_long(g: Granularity) -> str | None:
    """A fixed level longer than a day: days follow the calendar, and a bucket then spans several offsets."""
    if g.unit.is_calendar:
        return None
    length = _unit_size(g) * g.multiple
    if length <= _DAY_MS:
        return None
    days = Granularity(Unit.DAYS, length // _DAY_MS)
    hint = f"write {_written(days)}" if length % _DAY_MS == 0 else "use whole days, such as 'day' or '2 day'"
    return (
        f"{_written(g)} is longer than a day; a sec, min or hour duration can be at most 24 hours, and longer "
        f"levels are days, which follow the calendar of the aggregation's time zone: {hint}"
    )


def _unit_size(g: Granularity) -> int:
    """Length of one ``g.unit`` in the measure that ``g``'s family compares in: ms, days or months."""
    if not g.unit.is_calendar:
        return g.unit.fixed_ms  # type: ignore[return-value]
    return 12 if g.unit is Unit.YEARS else 1


def _nesting_problem(finer: Granularity, coarser: Granularity) -> str | None:
    """Why ``finer`` buckets would not each lie inside one ``coarser`` bucket, or None when they do."""
    f, c = _written(finer), _written(coarser)
    if not finer.unit.is_calendar and coarser.unit.is_calendar:
        f_ms = _unit_size(finer) * finer.multiple
        if _DAY_MS % f_ms == 0:
            return None
        return (
            f"{f} does not divide a day (24 hours), so {f} buckets would straddle midnight and could not roll "
            f"up into {c}; a duration listed before days, months or years must divide 24 hours"
            + _examples(finer, _DAY_MS // _unit_size(finer))
        )
    if finer.unit is Unit.DAYS and coarser.unit is not Unit.DAYS:
        if finer.multiple == 1:
            return None
        return (
            f"{f} cannot be listed before {c}: {f} buckets count whole days from 1970-01-01 and do not line "
            f"up with {coarser.unit.name.lower()}, so only 'day' can roll up into months and years (drop {f} "
            f"or give it an aggregation of its own)"
        )
    # Both fixed, both days, or months and years: compare in ms, days or months.
    small, large = _unit_size(finer) * finer.multiple, _unit_size(coarser) * coarser.multiple
    if small == large:
        return f"{f} and {c} are the same length; list one of them"
    if small > large:  # a finer unit with a large multiple: '120 min' sorts before 'hour'
        if small % large:
            return f"{f} is longer than {c} and neither divides the other; each duration must divide the next one"
        again = _written(coarser, small // _unit_size(coarser))
        return f"{f} is longer than {c} but comes before it, as durations are ordered by unit: write it as {again}"
    if finer.unit is Unit.MONTHS and coarser.unit is Unit.YEARS and 12 % finer.multiple:
        return (
            f"{f} does not divide a year (12 months), so {f} buckets would straddle {c} buckets; a month "
            f"duration listed before years must divide 12" + _examples(finer, 12)
        )
    if large % small:
        return (
            f"{f} does not divide {c}, so {f} buckets would straddle {c} buckets; each duration must divide "
            f"the next one" + _examples(finer, large // _unit_size(finer))
        )
    return None


# --- what a run needs beyond a valid definition -------------------------------------------------------


def check_runnable(app: AppSpec) -> None:
    """Refuse, with a clear message, stores this release cannot open."""
    for agg in app.aggregations:
        store = agg.store
        if store is not None:
            from tiltframe.store.open_stores import check_store_spec

            with _located(_annotation_pos(agg, "store")):
                check_store_spec(store)
