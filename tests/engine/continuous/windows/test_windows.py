"""The processor's logic per window kind: one ``Step`` subclass per window class, and the rules that differ
by kind (which windows an event is in, the watermark late events are measured against)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd

from tiltframe.aggregates.layout import AGG_TIMESTAMP
from tiltframe.engine.continuous.columns import WE, WS, ProcessorConfig
from tiltframe.engine.continuous.step import Step
from tiltframe.engine.continuous.windows import step_class
from tiltframe.engine.continuous.windows.hop_step import HopStep
from tiltframe.engine.continuous.windows.tumble_step import TumbleStep
from tiltframe.model import windows as windows_model
from tiltframe.model.continuous import ContinuousQuery
from tiltframe.model.windows import (
    CountWindow,
    GlobalWindow,
    HopWindow,
    SessionWindow,
    TiltFrame,
    TumbleWindow,
    Window,
)
from tiltframe.retrieval.pandas_states import TS


def _kinds() -> set[type[Window]]:
    """Every window class ``model.windows`` exports."""
    found = (getattr(windows_model, name) for name in windows_model.__all__)
    return {k for k in found if isinstance(k, type) and issubclass(k, Window) and k is not Window}


def test_every_window_class_has_its_step() -> None:
    windows = {GlobalWindow("s"), TumbleWindow("s", size_ms=1), HopWindow("s", slide_ms=1, size_ms=2),
               SessionWindow("s", gap_ms=1), CountWindow("s", count=1), TiltFrame("s", levels=(("size", 1),))}
    assert {type(w) for w in windows} == _kinds()
    steps = {step_class(w) for w in windows}
    assert len(steps) == len(windows) and all(issubclass(s, Step) for s in steps)
    assert [step_class(w).in_emission_order for w in (TiltFrame("s"), TumbleWindow("s"))] == [True, False]


def _step(cls: type[Step], window: Window) -> Step:
    query = ContinuousQuery(stream="s", window=window, select=())
    layout = SimpleNamespace(key_names=())
    return cls(ProcessorConfig(query, layout, (), {}), (None, None), None, None)  # type: ignore[arg-type]


def test_hop_windows_and_late_mark() -> None:
    step = _step(HopStep, HopWindow("s", slide_ms=2, size_ms=5))
    windows = step._assign(pd.DataFrame({TS: [7]}))
    assert windows[AGG_TIMESTAMP].tolist() == [4, 6] and (windows[WE] - windows[WS]).tolist() == [5, 5]
    # Greatest event time minus delay 9: windows [0, 5), [2, 7), [4, 9) closed; their last end is 9.
    assert step._late_mark(np.array([9, 10])).tolist() == [9, 9]


def test_tumble_windows_and_late_mark() -> None:
    step = _step(TumbleStep, TumbleWindow("s", size_ms=5))
    assert step._assign(pd.DataFrame({TS: [7, 10]}))[AGG_TIMESTAMP].tolist() == [5, 10]
    assert step._late_mark(np.array([9, 10])).tolist() == [5, 10]
