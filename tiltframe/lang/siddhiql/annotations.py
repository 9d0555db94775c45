"""Interpret the annotations of ``define aggregation`` (and ``define stream``) into typed fields of the spec.

Seeds 000 and 001 list the annotations Siddhi gives meaning to: ``@store``, ``@BufferSize``,
``@IgnoreEventsOlderThanBuffer``, ``@purge`` (with a nested ``@retentionPeriod``), ``@retentionPeriod`` and
``@PartitionById``; ``@timezone`` and ``@allowedLateness`` are ours, and so is ``@eventTime`` on a stream
(the attribute continuous queries window by).  Names are matched case-insensitively, as Siddhi does.  What
each place takes is listed in :mod:`tiltframe.lang.siddhiql.vocabulary`, which refuses the rest first; the
annotations accepted and ignored there are kept raw on the spec (``explain`` shows them).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from tiltframe.errors import DefinitionError, did_you_mean
from tiltframe.lang.siddhiql.vocabulary import RawAnnotation, check_annotations
from tiltframe.model.aggregations import PurgeSpec, StoreSpec
from tiltframe.model.durations import parse_length
from tiltframe.model.expressions import Pos

#: The ``@store(type=...)`` values tiltframe opens (``store.urls``); Siddhi's others (mongodb, redis, ...)
#: parse, and ``check_runnable`` refuses them as not supported yet.
STORE_TYPES = ("rdbms", "sqlite")

#: Builds a positioned error; given by the tree walker, which knows the text for the caret snippet.
ErrorFactory = Callable[[str, Pos | None], DefinitionError]


def flag(raw: RawAnnotation, value: str | None, error: ErrorFactory, *, default: bool = True) -> bool:
    """A ``'true'``/``'false'`` annotation value (case-insensitive); anything else is refused."""
    if value is None:
        return default
    if value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    msg = f"{raw.title} takes 'true' or 'false', got '{value}'"
    raise error(msg, raw.pos)


def _pairs(raw: RawAnnotation) -> tuple[tuple[str, str], ...]:
    """Elements as (key, value); a positional element gets the key ''."""
    return tuple((key or "", value) for key, value in raw.annotation.elements)


def _no_nested(raw: RawAnnotation, error: ErrorFactory) -> None:
    if raw.nested:
        inner = raw.nested[0]
        msg = f"{raw.title} takes no nested annotation, got {inner.title}"
        raise error(msg, inner.pos)


def _store(raw: RawAnnotation, error: ErrorFactory) -> dict[str, Any]:
    return {"store": store_spec(raw, error)}


def store_spec(raw: RawAnnotation, error: ErrorFactory) -> StoreSpec:
    """``@store(type=..., jdbc.url=..., username=..., password=..., <options>)``, on an aggregation or a
    table."""
    _no_nested(raw, error)
    taken = {"type", "jdbc.url", "url", "username", "password"}
    store_type = raw.annotation.get("type")
    if not store_type:
        msg = f"{raw.title} needs a type: write @store(type='rdbms', ...)"
        raise error(msg, raw.pos)
    hint = did_you_mean(store_type.strip(), STORE_TYPES)
    if store_type.strip().lower() not in STORE_TYPES and hint:  # other types: "not supported yet" at run
        msg = f"unknown store type '{store_type}'{hint} (tiltframe's stores are: {', '.join(STORE_TYPES)})"
        raise error(msg, raw.pos_of("type"))
    options = tuple((key, value) for key, value in _pairs(raw) if key.lower() not in taken)
    url = raw.annotation.get("jdbc.url") or raw.annotation.get("url")
    return StoreSpec(
        type=store_type,
        url=url,
        username=raw.annotation.get("username"),
        password=raw.annotation.get("password"),
        options=options,
    )


def _buffer_size(raw: RawAnnotation, error: ErrorFactory) -> dict[str, Any]:
    _no_nested(raw, error)
    value = raw.first_value()
    text = (value or "").strip()
    if not text.isdigit():
        shown = f"'{value}'" if value is not None else "nothing"
        msg = f"{raw.title} needs a whole number of buckets to keep, such as @BufferSize('3'); got {shown}"
        raise error(msg, raw.pos)
    return {"buffer_size": int(text)}


def _ignore_older(raw: RawAnnotation, error: ErrorFactory) -> dict[str, Any]:
    _no_nested(raw, error)
    value = raw.first_value()
    if value is None:
        msg = f"{raw.title} takes 'true' or 'false', got nothing"
        raise error(msg, raw.pos)
    return {"ignore_events_older_than_buffer": flag(raw, value, error)}


def _allowed_lateness(raw: RawAnnotation, error: ErrorFactory) -> dict[str, Any]:
    """``@allowedLateness('10 min')``: ours, the bounded alternative to Siddhi's buffer."""
    _no_nested(raw, error)
    value = raw.first_value()
    try:
        return {"allowed_lateness_ms": parse_length(value or "", raw.title)}
    except DefinitionError as exc:
        raise error(exc.message, raw.pos) from None


def _purge(raw: RawAnnotation, error: ErrorFactory) -> dict[str, Any]:
    """``@purge(enable=..., interval=..., @retentionPeriod(sec=..., ...))`` (seed 001)."""
    retention: tuple[tuple[str, str], ...] = ()
    for inner in raw.nested:
        if inner.annotation.name.lower() != "retentionperiod":
            msg = f"{raw.title} takes only a nested @retentionPeriod, got {inner.title}"
            raise error(msg, inner.pos)
        retention += _pairs(inner)
    enable = flag(raw, raw.annotation.get("enable"), error)
    return {"purge": PurgeSpec(enable=enable, interval=raw.annotation.get("interval"), retention=retention)}


def _retention(raw: RawAnnotation, error: ErrorFactory) -> dict[str, Any]:
    _no_nested(raw, error)
    return {"retention": _pairs(raw)}


def _partition_by_id(raw: RawAnnotation, error: ErrorFactory) -> dict[str, Any]:
    _no_nested(raw, error)
    return {"partition_by_id": flag(raw, raw.annotation.get("enable") or raw.first_value(), error)}


def _timezone(raw: RawAnnotation, error: ErrorFactory) -> dict[str, Any]:
    _no_nested(raw, error)
    value = raw.first_value()
    if not value:
        msg = f"{raw.title} needs a time zone name, such as @timezone('Asia/Kolkata')"
        raise error(msg, raw.pos)
    return {"timezone": value}


_HANDLERS: dict[str, Callable[[RawAnnotation, ErrorFactory], dict[str, Any]]] = {
    "store": _store,
    "buffersize": _buffer_size,
    "ignoreeventsolderthanbuffer": _ignore_older,
    "allowedlateness": _allowed_lateness,
    "purge": _purge,
    "retentionperiod": _retention,
    "partitionbyid": _partition_by_id,
    "timezone": _timezone,
}


_EVENT_TIME = "eventtime"


def aggregation_options(
    annotations: Sequence[RawAnnotation], error: ErrorFactory, *, where: str = "define aggregation"
) -> dict[str, Any]:
    """Keyword arguments of :class:`AggregationSpec` set by the annotations of one definition; ``where``
    names it in messages."""
    for raw in annotations:
        if raw.annotation.name.lower() == _EVENT_TIME:  # the rollups would be silently cut by arrival time
            msg = (
                f"{raw.title} belongs on define stream; "
                "an aggregation names its event time with 'aggregate by <attribute>'"
            )
            raise error(msg, raw.pos)
    check_annotations(annotations, "define aggregation", where, error)
    options: dict[str, Any] = {}
    seen: dict[str, RawAnnotation] = {}
    for raw in annotations:
        key = raw.annotation.name.lower()
        handler = _HANDLERS[key]
        if key in seen:
            msg = f"annotation {raw.title} is given twice"
            raise error(msg, raw.pos)
        seen[key] = raw
        options.update(handler(raw, error))
    return options


def stream_options(annotations: Sequence[RawAnnotation], error: ErrorFactory) -> dict[str, Any]:
    """Keyword arguments of :class:`StreamDef`: ``@eventTime('ts')`` or ``@eventTime(attribute='ts')``."""
    options: dict[str, Any] = {}
    for raw in annotations:
        if raw.annotation.name.lower() != _EVENT_TIME:
            continue
        _no_nested(raw, error)
        if "event_time" in options:
            raise error(f"annotation {raw.title} is given twice", raw.pos)
        elements = raw.annotation.elements
        key, value = elements[0] if len(elements) == 1 else (None, None)
        if value is None or (key is not None and key.lower() != "attribute") or not value.strip():
            msg = (
                f"{raw.title} takes the name of the event-time attribute, "
                "such as @eventTime('ts') or @eventTime(attribute='ts')"
            )
            raise error(msg, raw.pos)
        options["event_time"] = value.strip()
    return options


def continuous_options(annotations: Sequence[RawAnnotation], error: ErrorFactory) -> dict[str, Any]:
    """The name of a continuous query from ``@info(name='q')``, as Siddhi names its queries.

    ``@eventTime`` here would be ignored (a query's time column is the stream's, or the window call's), so
    it is refused; other annotations are kept raw on the query.
    """
    for raw in annotations:
        if raw.annotation.name.lower() == _EVENT_TIME:
            msg = (
                f"{raw.title} belongs on define stream; a continuous query windows by the stream's event time, "
                "or names its own column as in tumble(stream, ts, 5s)"
            )
            raise error(msg, raw.pos)
    check_annotations(annotations, "a continuous query", "a continuous query", error)
    options: dict[str, Any] = {}
    for raw in annotations:
        key = raw.annotation.name.lower()
        if key == "info" and raw.annotation.get("name") is not None:
            if "name" in options:
                raise error(f"annotation {raw.title} is given twice", raw.pos)
            name = (raw.annotation.get("name") or "").strip()
            if not name:
                raise error(f"{raw.title} takes a query name, such as @info(name='cpu_alerts')", raw.pos)
            options["name"] = name
    return options
