"""Which shard a deployment is, for aggregations partitioned by shard (Siddhi's ``@PartitionById``).

Several independent pipelines (separate Spark applications fed different parts of the input) can write
one aggregation into one server store; each writes its partial rows under its own ``SHARD_ID`` and every
retrieval merges them.  The shard id comes from ``--shard-id``, else ``$TILTFRAME_SHARD_ID``, else the
config file (``--config`` or ``$TILTFRAME_CONFIG``, TOML)::

    shard_id = "node-1"
    partition_by_id = true   # partition every aggregation that does not say (Siddhi's partitionById)

The first partitioned run records the id in the data directory, and a later run with another id is
refused: the stored rows and the checkpoints of that directory belong to the recorded shard.
"""

from __future__ import annotations

import json
import os
import re
import time
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from tiltframe.engine.rollup.markers import write_marker
from tiltframe.errors import UsageError
from tiltframe.model.aggregations import AggregationSpec

SHARD_ENV = "TILTFRAME_SHARD_ID"
CONFIG_ENV = "TILTFRAME_CONFIG"
#: The file in the data directory that holds the shard id of its first partitioned run.
RECORD = "shard.json"
_SHARD = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_CONFIG_KEYS = {"shard_id": str, "partition_by_id": bool}


@dataclass(frozen=True, slots=True)
class Deployment:
    """What this deployment is among the writers of a store."""

    shard_id: str | None = None
    #: Partition the aggregations that have no ``@PartitionById`` of their own.
    partition_by_id: bool = False

    def __post_init__(self) -> None:
        if self.shard_id is not None:
            check_shard_id(self.shard_id)

    def shard_for(self, agg: AggregationSpec) -> str:
        """The shard id that partitioned ``agg`` is written under; a clear error when there is none."""
        if self.shard_id is None:
            where = f" (line {agg.pos.line})" if agg.pos else ""
            said = "is marked @PartitionById" if agg.partition_by_id else "is partitioned by the config file"
            msg = (f"aggregation {agg.name}{where} {said}, so every deployment that writes it needs a shard id, "
                   f"and none was given: use --shard-id ID, ${SHARD_ENV} or shard_id in the config file")
            raise UsageError(msg)
        return self.shard_id


def check_shard_id(value: str, where: str = "shard id") -> str:
    if not _SHARD.fullmatch(value):
        msg = (f"{where} {value!r} is not valid: use 1 to 64 letters, digits, '.', '_' or '-', starting with a "
               f"letter or digit")
        raise UsageError(msg)
    return value


def load_deployment(
    shard_id: str | None = None, config: str | Path | None = None, env: Mapping[str, str] | None = None
) -> Deployment:
    """The deployment from the CLI option, the environment and the config file, in that order."""
    env = os.environ if env is None else env
    path = config if config is not None else env.get(CONFIG_ENV) or None
    settings = _read_config(Path(path)) if path is not None else {}
    shard = shard_id or env.get(SHARD_ENV) or settings.get("shard_id")
    if shard is not None:
        origin = ("--shard-id" if shard_id else f"${SHARD_ENV}" if env.get(SHARD_ENV)
                  else f"shard_id in {path}")
        check_shard_id(str(shard), f"{origin}:")
    return Deployment(shard, bool(settings.get("partition_by_id", False)))


def _read_config(path: Path) -> dict[str, object]:
    try:
        settings = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        msg = f"config file {path} does not exist"
        raise UsageError(msg) from None
    except tomllib.TOMLDecodeError as exc:
        msg = f"config file {path}: {exc}"
        raise UsageError(msg) from None
    for key, value in settings.items():
        if key not in _CONFIG_KEYS:
            msg = f"config file {path}: unknown setting {key!r} (known: {', '.join(_CONFIG_KEYS)})"
            raise UsageError(msg)
        if not isinstance(value, _CONFIG_KEYS[key]):
            msg = f"config file {path}: {key} = {value!r} must be a {_CONFIG_KEYS[key].__name__}"
            raise UsageError(msg)
    return settings


def claim_shard(data_dir: str | Path, shard_id: str) -> None:
    """Record ``shard_id`` as the data directory's shard, or refuse if it recorded another one."""
    record = Path(data_dir) / RECORD
    if record.exists():
        stored = json.loads(record.read_text(encoding="utf-8"))
        if stored.get("shard_id") != shard_id:
            since = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(stored.get("since_ms", 0) / 1000))
            msg = (f"the data directory {data_dir} has run as shard {stored.get('shard_id')!r} since {since}, "
                   f"and this run says shard {shard_id!r}. A shard id cannot change after the first run: the "
                   f"stored rows of that shard and its checkpoints would be continued under another SHARD_ID, "
                   f"and its restart could no longer tell its own replays. Run with --shard-id "
                   f"{stored.get('shard_id')}, or give a new shard its own --data-dir")
            raise UsageError(msg)
        return
    write_marker(record, {"shard_id": shard_id, "since_ms": time.time_ns() // 1_000_000})
