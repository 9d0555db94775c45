"""Emission of a continuous query's processor: which groups close and which are emitted under the EMIT
policy, their output rows (HAVING applied), changelog retractions, and the rows last emitted.  A base
of ``step.Step``, which holds the state it works on; a window kind (``windows/``) overrides the hooks
(``_groups``, ``_closing``, ``_segments``, ``_settled``) where its groups close otherwise."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from tiltframe.aggregates.layout import AGG_TIMESTAMP
from tiltframe.engine.continuous.columns import (
    CLOSE,
    DELTA,
    DIRTY,
    EMITTED_AT,
    IMAX,
    IMIN,
    LAST,
    MWS,
    OUT_KIND,
    PERIOD,
    PERIOD_IF,
    ROW,
    WE,
    WS,
    StepParts,
    hits,
    is_empty,
    version_outputs,
)
from tiltframe.functions.scalars import json_value
from tiltframe.model.continuous import (
    EMIT_VERSION,
    WINDOW_END,
    WINDOW_START,
    EmitPolicy,
)
from tiltframe.retrieval.evaluate import evaluate, holds
from tiltframe.store.reads.pandas_merges import finalize


class Emission(StepParts):
    """The emitting part of one processor call."""

    def _emit(self) -> None:
        if is_empty(self.open):
            return
        emit, window = self.emit, self.window
        groups = self._groups()
        now = int(self.now) if self.now is not None else None
        closed = np.zeros(len(groups), dtype=bool)
        timed_out = np.zeros(len(groups), dtype=bool)
        if emit.timeout_ms is not None and now is not None:
            timed_out = now - groups[LAST].to_numpy(dtype="float64") >= emit.timeout_ms
        marks = self.marks(groups)
        if marks is not None:
            closes = groups[CLOSE] if CLOSE in groups.columns else groups[WE]
            closed |= closes.to_numpy(dtype="float64") <= marks
        closed, dirty = self._closing(groups, closed, groups[DIRTY].to_numpy(dtype=bool), timed_out)
        kinds = np.full(len(groups), ROW, dtype=object)
        policy = emit.policy
        if policy is EmitPolicy.AFTER_KEY_EXPIRE:
            span = (groups[IMAX] - groups[IMIN]).to_numpy(dtype="float64")
            exceeded = np.nan_to_num(span, nan=-1.0) > int(emit.maxspan_ms or 0)
            closed = exceeded | timed_out
            chosen = exceeded | (timed_out & (not emit.only))
        else:
            if window.is_windowed:
                closed |= timed_out
            if policy is EmitPolicy.AFTER_WINDOW_CLOSE:
                chosen = closed
            elif policy is EmitPolicy.PERIODIC:
                # At each period every open group (REPEAT: always; else if anything arrived, which the
                # driver knows across buckets), and every window's final row when it closes.
                due = self._crossed(emit.interval_ms)
                chosen = closed | due
                kinds = np.where(closed | emit.repeat, ROW, np.where(dirty, PERIOD, PERIOD_IF))
            elif policy is EmitPolicy.ON_UPDATE:
                chosen = dirty & (self._crossed(emit.batch_ms) | closed)
            else:
                msg = f"EMIT {policy.value if policy else None} is not supported"
                raise NotImplementedError(msg)
        if chosen.any():
            self._emit_rows(
                groups[chosen].reset_index(drop=True), only_changes=policy is EmitPolicy.ON_UPDATE, kinds=kinds[chosen]
            )
        self._settle(groups, chosen, closed)

    def _groups(self) -> pd.DataFrame:
        """The groups the policy emits: the open rows."""
        assert self.open is not None
        return self.open

    def _closing(
        self, groups: pd.DataFrame, closed: np.ndarray, dirty: np.ndarray, timed_out: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Which groups are closed (the watermark's closes given) and which have news, as the kind decides
        (a count window closes full, a session's end moves); ``groups`` may be changed in place."""
        return closed, dirty

    def _segments(self, groups: pd.DataFrame, chosen: np.ndarray, closed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The rows of ``open`` emitted and closed, from the groups emitted and closed (the same rows, unless
        ``_groups`` merged several open rows into one group)."""
        return chosen, closed

    def _settled(self) -> None:
        """What the kind keeps besides its open groups, brought up to date after the closes."""

    def _settle(self, groups: pd.DataFrame, chosen: np.ndarray, closed: np.ndarray) -> None:
        """Mark the emitted groups clean, drop the closed ones (and their last rows)."""
        assert self.open is not None
        seg_chosen, seg_closed = self._segments(groups, chosen, closed)
        if seg_chosen.any():
            self.open.loc[seg_chosen, DIRTY] = False
        if seg_closed.any():
            self.open = self.open[~seg_closed].reset_index(drop=True)
            if not is_empty(self.emitted):
                self.emitted = self.emitted[~hits(self.emitted, groups[closed], self.keys)].reset_index(drop=True)
        self._settled()

    def _outputs(self, groups: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray]:
        """The query's output columns of ``groups`` (group identity first) and which rows pass HAVING."""
        final = finalize(groups, self.layout)
        scope = final.rename(columns={AGG_TIMESTAMP: WINDOW_START})
        scope[WINDOW_START] = groups[WS].to_numpy()
        scope[WINDOW_END] = groups[WE].to_numpy()
        scope[EMIT_VERSION] = -1  # the driver numbers the emits (query.stamp_emit_version)
        values = pd.DataFrame({k: groups[k].to_numpy() for k in self.keys})
        for name, expr in self.query.outputs:
            values[name] = _column(evaluate(expr, scope, None), len(scope))
        keep = np.ones(len(values), dtype=bool)
        for condition in (self.query.having, self.query.filter):
            if condition is not None:
                keep &= holds(condition, scope, None)
        values[MWS] = groups[WS].to_numpy()
        return values, keep

    def _emit_rows(self, groups: pd.DataFrame, *, only_changes: bool, kinds: np.ndarray) -> None:
        """Rows of ``groups`` (of the given row kinds); a changelog retracts every row last emitted for each
        group first.  With ``only_changes`` a group whose values equal its one last row is skipped."""
        names = list(self.config.output_names)
        values, keep = self._outputs(groups)
        values[OUT_KIND] = kinds
        if is_empty(self.emitted):
            previous = pd.DataFrame({"_gid": np.zeros(0, dtype="int64")})
        else:
            assert self.emitted is not None
            ids = values[self.keys].assign(_gid=np.arange(len(values)))
            previous = ids.merge(self.emitted, on=self.keys, how="inner")
        gids = previous["_gid"].to_numpy(dtype="int64")
        counts = np.bincount(gids, minlength=len(values))
        if only_changes and not previous.empty:
            equal = np.ones(len(previous), dtype=bool)
            for n in (n for n in names if n not in version_outputs(self.query)):
                equal &= _same(values[n].to_numpy(dtype=object)[gids], previous[_last(n)].to_numpy(dtype=object))
            same = np.zeros(len(values), dtype=bool)
            same[gids[equal]] = True
            unchanged = same & (counts == 1) & keep
            if unchanged.any():
                values, keep = values[~unchanged].reset_index(drop=True), keep[~unchanged]
                previous = previous[~unchanged[gids]]
        rows = []
        changelog = self.emit.changelog
        if changelog and not previous.empty:
            retract = pd.DataFrame({n: previous[_last(n)].to_numpy() for n in names})
            retract[DELTA] = -1
            retract[OUT_KIND] = np.asarray(kinds, dtype=object)[previous["_gid"].to_numpy(dtype="int64")]
            rows.append(retract)
        new_rows = values[keep].reset_index(drop=True)[[*names, OUT_KIND]].copy()
        if changelog:
            new_rows[DELTA] = 1
        rows.append(new_rows)
        emitted_rows = pd.concat([r for r in rows if not r.empty] or [new_rows], ignore_index=True)
        emitted_rows[EMITTED_AT] = self.now
        self.out.append(emitted_rows)
        self._remember(values, keep)

    def _remember(self, values: pd.DataFrame, keep: np.ndarray) -> None:
        """Keep the last row emitted per group (for changelog retractions and on-update comparisons); a
        group whose row no longer passes HAVING has none."""
        fresh = pd.DataFrame({k: values[k].to_numpy() for k in [*self.keys, MWS]})
        for n in self.config.output_names:
            fresh[_last(n)] = values[n].to_numpy()
        fresh = fresh[keep]
        old = self.emitted
        if not is_empty(old):
            assert old is not None
            fresh = pd.concat([old[~hits(old, values, self.keys)], fresh], ignore_index=True)
        self.emitted = fresh.reset_index(drop=True)



def _last(name: str) -> str:
    """The column of an output's last emitted value."""
    return f"_last:{name}"


def _column(value: Any, n: int) -> Any:
    if isinstance(value, pd.Series):
        return value.to_numpy()
    return np.full(n, value, dtype=object) if not isinstance(value, np.ndarray) else value


def _same(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Element-wise equality of two object arrays, nulls (None, NaN, NA) equal to each other."""
    a_null, b_null = pd.isna(a), pd.isna(b)
    left = np.where(a_null, None, a)
    right = np.where(b_null, None, b)
    if any(isinstance(v, list | np.ndarray) for v in (*left, *right)):  # group_array lists
        return np.array([json_value(x) == json_value(y) for x, y in zip(left, right, strict=True)], dtype=bool)
    return np.asarray(left == right, dtype=bool) | (a_null & b_null)
