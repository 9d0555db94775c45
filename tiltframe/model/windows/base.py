"""What every window kind of a continuous query has: the stream, its time column, where it was written, and
the checks a kind's sizes go through.  Each kind is a subclass holding only the sizes it takes
(``tumble.py``, ``hop.py``, ...), so no code reads a size another kind has."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

from tiltframe.errors import DefinitionError
from tiltframe.model.expressions import Expr, Pos

#: The fields of the one ``Window`` class that held every kind before the kinds were classes, in its order
#: and with its defaults: ``repr`` writes them so, since a continuous query's checkpoint is named by a digest
#: of its repr (``engine.continuous.query.query_id``) and a query must find the state it kept.
_FORMER_FIELDS: tuple[tuple[str, Any], ...] = (
    ("size_ms", None), ("slide_ms", None), ("gap_ms", None), ("max_length_ms", None), ("count", None),
    ("levels", ()), ("start_condition", None), ("end_condition", None), ("start_inclusive", True),
    ("end_inclusive", True),
)


@dataclass(frozen=True, slots=True, repr=False)
class Window:
    """The source of a continuous query: a whole stream (global aggregation) or a window over it.

    ``time_attribute`` is the event-time attribute named in the window call, else the stream's declared
    one (``@eventTime``, set by validation); ``None`` means arrival (processing) time.
    """

    stream: str
    time_attribute: str | None = None
    pos: Pos | None = field(default=None, compare=False, kw_only=True)
    #: Where each part was written ("stream", "time_attribute", "size", "slide", "gap", "max_length",
    #: "count", "level<i>", "conditions"), so validation can point at the part it refuses.
    positions: tuple[tuple[str, Pos], ...] = field(default=(), compare=False, kw_only=True)

    #: The kind's name in messages ("a tumble window needs its size") and in the former repr.
    kind: ClassVar[str]
    #: Whether events fall into windows (all but a global aggregation): ``window_start`` and ``window_end``
    #: exist, ``EMIT AFTER WINDOW CLOSE`` is the default.
    is_windowed: ClassVar[bool] = True
    #: Whether the watermark (greatest event time minus the delay) closes its windows and makes events late
    #: (tumble, hop and session); the others close by their inputs or never.
    closes_by_watermark: ClassVar[bool] = True
    #: The sizes a spec must give (a spec built in Python may leave one out; the parser never does).
    needed: ClassVar[tuple[str, ...]] = ()

    @property
    def is_bounded(self) -> bool:
        """A session with start and end conditions."""
        return False

    @property
    def conditions(self) -> tuple[Expr, Expr] | None:
        """A session's start and end conditions; None for every other window."""
        return None

    def sizes(self) -> tuple[tuple[str, int | None], ...]:
        """The kind's sizes as (part, value), in the order they are checked."""
        return ()

    def check(self) -> None:
        """Refuse sizes that are missing or not above 0 (``DefinitionError`` at the part written)."""
        for part, value in self.sizes():
            words = part.replace("_", " ")
            if value is None:
                if part in self.needed:
                    raise DefinitionError.at(f"a {self.kind} window needs its {words}", self.pos)
                continue
            if value <= 0:
                raise DefinitionError.at(f"the {words} of a window must be greater than 0", self.pos_of(part))

    def refuse_emit(self, policy: str, *, changelog: bool, given: tuple[str, ...]) -> tuple[str, str] | None:
        """Why this kind cannot emit so: the resolved policy as written ("AFTER WINDOW CLOSE"), a changelog or
        not, the options given ("delay", "timeout").  As (message, the EMIT part to point at); None: it can.
        (Plain values: ``Emit`` lives in ``model.continuous``, which imports the windows.)"""
        return None

    def pos_of(self, part: str) -> Pos | None:
        """Where ``part`` was written, else the window itself (a spec built in Python has no positions)."""
        return next((pos for name, pos in self.positions if name == part), self.pos)

    def __repr__(self) -> str:
        values = dict(_FORMER_FIELDS)
        values.update((f.name, getattr(self, f.name)) for f in fields(self) if f.compare)
        kind = f"<WindowKind.{self.kind.upper()}: '{self.kind}'>"
        shown = ", ".join(f"{name}={values[name]!r}" for name in ("stream", "time_attribute", *dict(_FORMER_FIELDS)))
        return f"Window(kind={kind}, {shown})"
