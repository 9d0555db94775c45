"""The processor's logic per window kind: one ``step.Step`` subclass each, chosen by the window's class."""

from __future__ import annotations

from tiltframe.engine.continuous.step import Step
from tiltframe.engine.continuous.windows.count_step import CountStep
from tiltframe.engine.continuous.windows.global_step import GlobalStep
from tiltframe.engine.continuous.windows.hop_step import HopStep
from tiltframe.engine.continuous.windows.session_step import SessionStep
from tiltframe.engine.continuous.windows.tilt_step import TiltStep
from tiltframe.engine.continuous.windows.tumble_step import TumbleStep
from tiltframe.model.windows import (
    CountWindow,
    GlobalWindow,
    HopWindow,
    SessionWindow,
    TiltFrame,
    TumbleWindow,
    Window,
)

__all__ = ["step_class"]

_STEPS: dict[type[Window], type[Step]] = {
    GlobalWindow: GlobalStep,
    TumbleWindow: TumbleStep,
    HopWindow: HopStep,
    SessionWindow: SessionStep,
    CountWindow: CountStep,
    TiltFrame: TiltStep,
}


def step_class(window: Window) -> type[Step]:
    """The processor call of a query over ``window``."""
    return _STEPS[type(window)]
