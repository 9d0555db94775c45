"""Tilt frames (Tremor): ``tumble(s, [ts,] [size 2, interval 1m, ...])``, a chain of windows per group where
each window's emitted aggregate is merged into the next window of the chain.

Tremor's rule (tremor-pipeline/src/op/trickle/window.rs, ``GroupWindow::on_event``), followed input by input:

- the first window takes the events; every later window takes the emissions of the window before it;
- ``size N`` counts its inputs and emits with the Nth one included;
- ``interval I`` starts at its first input's time T and emits at the first input whose time is at or past
  T + I, without that input, which starts the next interval at its own time;
- a window that emits passes its aggregate (if it holds any) to the next window with the time of the input
  that made it emit, then starts empty.

The cascade is sequential, so the call walks the events in order (event time, then arrival) in Python,
keeping only which partial states each emission merges; the states themselves are built and merged once,
vectorised, at the end.  The held partial states live in ``open`` (``AGG_TIMESTAMP`` the window's place in
the chain) and the windows' counters (inputs counted, interval end) in the ``sessions`` table.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from tiltframe.aggregates.layout import AGG_TIMESTAMP
from tiltframe.engine.continuous.columns import ROW, WE, WS, is_empty
from tiltframe.engine.continuous.step import Step
from tiltframe.model.windows import TILT_SIZE, TiltFrame
from tiltframe.retrieval.pandas_states import SEQ, TS, build_states
from tiltframe.store.reads.pandas_merges import merge_rows

LEVEL = "_level"
COUNTED = "_counted"  # size windows: inputs counted since the last emission
NEXT = "_next"  # interval windows: the time at or past which the next input makes the window emit


@dataclass
class _Level:
    """One window of one group's chain: the partial states it holds (leaf ids) and its counters."""

    leaves: list[int] = field(default_factory=list)
    start: float = np.nan
    end: float = np.nan
    counted: int = 0
    next: float = np.nan


class TiltStep(Step):
    """One processor call of a tilt frame query: its windows emit as their inputs arrive, in that order."""

    window: TiltFrame  # type: ignore[assignment]
    in_emission_order: ClassVar[bool] = True  # as in Tremor

    def _emit(self) -> None:
        """Nothing more: the windows emitted as the events came (``_take_windowed``)."""

    def _take_windowed(self, events: pd.DataFrame) -> None:
        levels = self.window.levels
        self.emitted = None  # each emission stands alone: nothing to retract or compare
        group_keys = [k for k in self.keys if k != AGG_TIMESTAMP]
        held = self.open if not is_empty(self.open) else None
        ordered = events.sort_values([TS, SEQ], kind="stable").reset_index(drop=True)
        # One partial row per event, in the order of ``ordered`` (each its own group: AGG_TIMESTAMP its SEQ).
        fresh = build_states(ordered.assign(**{AGG_TIMESTAMP: ordered[SEQ]}), self.layout, int(self.now or 0))
        leaves = fresh if held is None else pd.concat([held.drop(columns=[WS, WE]), fresh], ignore_index=True)
        first_event = 0 if held is None else len(held)
        chains: dict[tuple[Any, ...], list[_Level]] = {}
        if held is not None:
            for i, row in enumerate(held[[*group_keys, AGG_TIMESTAMP, WS, WE]].itertuples(index=False)):
                chain = chains.setdefault(tuple(row[: len(group_keys)]), [_Level() for _ in levels])
                level = chain[int(row[len(group_keys)])]
                level.leaves, level.start, level.end = [i], float(row[-2]), float(row[-1])
        if not is_empty(self.sessions):
            assert self.sessions is not None
            for row in self.sessions[[*group_keys, LEVEL, COUNTED, NEXT]].itertuples(index=False):
                chain = chains.setdefault(tuple(row[: len(group_keys)]), [_Level() for _ in levels])
                level = chain[int(row[len(group_keys)])]
                level.counted, level.next = int(row[-2]), float(row[-1])
        emissions: list[tuple[tuple[Any, ...], int, list[int], float, float]] = []
        times = ordered[TS].to_numpy(dtype="int64")
        columns = [ordered[k].tolist() for k in group_keys]
        for i in range(len(ordered)):
            key = tuple(c[i] for c in columns)
            chain = chains.setdefault(key, [_Level() for _ in levels])
            t = float(times[i])
            self._cascade(chain, 0, t, [first_event + i], t, t, key, emissions)
        self._settle_tilt(chains, leaves, group_keys)
        if emissions:
            rows = [leaves.iloc[ids].assign(**{AGG_TIMESTAMP: n}) for n, (_, _, ids, _, _) in enumerate(emissions)]
            merged = merge_rows(pd.concat(rows, ignore_index=True), self.layout)
            merged = merged.sort_values(AGG_TIMESTAMP, kind="stable").reset_index(drop=True)
            merged[WS] = [e[3] for e in emissions]
            merged[WE] = [e[4] for e in emissions]
            merged[AGG_TIMESTAMP] = [e[1] for e in emissions]
            self._emit_rows(merged, only_changes=False, kinds=np.full(len(merged), ROW, dtype=object))
            self.emitted = None

    def _cascade(
        self,
        chain: list[_Level],
        k: int,
        t: float,
        ids: list[int],
        start: float,
        end: float,
        key: tuple[Any, ...],
        emissions: list[tuple[tuple[Any, ...], int, list[int], float, float]],
    ) -> None:
        """One input (partial states ``ids``, empty when the window before held nothing) into window ``k``."""
        level, (kind, size) = chain[k], self.window.levels[k]
        if kind == TILT_SIZE:
            level.counted += 1
            emit = include = level.counted >= size
            if emit:
                level.counted -= size
        else:
            include = False
            emit = not np.isnan(level.next) and level.next <= t
            if np.isnan(level.next) or emit:
                level.next = t + size
        if include:
            self._hold(level, ids, start, end)
        if emit:
            if level.leaves:
                emissions.append((key, k, list(level.leaves), level.start, level.end))
            if k + 1 < len(chain):
                self._cascade(chain, k + 1, t, list(level.leaves), level.start, level.end, key, emissions)
            level.leaves, level.start, level.end = [], np.nan, np.nan
        if not include:
            self._hold(level, ids, start, end)

    @staticmethod
    def _hold(level: _Level, ids: list[int], start: float, end: float) -> None:
        if ids:
            level.leaves += ids
            level.start = np.fmin(level.start, start)
            level.end = np.fmax(level.end, end)

    def _settle_tilt(
        self, chains: dict[tuple[Any, ...], list[_Level]], leaves: pd.DataFrame, group_keys: list[str]
    ) -> None:
        """What each window holds, merged into one partial row, into ``open``; the counters into ``sessions``."""
        rows, books, counters = [], [], []
        for key, chain in chains.items():
            for k, level in enumerate(chain):
                if level.leaves:
                    rows.append(leaves.iloc[level.leaves].assign(**{AGG_TIMESTAMP: len(books)}))
                    books.append((*key, k, level.start, level.end))
                counters.append((*key, k, level.counted, level.next))
        self.sessions = pd.DataFrame(counters, columns=[*group_keys, LEVEL, COUNTED, NEXT]) if counters else None
        if not rows:
            self.open = None
            return
        merged = merge_rows(pd.concat(rows, ignore_index=True), self.layout)
        merged = merged.sort_values(AGG_TIMESTAMP, kind="stable").reset_index(drop=True)
        book = pd.DataFrame(books, columns=[*group_keys, AGG_TIMESTAMP, WS, WE])
        merged[AGG_TIMESTAMP] = book[AGG_TIMESTAMP].to_numpy()
        merged[WS] = book[WS].to_numpy()
        merged[WE] = book[WE].to_numpy()
        self.open = merged
