"""Validation of a continuous query's EMIT clause: the policy's defaults and the seed's (003) rules for
which policies and options fit which queries (docs/continuous.md, "EMIT")."""

from __future__ import annotations

import dataclasses
from typing import Any

from tiltframe.errors import DefinitionError, unknown
from tiltframe.lang.checks.windows import time_column
from tiltframe.model.continuous import Emit, EmitPolicy
from tiltframe.model.expressions import Pos
from tiltframe.model.streams import StreamDef
from tiltframe.model.windows import Window

#: Global aggregations emit every 2 seconds unless told otherwise (seed 003).
DEFAULT_PERIODIC_MS = 2_000

POLICY_WORDS = {
    EmitPolicy.AFTER_WINDOW_CLOSE: "AFTER WINDOW CLOSE",
    EmitPolicy.PERIODIC: "PERIODIC",
    EmitPolicy.ON_UPDATE: "ON UPDATE",
    EmitPolicy.AFTER_KEY_EXPIRE: "AFTER KEY EXPIRE",
}


def _fail(message: str, pos: Pos | None) -> DefinitionError:
    return DefinitionError.at(message, pos)


def validate_emit(emit: Emit, window: Window, stream: StreamDef, keys: tuple[str, ...]) -> Emit:
    """The policy's defaults and the seed's rules for which policies and options fit which queries."""
    windowed, policy = window.is_windowed, emit.policy
    if policy is None:
        policy = EmitPolicy.AFTER_WINDOW_CLOSE if windowed else EmitPolicy.PERIODIC
    word = POLICY_WORDS[policy]
    _emit_fields(emit, policy)
    for part, value in (
        ("interval", emit.interval_ms),
        ("batch", emit.batch_ms),
        ("delay", emit.delay_ms),
        ("timeout", emit.timeout_ms),
        ("maxspan", emit.maxspan_ms),
    ):
        if value is not None and value <= 0:
            raise _fail(f"an EMIT interval must be greater than 0, got {value}ms", emit.pos_of(part))
    changes: dict[str, Any] = {"policy": policy}
    if policy is EmitPolicy.PERIODIC and emit.interval_ms is None:
        changes["interval_ms"] = DEFAULT_PERIODIC_MS
    if not windowed:
        if policy is EmitPolicy.AFTER_WINDOW_CLOSE:
            msg = (
                f"EMIT AFTER WINDOW CLOSE needs a time window (tumble, hop or session); a global aggregation "
                f"of {stream.name} emits PERIODIC <interval>, ON UPDATE or AFTER KEY EXPIRE"
            )
            raise _fail(msg, emit.pos_of("policy"))
        late = "delay" if emit.delay_ms is not None else None
        if late is None and emit.timeout_ms is not None and policy is not EmitPolicy.AFTER_KEY_EXPIRE:
            late = "timeout"
        if late is not None:
            msg = (
                "WITH DELAY and AND TIMEOUT only can be applied to time-window based aggregations "
                f"(tumble, hop or session), not to a global aggregation of {stream.name}"
            )
            raise _fail(msg, emit.pos_of(late))
    elif policy is EmitPolicy.AFTER_KEY_EXPIRE:
        msg = (
            "EMIT AFTER KEY EXPIRE applies to a global aggregation grouped by a key (FROM a stream, "
            f"GROUP BY trace_id), not to a {window.kind} window"
        )
        raise _fail(msg, emit.pos_of("policy"))
    given = tuple(part for part, value in (("delay", emit.delay_ms), ("timeout", emit.timeout_ms)) if value is not None)
    refused = window.refuse_emit(word, changelog=emit.changelog, given=given)
    if refused is not None:
        raise _fail(refused[0], emit.pos_of(refused[1]))
    if policy is EmitPolicy.AFTER_KEY_EXPIRE:
        changes.update(_key_expire(emit, word, window, stream, keys))
    return dataclasses.replace(emit, **changes)


def _emit_fields(emit: Emit, policy: EmitPolicy) -> None:
    """Options of one policy given with another (only a spec built in Python can do that)."""
    owners = {
        "interval_ms": EmitPolicy.PERIODIC,
        "repeat": EmitPolicy.PERIODIC,
        "batch_ms": EmitPolicy.ON_UPDATE,
        "identified_by": EmitPolicy.AFTER_KEY_EXPIRE,
        "maxspan_ms": EmitPolicy.AFTER_KEY_EXPIRE,
        "only": EmitPolicy.AFTER_KEY_EXPIRE,
    }
    for name, owner in owners.items():
        if getattr(emit, name) not in (None, False) and owner is not policy:
            msg = f"EMIT option {name} belongs to {POLICY_WORDS[owner]}, not to {POLICY_WORDS[policy]}"
            raise _fail(msg, emit.pos)

def _key_expire(emit: Emit, word: str, window: Window, stream: StreamDef, keys: tuple[str, ...]) -> dict[str, Any]:
    if not keys:
        msg = f"EMIT {word} needs GROUP BY a key (such as a trace id): it emits each key's row when the key expires"
        raise _fail(msg, emit.pos_of("policy"))
    if emit.maxspan_ms is None:
        raise _fail(f"EMIT {word} needs WITH MAXSPAN <interval>, such as WITH MAXSPAN 500ms", emit.pos_of("policy"))
    column = emit.identified_by or window.time_attribute
    if column is None:
        msg = (
            f"EMIT {word} measures each key's span by a time column: write IDENTIFIED BY <column>, or declare "
            f"@eventTime('<column>') on stream {stream.name}"
        )
        raise _fail(msg, emit.pos_of("policy"))
    pos = emit.pos_of("identified_by")
    if not stream.has(column):
        raise _fail(unknown("column", column, [a.name for a in stream.attributes]), pos)
    time_column(stream, column, pos, "IDENTIFIED BY")
    return {"identified_by": column}
