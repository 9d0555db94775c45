"""Tremor's tilt-frame rule over raw inputs, in plain Python: the one reference both implementations of it
(trickle's select, ``engine/trickle/select_operator.py``; streaming SQL's ``tumble(s, [...])``,
``engine/continuous/tilt.py``) are checked against (``tests/engine/test_tilt_oracle.py``).

Windows hold the inputs themselves, never partial states, so a test computes each emitted aggregate from
the inputs it covers.  The rule (tests/compatibility/tremor/README.md, W1, W3, W5, W6, W9), per input of a
group, in the order the inputs are taken:

- the chain's first window takes the input, each later window what the window before it emits;
- ``size N`` counts its inputs (emissions, for a later window) and emits with the Nth one included;
- ``interval I`` is anchored by its first input at time T and emits at the first input at or past T + I,
  without that input, which anchors the next interval at its own time;
- a window that emits gives its inputs (if it holds any) before the next window's emissions, hands them to
  the next window, then starts empty; an input it did not include then goes into the empty window;
- a group whose windows all included the input is deleted (its windows start anew).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

SIZE, INTERVAL = "size", "interval"


@dataclass(frozen=True)
class Emission:
    """What one window emitted: the group, the window's place in the chain, the inputs it held (in the
    order it took them) and the position of the input that made it emit."""

    group: Hashable
    level: int
    items: tuple[Any, ...]
    by: int


@dataclass
class _Window:
    items: list[Any] = field(default_factory=list)
    counted: int = 0
    close: int | None = None


def tilt_frames(levels: Sequence[tuple[str, int]], inputs: Iterable[tuple[Hashable, int, Any]]) -> list[Emission]:
    """The emissions of a chain of windows (``(SIZE, n)`` or ``(INTERVAL, duration)``) over ``inputs`` of
    ``(group, time, item)``, in the order they are taken, in the order they are emitted."""
    chains: dict[Hashable, list[_Window]] = {}
    out: list[Emission] = []
    for position, (group, t, item) in enumerate(inputs):
        chain = chains.setdefault(group, [_Window() for _ in levels])
        handed: list[Any] = [item]
        all_included = True
        for level, ((kind, n), window) in enumerate(zip(levels, chain, strict=True)):
            if kind == SIZE:
                window.counted += 1
                include = emit = window.counted == n
                if emit:
                    window.counted = 0
            else:
                include = False
                emit = window.close is not None and t >= window.close
                if window.close is None or emit:
                    window.close = t + n
            if include:
                window.items += handed
            all_included = all_included and include
            if not emit:
                if not include:
                    window.items += handed
                break
            held, window.items = window.items, []
            if held:
                out.append(Emission(group, level, tuple(held), position))
            if not include:
                window.items += handed
            handed = held
        if all_included:
            del chains[group]
    return out
