"""How to run an app, checked once: the options ``tf.run`` / ``tf.start`` take as keywords and ``tiltframe run``
as flags, in one frozen object that both doors build and the runner reads (``engine.runner.Run``).

Its defaults and its checks live here only, so the two doors cannot drift apart; a bad value is a usage error
before the app is looked at, the store opened or Spark started.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING

from tiltframe.engine.inputs.file_batches import BAD_FILE_POLICIES
from tiltframe.engine.rollup.shards import Deployment
from tiltframe.errors import UsageError, unknown

if TYPE_CHECKING:
    from tiltframe.engine.rollup.reports import BatchReport
    from tiltframe.engine.sinks import Sink


@dataclass(frozen=True, slots=True)
class RunOptions:
    """One run's options, as ``tf.start`` takes them (``api.start`` tells each; docs/configuration.md)."""

    #: Where the store, checkpoints and logs live (None: ``$TILTFRAME_DATA_DIR`` or ``./tiltframe-data``,
    #: read when the run is planned, ``engine.run_plan``).
    data_dir: Path | None = None
    #: Keep watching the inputs until ``stop()`` (else read everything available, then end).
    follow: bool = False
    #: The sink of each output stream or continuous query; others go to the console.
    outputs: Mapping[str, Sink] = field(default_factory=dict)
    on_batch: Callable[[BatchReport], None] | None = None
    #: A file input's micro-batch: at most this many new files (0 or None: bounded by bytes instead) ...
    max_files_per_trigger: int | None = None
    #: ... else about this many bytes of them (None: ``$TILTFRAME_MAX_BYTES_PER_TRIGGER`` or 64 MiB; 0: no bound).
    max_bytes_per_trigger: int | None = None
    #: Which shard this run writes as (``@PartitionById``).
    deployment: Deployment = field(default_factory=Deployment)
    #: An input file that cannot be read: recorded and set aside ("skip"), or the run stops ("fail").
    on_bad_file: str = "skip"
    #: Drop what the store holds of each aggregation fed here and its checkpoint first (docs/deployment.md).
    rebuild: bool = False
    #: Where checkpoints live instead of ``<data_dir>/checkpoints`` (None: ``$TILTFRAME_CHECKPOINT_DIR``).
    checkpoint_dir: str | Path | None = None
    #: With ``follow``, a micro-batch starts at most this often.
    trigger_seconds: float = 1.0

    def __post_init__(self) -> None:
        if not self.trigger_seconds > 0:
            msg = f"trigger_seconds must be more than 0, not {self.trigger_seconds}"
            raise UsageError(msg)
        if self.on_bad_file not in BAD_FILE_POLICIES:
            msg = f"on_bad_file: {unknown('policy', self.on_bad_file, BAD_FILE_POLICIES)}"
            raise UsageError(msg)
        for name in ("max_files_per_trigger", "max_bytes_per_trigger"):
            value = getattr(self, name)
            if value is not None and value < 0:
                msg = f"{name} must be 0 or more, not {value}"
                raise UsageError(msg)
        object.__setattr__(self, "data_dir", Path(self.data_dir) if self.data_dir else None)  # "": the default
        # A copy the caller cannot change under a running run.
        object.__setattr__(self, "outputs", MappingProxyType(dict(self.outputs or {})))

    @property
    def trigger_ms(self) -> int:
        """``trigger_seconds`` as Spark's processing-time trigger takes it (at least a millisecond)."""
        return max(1, round(self.trigger_seconds * 1000))
