"""The window kinds' configuration classes: what each holds and checks, and the repr that names checkpoints."""

from __future__ import annotations

import pytest

from tiltframe.errors import DefinitionError
from tiltframe.model.expressions import Attr, Binary, Literal
from tiltframe.model.windows import (
    CountWindow,
    GlobalWindow,
    HopWindow,
    SessionWindow,
    TiltFrame,
    TumbleWindow,
    Window,
)


def test_repr_is_the_former_window_s() -> None:
    """A query's checkpoint is named by a digest of its repr: the classes write the one ``Window`` of before."""
    assert repr(TumbleWindow("s", "ts", size_ms=5000)) == (
        "Window(kind=<WindowKind.TUMBLE: 'tumble'>, stream='s', time_attribute='ts', size_ms=5000, slide_ms=None, "
        "gap_ms=None, max_length_ms=None, count=None, levels=(), start_condition=None, end_condition=None, "
        "start_inclusive=True, end_inclusive=True)"
    )
    assert repr(TiltFrame("s", levels=(("size", 2),))) == (
        "Window(kind=<WindowKind.TILT: 'tilt'>, stream='s', time_attribute=None, size_ms=None, slide_ms=None, "
        "gap_ms=None, max_length_ms=None, count=None, levels=(('size', 2),), start_condition=None, "
        "end_condition=None, start_inclusive=True, end_inclusive=True)"
    )


@pytest.mark.parametrize(
    ("window", "message"),
    [
        (TumbleWindow("t"), "a tumble window needs its size"),
        (HopWindow("t", size_ms=1_000), "a hop window needs its slide"),
        (HopWindow("t", slide_ms=0, size_ms=0), "the size of a window must be greater than 0"),
        (SessionWindow("t"), "a session window needs its gap"),
        (SessionWindow("t", gap_ms=1, max_length_ms=-1), "the max length of a window must be greater than 0"),
        (SessionWindow("t", gap_ms=60_000, max_length_ms=60_000),
         "the max length of a session (1m) must be longer than its gap (1m)"),
        (CountWindow("t"), "a count window needs its count"),
        (TiltFrame("t"), "a tilt frame needs at least one window: write [size 100, interval 1m]"),
        (TiltFrame("t", levels=(("size", 2), ("interval", 0))),
         "the size or interval of a tilt frame's window must be greater than 0"),
    ],
)
def test_check_refuses(window: Window, message: str) -> None:
    with pytest.raises(DefinitionError) as refused:
        window.check()
    assert refused.value.message == message


def test_a_bounded_session_takes_no_max_length() -> None:
    start = Binary("==", Attr("a"), Literal("x", "string"))
    window = SessionWindow("t", gap_ms=5, max_length_ms=10, start_condition=start, end_condition=start)
    assert window.is_bounded and window.conditions == (start, start)
    with pytest.raises(DefinitionError, match="takes no max length"):
        window.check()


@pytest.mark.parametrize(
    "window",
    [
        GlobalWindow("t"),
        TumbleWindow("t", size_ms=1),
        HopWindow("t", slide_ms=1, size_ms=2),
        SessionWindow("t", gap_ms=1, max_length_ms=2),
        CountWindow("t", count=1),
        TiltFrame("t", levels=(("size", 1),)),
    ],
)
def test_check_passes_sizes_given(window: Window) -> None:
    window.check()
    assert not window.is_bounded and window.conditions is None


def test_what_each_kind_is() -> None:
    """Only tumble, hop and session close by the watermark; only a global aggregation has no window."""
    kinds = [GlobalWindow, TumbleWindow, HopWindow, SessionWindow, CountWindow, TiltFrame]
    assert [k.kind for k in kinds] == ["global", "tumble", "hop", "session", "count", "tilt"]
    assert [k.closes_by_watermark for k in kinds] == [False, True, True, True, False, False]
    assert [k.is_windowed for k in kinds] == [False, True, True, True, True, True]


def test_refuse_emit() -> None:
    assert TumbleWindow("t", size_ms=1).refuse_emit("ON UPDATE", changelog=True, given=("delay",)) is None
    message, part = CountWindow("t", count=1).refuse_emit("AFTER WINDOW CLOSE", changelog=False, given=("delay",))
    assert part == "delay" and message.startswith("a window of N events closes on its Nth event")
    assert CountWindow("t", count=1).refuse_emit("AFTER WINDOW CLOSE", changelog=False, given=("timeout",)) is None
    tilt = TiltFrame("t", levels=(("size", 1),))
    assert tilt.refuse_emit("AFTER WINDOW CLOSE", changelog=False, given=()) is None
    assert tilt.refuse_emit("PERIODIC", changelog=False, given=())[0].startswith("EMIT PERIODIC is not supported")
    assert tilt.refuse_emit("AFTER WINDOW CLOSE", changelog=True, given=())[0].startswith("EMIT CHANGELOG")
    assert tilt.refuse_emit("AFTER WINDOW CLOSE", changelog=False, given=("timeout",))[1] == "timeout"
