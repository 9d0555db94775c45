"""The window kinds of a continuous query, one frozen class each (``base.Window`` what they share)."""

from __future__ import annotations

from tiltframe.model.windows.base import Window
from tiltframe.model.windows.count import CountWindow
from tiltframe.model.windows.global_window import GlobalWindow
from tiltframe.model.windows.hop import HopWindow
from tiltframe.model.windows.session import SessionWindow
from tiltframe.model.windows.tilt import TILT_INTERVAL, TILT_SIZE, TiltFrame
from tiltframe.model.windows.tumble import TumbleWindow

__all__ = [
    "TILT_INTERVAL",
    "TILT_SIZE",
    "CountWindow",
    "GlobalWindow",
    "HopWindow",
    "SessionWindow",
    "TiltFrame",
    "TumbleWindow",
    "Window",
]
