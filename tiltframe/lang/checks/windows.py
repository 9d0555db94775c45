"""Validation of a continuous query's source window: sizes checked, the time column resolved
(docs/continuous.md, "Sources and windows")."""

from __future__ import annotations

import dataclasses

from tiltframe.errors import DefinitionError
from tiltframe.model.continuous import WINDOW_COLUMNS, Window, WindowKind
from tiltframe.model.expressions import Attr, Expr, Pos
from tiltframe.model.streams import AttrType, StreamDef


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
    """Sizes checked and the time attribute resolved."""
    if window.time_attribute is not None:
        time_column(stream, window.time_attribute, window.pos_of("time_attribute"), "the time column")
        time_attribute: str | None = window.time_attribute
    else:
        time_attribute = stream.event_time
    kind = window.kind
    needed = {
        WindowKind.GLOBAL: (),
        WindowKind.TUMBLE: ("size",),
        WindowKind.HOP: ("slide", "size"),
        WindowKind.SESSION: ("gap",),
        WindowKind.COUNT: ("count",),
        WindowKind.TILT: (),
    }[kind]
    if kind is WindowKind.TILT and not window.levels:
        raise _fail("a tilt frame needs at least one window: write [size 100, interval 1m]", window.pos)
    for i, (_, value) in enumerate(window.levels):
        if value <= 0:
            msg = "the size or interval of a tilt frame's window must be greater than 0"
            raise _fail(msg, window.pos_of(f"level{i}"))
    for part in ("size", "slide", "gap", "max_length", "count"):
        value = getattr(window, part if part == "count" else f"{part}_ms")
        if value is None:
            if part in needed:
                raise _fail(f"a {kind.value} window needs its {part.replace('_', ' ')}", window.pos)
            continue
        if part not in needed and not (part == "max_length" and kind is WindowKind.SESSION):
            msg = f"a {kind.value} window takes no {part.replace('_', ' ')}"
            raise _fail(msg, window.pos_of(part))
        if value <= 0:
            raise _fail(f"the {part.replace('_', ' ')} of a window must be greater than 0", window.pos_of(part))
    if window.is_bounded and window.max_length_ms is not None:
        msg = (
            "a session with start and end conditions takes no max length (not supported): it ends at its end "
            "condition or after the gap"
        )
        raise _fail(msg, window.pos_of("max_length"))
    if kind is WindowKind.SESSION and window.max_length_ms is not None:
        assert window.gap_ms is not None
        if window.max_length_ms <= window.gap_ms:
            msg = (
                f"the max length of a session ({ms_text(window.max_length_ms)}) must be longer than its gap "
                f"({ms_text(window.gap_ms)})"
            )
            raise _fail(msg, window.pos_of("max_length"))
    return dataclasses.replace(window, time_attribute=time_attribute)


def ms_text(value: int) -> str:
    """An interval the way it is written: 500ms, 5s, 2m, 1h, 1d."""
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1_000)):
        if value % size == 0:
            return f"{value // size}{unit}"
    return f"{value}ms"


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
    if window.kind not in (WindowKind.TUMBLE, WindowKind.HOP, WindowKind.SESSION):
        what = "a global aggregation" if not window.is_windowed else f"a {window.kind.value} window"
        msg = "PARTITION BY gives each substream its own watermark: "
        msg += f"it takes a tumble, hop or session window, not {what}"
        raise _fail(msg, first)
    if window.time_attribute is None:
        msg = "PARTITION BY gives each substream its own event-time watermark: the window needs an event-time column"
        raise _fail(msg, first)
    return tuple(names)
