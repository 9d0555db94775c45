"""Session windows of a continuous query's processor: new events as per-event-time partial states, the
bucket's segments cut into sessions and pieces again, and the rows last emitted following a piece that
moves; the open sessions are kept in the ``sessions`` table.  Sessions with start and end conditions are
``bounded_session_step.py``'s."""

from __future__ import annotations

import numpy as np
import pandas as pd

from tiltframe.aggregates.layout import AGG_EVENT_TIMESTAMP, AGG_TIMESTAMP
from tiltframe.engine.continuous.columns import (
    DIRTY,
    FOLLOWED,
    LAST,
    MEMBER,
    MWS,
    NEXT,
    PIECE,
    SL,
    SS,
    WE,
    WS,
    hits,
    is_empty,
)
from tiltframe.engine.continuous.step import Step
from tiltframe.engine.continuous.windows.bounded_session_step import BoundedSessions
from tiltframe.model.continuous import EmitPolicy
from tiltframe.model.windows import SessionWindow
from tiltframe.retrieval.pandas_states import TS, build_states


class SessionStep(BoundedSessions, Step):
    """One processor call of a session window query."""

    window: SessionWindow  # type: ignore[assignment]

    def _take_windowed(self, events: pd.DataFrame) -> None:
        """New events as one partial state per (event time, key), then every segment of the bucket cut into
        sessions and pieces again; segments of a final session are merged per piece."""
        if self.window.is_bounded:
            self._take_bounded(events)
            self._follow_pieces()
            return
        atoms = build_states(events.assign(**{AGG_TIMESTAMP: events[TS]}), self.layout, int(self.now or 0))
        atoms[WS] = atoms[AGG_TIMESTAMP]
        atoms[LAST] = self.now
        atoms[DIRTY] = True
        segments = atoms if is_empty(self.open) else pd.concat([self.open, atoms], ignore_index=True)
        segments = segments.reset_index(drop=True)
        gap, length = int(self.window.gap_ms or 0), self.window.max_length_ms
        keys = list(self.query.keys)
        # Sessions over the segments and the open sessions (which remember where a cut session started).
        members = pd.DataFrame({k: segments[k].to_numpy() for k in keys})
        members[SS] = segments[WS].to_numpy(dtype="int64")
        members[SL] = segments[AGG_EVENT_TIMESTAMP].to_numpy(dtype="int64")
        members[LAST] = segments[LAST].to_numpy()
        members["_row"] = np.arange(len(segments))
        if not is_empty(self.sessions):
            members = pd.concat([members, self.sessions.assign(_row=-1)], ignore_index=True)
        group = members.groupby(keys, sort=False, dropna=False).ngroup() if keys else pd.Series(0, members.index)
        members["_g"] = group.to_numpy()
        members = members.sort_values(["_g", SS, SL], kind="stable").reset_index(drop=True)
        reach = members.groupby("_g", sort=False)[SL].cummax().shift(1).to_numpy(dtype="float64")
        first = members["_g"].ne(members["_g"].shift(1)).to_numpy()
        new = first | (members[SS].to_numpy() - reach >= gap)
        members["_sid"] = np.cumsum(new)
        bysession = members.groupby("_sid", sort=False)
        start = bysession[SS].transform("min").to_numpy(dtype="int64")
        spans = {SS: (SS, "min"), SL: (SL, "max"), LAST: (LAST, "max")}
        self.sessions = bysession.agg(**{k: (k, "first") for k in keys}, **spans).reset_index(drop=True)
        # Pieces and merge identities of the segments.
        rows = members["_row"].to_numpy()
        of_segment = rows >= 0
        session_start = np.empty(len(segments), dtype="int64")
        session_start[rows[of_segment]] = start[of_segment]
        seg_start = segments[WS].to_numpy(dtype="int64")
        piece, following = self._pieces(members, rows, len(segments), int(length or 0))
        segments[NEXT] = following
        if length:
            marks = self.marks(segments)
            final = piece <= marks if marks is not None else np.zeros(len(segments), dtype=bool)
            identity = np.where(final, piece, seg_start)
        else:
            identity = session_start
        if PIECE in segments.columns:  # a piece that moved (earlier start, bridged sessions) has news to emit
            before = segments[PIECE].to_numpy(dtype="float64")
            segments[DIRTY] = segments[DIRTY].to_numpy(dtype=bool) | (before != piece)
        segments[PIECE] = piece
        segments[AGG_TIMESTAMP] = identity
        self.open = self._merge(segments)
        self._follow_pieces()

    @staticmethod
    def _pieces(members: pd.DataFrame, rows: np.ndarray, n: int, length: int) -> tuple[np.ndarray, np.ndarray]:
        """Proton's max-length rule over ``members`` (sorted by group and time, numbered by session): a piece
        starts at its session's first event and the first event at or past its start plus ``length`` (0:
        none) starts the next one.  The piece start of the n segments, and the start of the piece after
        theirs in the group (NaN: none yet), which decides how their piece ends (``_groups``)."""
        ts = members[SS].to_numpy(dtype="int64")
        sid = members["_sid"].to_numpy()
        piece = members.groupby("_sid", sort=False)[SS].transform("min").to_numpy(dtype="int64")
        while length:  # one round per piece of the longest session
            over = ts >= piece + length
            if not over.any():
                break
            later = pd.Series(np.where(over, ts, np.iinfo(np.int64).max)).groupby(sid).transform("min")
            piece = np.where(over, later.to_numpy(dtype="int64"), piece)
        owner = pd.DataFrame({"_g": members["_g"].to_numpy(), "_p": piece})
        starts = owner.drop_duplicates().reset_index(drop=True)
        starts["_n"] = starts.groupby("_g", sort=False)["_p"].shift(-1).to_numpy(dtype="float64")
        following = owner.merge(starts, on=["_g", "_p"], how="left")["_n"].to_numpy(dtype="float64")
        mine = rows >= 0
        out_piece = np.empty(n, dtype="int64")
        out_next = np.full(n, np.nan)
        out_piece[rows[mine]] = piece[mine]
        out_next[rows[mine]] = following[mine]
        return out_piece, out_next

    def _follow_pieces(self) -> None:
        """Rows last emitted follow their session piece when it moves: each one now belongs to the piece
        holding the event time it started at (pieces never lose events while open)."""
        memory = self.emitted
        if is_empty(memory) or is_empty(self.open):
            return
        keys = list(self.query.keys)
        assert self.open is not None
        members = self.open[self.open[MEMBER].to_numpy(dtype=bool)] if self.window.is_bounded else self.open
        pieces = members.groupby([*keys, PIECE], sort=False, dropna=False)[WS].min().reset_index()
        both = pd.concat([pieces[keys], memory[keys]], ignore_index=True)
        code = both.groupby(keys, sort=False, dropna=False).ngroup().to_numpy() if keys else np.zeros(len(both))
        pieces = pieces.assign(_code=code[: len(pieces)], _at=pieces[WS].astype("int64"))
        memory = memory.assign(_code=code[len(pieces) :], _at=memory[MWS].astype("int64"), _pos=np.arange(len(memory)))
        found = pd.merge_asof(
            memory.sort_values("_at")[["_at", "_code", "_pos"]],
            pieces.sort_values("_at")[["_at", "_code", PIECE]],
            on="_at",
            by="_code",
            direction="backward",
        ).sort_values("_pos")
        moved = found[PIECE].to_numpy(dtype="float64")
        self.emitted = self.emitted.assign(
            **{AGG_TIMESTAMP: np.where(np.isnan(moved), memory[AGG_TIMESTAMP], moved).astype("int64")}
        )

    def _groups(self) -> pd.DataFrame:
        """The groups the policy emits: the segments merged per piece."""
        assert self.open is not None
        if self.window.is_bounded:
            return self._bounded_groups()
        pieces = self._merge(self.open.assign(**{AGG_TIMESTAMP: self.open[PIECE]}))
        # A piece a later event of its group follows is closed (Proton closes it at that event): it ends at
        # start + max length when that event is at or past it (the max length is checked first), else at
        # its last event + gap.  The last piece ends at last + gap when the watermark closes it.
        end = pieces[AGG_EVENT_TIMESTAMP].to_numpy(dtype="int64") + int(self.window.gap_ms or 0)
        following = pieces[NEXT].to_numpy(dtype="float64") if NEXT in pieces.columns else np.full(len(pieces), np.nan)
        if self.window.max_length_ms:
            mark = pieces[PIECE].to_numpy(dtype="int64") + int(self.window.max_length_ms)
            end = np.where(following >= mark, mark, end)
        pieces[WE] = end
        pieces[FOLLOWED] = ~np.isnan(following)
        return pieces

    def _closing(
        self, groups: pd.DataFrame, closed: np.ndarray, dirty: np.ndarray, timed_out: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Proton: a session's row before it is closed (by a later event or the watermark), or when TIMEOUT
        closes it, ends 1 ms after its last event (a change ON UPDATE reports at the close)."""
        last = groups[AGG_EVENT_TIMESTAMP].to_numpy(dtype="int64") + 1
        final = closed | groups[FOLLOWED].to_numpy(dtype=bool)
        groups[WE] = np.where(final, groups[WE].to_numpy(dtype="int64"), last)
        if self.emit.policy is EmitPolicy.ON_UPDATE:  # a row whose end became final is news (if it differs)
            dirty = dirty | final | timed_out
        return closed, dirty

    def _segments(self, groups: pd.DataFrame, chosen: np.ndarray, closed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The segments of the pieces emitted and closed."""
        assert self.open is not None
        identity = self.open.assign(**{AGG_TIMESTAMP: self.open[PIECE]})
        return hits(identity, groups[chosen], self.keys), hits(identity, groups[closed], self.keys)

    def _settled(self) -> None:
        """The open sessions that ended (the watermark passed their last event plus the gap, or TIMEOUT ran
        out) forgotten."""
        if is_empty(self.sessions):
            return
        assert self.sessions is not None
        ended = np.zeros(len(self.sessions), dtype=bool)
        marks = self.marks(self.sessions)
        if marks is not None:
            ended |= self.sessions[SL].to_numpy(dtype="float64") + int(self.window.gap_ms or 0) <= marks
        if self.emit.timeout_ms is not None and self.now is not None:
            ended |= (int(self.now) - self.sessions[LAST] >= self.emit.timeout_ms).to_numpy()
        self.sessions = self.sessions[~ended].reset_index(drop=True)
