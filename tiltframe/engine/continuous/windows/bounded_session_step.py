"""Sessions with start and end conditions (Proton's ``session(s, 5s, [start, end])``) in a continuous
query's processor.  A mixin of ``session.SessionStep``, which holds the state it works on.

Per key, in event-time order, a session starts at an event that meets the start condition (events before
it belong to no session and are not aggregated) and ends at the next event that meets the end condition,
or after the gap like any session.  ``[`` / ``]`` keep the starting / ending event in the session, ``(`` /
``)`` leave it out.  At one event time, events that meet the start condition come first and those that meet
the end condition last; the event that starts a session does not end it.

An out-of-order event above the watermark can end a session earlier or start one earlier, so the open
sessions are kept as one partial state per (key, event time, flags) and cut again at each call.  A session
ended by an event closes when the watermark reaches that event, one ended by the gap when the watermark
reaches its last event plus the gap.  Events that belong to no session are forgotten once they are below
the watermark (no later event can start a session before them).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tiltframe.aggregates.layout import AGG_EVENT_TIMESTAMP, AGG_TIMESTAMP
from tiltframe.engine.continuous.columns import (
    CLOSE,
    DIRTY,
    END,
    FLAG,
    FOLLOWED,
    LAST,
    MEMBER,
    NEXT,
    PIECE,
    WE,
    WS,
    StepParts,
    is_empty,
)
from tiltframe.retrieval.pandas_states import TS, build_states

#: The order of flags at one event time (starting events first, ending ones last), and back: the same
#: permutation, since it swaps 0 and 1, and 2 and 3.
_RANK = np.array([1, 0, 3, 2])
#: The PIECE of a segment in no session.
NO_SESSION = np.iinfo(np.int64).min


class BoundedSessions(StepParts):
    """The bounded-session part of one processor call."""

    def _take_bounded(self, events: pd.DataFrame) -> None:
        """New events as one partial state per (event time, flags, key), merged into the segments kept, and
        every segment assigned to its session again."""
        rank = _RANK[events[FLAG].fillna(0).to_numpy(dtype="int64")]
        identity = events[TS].to_numpy(dtype="int64") * 4 + rank
        atoms = build_states(events.assign(**{AGG_TIMESTAMP: identity}), self.layout, int(self.now or 0))
        atoms[WS] = atoms[AGG_TIMESTAMP].to_numpy(dtype="int64") // 4
        atoms[FLAG] = _RANK[atoms[AGG_TIMESTAMP].to_numpy(dtype="int64") % 4]
        atoms[LAST] = self.now
        atoms[DIRTY] = True
        segments = atoms if is_empty(self.open) else pd.concat([self.open, atoms], ignore_index=True)
        self.open = self._assign_bounded(self._merge(segments))

    def _assign_bounded(self, segments: pd.DataFrame) -> pd.DataFrame:
        """Each segment's session (PIECE: its starting event's time), whether it is aggregated (MEMBER), the
        time of the event that ended its session (END) and of the group's next event after the session
        (NEXT); sessions that changed are marked dirty, and segments no session can take any more dropped."""
        keys = list(self.query.keys)
        code = segments.groupby(keys, sort=False, dropna=False).ngroup().to_numpy() if keys else np.zeros(len(segments))
        order = np.lexsort((segments[AGG_TIMESTAMP].to_numpy(dtype="int64"), code))
        seg = segments.iloc[order].reset_index(drop=True)
        group = code[order]
        ts = seg[WS].to_numpy(dtype="int64")
        flags = seg[FLAG].to_numpy(dtype="int64")
        start, stop, ended = bounded_spans(group, ts, flags, int(self.window.gap_ms or 0))
        n = len(seg)
        idx = np.arange(n)
        inside = start >= 0
        first, last = np.where(inside, start, 0), np.where(inside, stop, 0)
        member = inside & ((idx != first) | self.window.start_inclusive)
        member &= (idx != last) | ~ended | self.window.end_inclusive
        piece = np.where(inside, ts[first], NO_SESSION)
        after = np.minimum(last + 1, n - 1)
        has_next = inside & (last + 1 < n) & (group[after] == group[last])
        before_piece = seg[PIECE].to_numpy() if PIECE in seg.columns else np.full(n, np.nan)
        before_member = seg[MEMBER].to_numpy() if MEMBER in seg.columns else np.full(n, np.nan)
        seg[PIECE] = piece
        seg[MEMBER] = member
        seg[END] = np.where(inside & ended, ts[last], np.nan)
        seg[NEXT] = np.where(has_next, ts[after], np.nan)
        # A session is news when a segment joined, left or arrived: all its members are marked dirty.
        changed = seg[DIRTY].to_numpy(dtype=bool)
        changed |= pd.isna(before_piece) | (before_piece != piece) | (before_member != member)
        touched = pd.DataFrame({"g": group[changed], "p": piece[changed]})
        moved = changed & ~pd.isna(before_piece)
        touched = pd.concat([touched, pd.DataFrame({"g": group[moved], "p": before_piece[moved]})])
        touched = touched.astype("int64").drop_duplicates().assign(_t=True)
        hit = pd.DataFrame({"g": group, "p": piece}).merge(touched, on=["g", "p"], how="left")["_t"].notna()
        seg[DIRTY] = seg[DIRTY].to_numpy(dtype=bool) | (hit.to_numpy() & member)
        # Segments below the watermark in no session, or in a session without members that has closed.
        marks = self.marks(seg)
        if marks is None:
            return seg
        closes = np.where(ended, ts[last], ts[last] + int(self.window.gap_ms or 0))
        members = pd.Series(member).groupby(np.where(inside, first, -1)).transform("any").to_numpy(dtype=bool)
        gone = (~inside & (ts < marks)) | (inside & ~members & (closes <= marks))
        return seg[~gone].reset_index(drop=True)

    def _bounded_groups(self) -> pd.DataFrame:
        """The open sessions, their members merged: ``WE`` the end as emitted when final, ``CLOSE`` the
        watermark that closes the session, ``FOLLOWED`` whether its end is known."""
        assert self.open is not None
        members = self.open[self.open[MEMBER].to_numpy(dtype=bool)]
        pieces = self._merge(members.assign(**{AGG_TIMESTAMP: members[PIECE].to_numpy(dtype="int64")}))
        end = pieces[END].to_numpy(dtype="float64")
        has_end = ~np.isnan(end)
        gap_end = pieces[AGG_EVENT_TIMESTAMP].to_numpy(dtype="int64") + int(self.window.gap_ms or 0)
        pieces[WE] = np.where(has_end, end + (1 if self.window.end_inclusive else 0), gap_end).astype("int64")
        pieces[CLOSE] = np.where(has_end, end, gap_end)
        pieces[FOLLOWED] = has_end | ~np.isnan(pieces[NEXT].to_numpy(dtype="float64"))
        return pieces


def bounded_spans(group: np.ndarray, ts: np.ndarray, flags: np.ndarray, gap: int) -> tuple[np.ndarray, ...]:
    """Sessions over segments sorted by group and time: per segment, the position of its session's first
    and last segment (-1: in no session) and whether an ending event closed that session.

    A run is a group's segments less than ``gap`` apart.  In a run, a session starts at the first segment
    flagged start (bit 1), and ends at the next one flagged end (bit 2) or with the run; the next session
    starts at the first start after it.  One round per session of the longest run, each over all runs."""
    n = len(ts)
    if n == 0:
        return np.zeros(0, dtype="int64"), np.zeros(0, dtype="int64"), np.zeros(0, dtype=bool)
    idx = np.arange(n)
    big = n
    new_run = np.ones(n, dtype=bool)
    if n > 1:
        new_run[1:] = (group[1:] != group[:-1]) | (ts[1:] - ts[:-1] >= gap)
    run = np.cumsum(new_run) - 1
    firsts = np.flatnonzero(new_run)
    run_end = np.append(firsts[1:] - 1, n - 1)

    def next_at(marked: np.ndarray) -> np.ndarray:
        """The first position at or after each one, in its run, that is ``marked`` (``big``: none)."""
        at = pd.Series(np.where(marked, idx, big)[::-1])
        return at.groupby(run[::-1]).cummin().to_numpy()[::-1]

    next_start = next_at((flags & 1) > 0)
    next_end_from = next_at((flags & 2) > 0)
    next_end = np.full(n, big)
    same_run = np.append(run[1:] == run[:-1], False)
    next_end[same_run] = next_end_from[1:][same_run[:-1]]
    cur = firsts.copy()
    active = np.arange(len(firsts))
    starts, stops, ends = [], [], []
    while active.size:
        s = next_start[cur[active]]
        found = s < big
        active, s = active[found], s[found]
        if not active.size:
            break
        e = next_end[s]
        by_end = e < big
        stop = np.where(by_end, e, run_end[active])
        starts.append(s)
        stops.append(stop)
        ends.append(by_end)
        cur[active] = stop + 1
        active = active[by_end & (stop + 1 <= run_end[active])]
    start = np.full(n, -1)
    stop_at = np.full(n, -1)
    ended = np.zeros(n, dtype=bool)
    if starts:
        s_all, e_all, b_all = np.concatenate(starts), np.concatenate(stops), np.concatenate(ends)
        order = np.argsort(s_all, kind="stable")
        s_all, e_all, b_all = s_all[order], e_all[order], b_all[order]
        k = np.searchsorted(s_all, idx, side="right") - 1
        inside = (k >= 0) & (idx <= e_all[np.maximum(k, 0)])
        start[inside] = s_all[k[inside]]
        stop_at[inside] = e_all[k[inside]]
        ended[inside] = b_all[k[inside]]
    return start, stop_at, ended
