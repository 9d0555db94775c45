"""A tilt frame (Tremor): ``tumble(stream, [time column,] [size 100, interval 1m, ...])``, a chain of windows
per group, each window's emission merged into the next."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from tiltframe.errors import DefinitionError
from tiltframe.model.windows.base import Window

#: The kinds of a tilt frame's windows: ``size N`` (emits after N inputs) and ``interval I`` (emits when an
#: input's time reaches I past the window's first input).
TILT_SIZE = "size"
TILT_INTERVAL = "interval"


@dataclass(frozen=True, slots=True, repr=False)
class TiltFrame(Window):
    """A chain of size and interval windows; each closes by its inputs, not by a watermark."""

    #: The chain, in order: ("size", N) or ("interval", milliseconds).
    levels: tuple[tuple[str, int], ...] = ()

    kind: ClassVar[str] = "tilt"
    closes_by_watermark: ClassVar[bool] = False

    def check(self) -> None:
        if not self.levels:
            raise DefinitionError.at("a tilt frame needs at least one window: write [size 100, interval 1m]", self.pos)
        for i, (_, value) in enumerate(self.levels):
            if value <= 0:
                msg = "the size or interval of a tilt frame's window must be greater than 0"
                raise DefinitionError.at(msg, self.pos_of(f"level{i}"))

    def refuse_emit(self, policy: str, *, changelog: bool, given: tuple[str, ...]) -> tuple[str, str] | None:
        """A tilt frame emits as Tremor's windows do: each window when it is full or its interval passed."""
        if changelog or policy != "AFTER WINDOW CLOSE":
            what = "EMIT CHANGELOG" if changelog else f"EMIT {policy}"
            msg = f"{what} is not supported on a tilt frame: each of its windows emits when full or its interval passed"
            return msg, "policy"
        for part, word in (("delay", "WITH DELAY"), ("timeout", "TIMEOUT")):
            if part in given:
                msg = f"{word} is not supported on a tilt frame: its windows close by their inputs, not by a watermark"
                return msg, part
        return None
