"""Validation of a continuous query's source window: sizes checked, the time column resolved
(docs/continuous.md, "Sources and windows")."""

from __future__ import annotations

import dataclasses

from tiltframe.errors import DefinitionError
from tiltframe.model.continuous import WINDOW_COLUMNS
from tiltframe.model.expressions import Attr, Expr, Pos
from tiltframe.model.streams import AttrType, StreamDef
from tiltframe.model.windows import Window


def _fail(message: str, pos: Pos | None) -> DefinitionError:
    return DefinitionError.at(message, pos)


def time_column(stream: StreamDef, name: str, pos: Pos | None, what: str) -> None:
    """An attribute that orders events in time: it exists and is a long (epoch ms) or a string."""
    attribute = stream.attribute(name, pos)
    if attribute.type not in (AttrType.LONG, AttrType.STRING):
        msg = (
            f"{what} '{name}' must be long (epoch ms) or string ('yyyy-MM-dd HH:mm:ss[ Z]'), got {attribute.type.value}"
        )
        raise _fail(msg, pos)


def validate_window(window: Window, stream: StreamDef) -> Window:
    """The time attribute checked and resolved, and the sizes checked (``Window.check``, each kind its own)."""
    if window.time_attribute is not None:
        time_column(stream, window.time_attribute, window.pos_of("time_attribute"), "the time column")
        time_attribute: str | None = window.time_attribute
    else:
        time_attribute = stream.event_time
    window.check()
    return dataclasses.replace(window, time_attribute=time_attribute)


def partition_keys(partition_by: tuple[Expr, ...], stream: StreamDef, window: Window) -> tuple[str, ...]:
    """PARTITION BY's stream attributes (Proton's substreams, each with its own event-time watermark); they
    group as GROUP BY keys do."""
    names: list[str] = []
    for expr in partition_by:
        if not isinstance(expr, Attr) or (expr.name in WINDOW_COLUMNS and not stream.has(expr.name)):
            raise _fail(f"PARTITION BY takes stream attributes, got '{expr}'", expr.pos)
        if expr.qualifier is not None and expr.qualifier != stream.name:
            raise _fail(f"'{expr}' names {expr.qualifier}, but the query reads stream {stream.name}", expr.pos)
        stream.attribute(expr.name, expr.pos)
        if expr.name in names:
            raise _fail(f"column '{expr.name}' is listed twice in PARTITION BY", expr.pos)
        names.append(expr.name)
    if not names:
        return ()
    first = partition_by[0].pos
    if not window.closes_by_watermark:
        what = "a global aggregation" if not window.is_windowed else f"a {window.kind} window"
        msg = "PARTITION BY gives each substream its own watermark: "
        msg += f"it takes a tumble, hop or session window, not {what}"
        raise _fail(msg, first)
    if window.time_attribute is None:
        msg = "PARTITION BY gives each substream its own event-time watermark: the window needs an event-time column"
        raise _fail(msg, first)
    return tuple(names)
