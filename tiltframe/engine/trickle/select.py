"""One trickle select over a stream of events, an event (or a timer tick) at a time, as Tremor's select
operator runs it (the rules, with their sources in Tremor's code: tests/compatibility/tremor/README.md).

Per event: ``where``; the event's groups (``group by``: ``set`` adds a value to every group, ``each`` forks
every group into one per element); then, per group in that order, the chain of windows of the tilt frame:

- the first window takes the event, every later one the state the window before it emits;
- an interval window runs on the event's ingest time (or its ``script``'s value): its first input anchors
  it, and the first input at or after anchor + interval makes it emit without that input, which anchors
  the next interval at its own time;
- a size window counts its inputs (1 each, or the ``script``'s weight) and emits with the input that
  reaches the size included, keeping the excess;
- a window that emits and holds data gives one output (the select's expression over its aggregates,
  kept if ``having`` holds on it), then hands its state to the next window, then starts empty; its
  output comes before the next window's;
- a group whose windows all took the event into the state they emitted is deleted (it holds nothing).

A select without windows evaluates its expression on each event, once per group.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from tiltframe.functions.trickle_stats import STATES, State
from tiltframe.functions.trickle_values import Scope, TrickleRuntimeError, evaluate, is_number, type_name
from tiltframe.lang.checks.trickle import aggregate_calls, nodes_in
from tiltframe.model.trickle import GroupEach, GroupExpr, Select, TrickleQuery, WindowDef, dimensions

#: Tremor's error when a new group would pass the windows' ``max_groups``.
MAX_GROUPS_ERROR = "Maximum number of groups reached ({limit}): the event's group {key} is not taken"


def group_key(values: list[Any]) -> str:
    """A group's key: its values as compact JSON with sorted record keys (Tremor's ``sorted_serialize``)."""
    return json.dumps(values, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


@dataclass
class _Window:
    """One window of one group's chain."""

    spec: WindowDef
    states: list[State]
    holds: bool = False  # has taken an input since it last emitted
    close: int | None = None  # interval windows: the time at or past which an input makes it emit
    counted: int = 0  # size windows


@dataclass
class _Group:
    values: list[Any]
    chain: list[_Window] = field(default_factory=list)


class SelectOperator:
    """The state of one select: its groups and their windows."""

    def __init__(self, select: Select, query: TrickleQuery) -> None:
        self.select = select
        self.windows = [query.window(name) for name in select.windows]
        self.aggregates = aggregate_calls(select.target)
        #: Each aggregate's constant arguments after the first (``hdr``'s percentiles).
        self.params = [[evaluate(a, Scope()) for a in c.args[1:]] for c in self.aggregates]
        limits = [w.max_groups for w in self.windows if w.max_groups is not None]
        self.max_groups = min(limits) if limits else None
        self.groups: dict[str, _Group] = {}
        #: The nodes of the select's expression that are expressions it groups by, each with the index of
        #: its value in the group's values (an emission gives them those).
        grouped = {part.expr: i for i, part in enumerate(dimensions(select.group_by)) if isinstance(part, GroupExpr)}
        self.grouped = {id(node): grouped[node] for node in nodes_in(select.target) if node in grouped}

    # --- per input ------------------------------------------------------------------------------------

    def on_event(self, event: Any, ingest_ns: int) -> list[Any]:
        """The outputs of one event, in order."""
        scope = Scope(event=event, ingest_ns=ingest_ns, cardinality=len(self.groups))
        if self.select.where is not None and not _condition(evaluate(self.select.where, scope), "where"):
            return []
        outputs: list[Any] = []
        for values in self._groups_of(event, scope):
            key = group_key(values)
            group_value = [*values, key]
            if not self.windows:
                self._emit(outputs, Scope(event=event, group=group_value, given=self._given(values),
                                          ingest_ns=ingest_ns, cardinality=len(self.groups)))
                continue
            group = self.groups.get(key)
            new = group is None
            if group is None:
                if self.max_groups is not None and len(self.groups) >= self.max_groups:
                    raise TrickleRuntimeError(MAX_GROUPS_ERROR.format(limit=self.max_groups, key=key))
                group = _Group(values, [_Window(w, self._fresh()) for w in self.windows])
            removable = self._run_chain(group, event, ingest_ns, outputs, tick=False)
            if removable:
                self.groups.pop(key, None)
            elif new:
                self.groups[key] = group
        return outputs

    def on_tick(self, ns: int) -> list[Any]:
        """A timer tick at ``ns``: each live group's first window sees the time (interval windows may emit)."""
        outputs: list[Any] = []
        if not self.windows:
            return outputs
        for key, group in list(self.groups.items()):
            if self._run_chain(group, None, ns, outputs, tick=True):
                del self.groups[key]
        return outputs

    # --- the chain ------------------------------------------------------------------------------------

    def _run_chain(self, group: _Group, event: Any, t: int, outputs: list[Any], *, tick: bool) -> bool:
        """Feed the event (or tick) into the group's chain; True when every window reached took it into
        the state it emitted (the group holds nothing then)."""
        incoming: list[State] | None = None  # what the window before handed on (None: the event itself)
        removable = True
        group_value = [*group.values, group_key(group.values)]
        for level, window in enumerate(group.chain):
            if tick and level == 0 and (window.spec.size is not None or window.spec.script is not None):
                return False  # ticks do nothing to size windows, nor to windows on a script's time
            include, emit = self._decide(window, event, t, tick=tick and level == 0)
            if include or not emit:  # taken now: into the state it emits, or with no emission at all
                self._take(window, event, incoming, t, group_value, tick=tick)
            if not emit:
                return False  # the window goes on holding it
            handed, had = window.states, window.holds
            if had:
                given = self._given(group.values)
                given.update((id(c), s.value()) for c, s in zip(self.aggregates, handed, strict=True))
                self._emit(outputs, Scope(event=event, group=group_value, window=window.spec.name, given=given,
                                          ingest_ns=t, cardinality=len(self.groups)))
            window.states, window.holds = self._fresh(), False
            if not include:  # the input that made it emit starts the next window
                self._take(window, event, incoming, t, group_value, tick=tick)
            removable = removable and include
            if not had:
                return removable
            incoming, tick = handed, False  # the next window takes the state (a merge, not a tick)
        return removable

    def _decide(self, window: _Window, event: Any, t: int, *, tick: bool) -> tuple[bool, bool]:
        """(include, emit) of one window for one input, at time ``t`` (Tremor's ``Trigger`` decisions)."""
        spec = window.spec
        if spec.interval_ns is not None:
            now = t if spec.script is None or tick else _whole(evaluate(spec.script, Scope(event=event)), spec)
            if window.close is None:
                window.close = now + spec.interval_ns
                return False, False
            if now >= window.close:
                window.close = now + spec.interval_ns
                return False, True
            return False, False
        assert spec.size is not None
        weight = 1 if spec.script is None else _whole(evaluate(spec.script, Scope(event=event)), spec)
        if window.counted + weight >= spec.size:
            window.counted = window.counted + weight - spec.size
            return True, True
        window.counted += weight
        return False, False

    def _take(self, window: _Window, event: Any, incoming: list[State] | None, t: int, group: list[Any], *,
              tick: bool) -> None:
        if incoming is not None:
            for mine, theirs in zip(window.states, incoming, strict=True):
                mine.merge(theirs)
            window.holds = True
        elif not tick:
            scope = Scope(event=event, group=group, window=window.spec.name, ingest_ns=t,
                          cardinality=len(self.groups))
            for call, state in zip(self.aggregates, window.states, strict=True):
                state.add(evaluate(call.args[0], scope) if call.args else None)
            window.holds = True

    def _fresh(self) -> list[State]:
        return [STATES[c.name](*params) for c, params in zip(self.aggregates, self.params, strict=True)]

    # --- output ---------------------------------------------------------------------------------------

    def _given(self, values: list[Any]) -> dict[int, Any]:
        """The values of the grouped expressions of the select's expression, for a group's ``values``."""
        return {node: values[i] for node, i in self.grouped.items()}

    def _emit(self, outputs: list[Any], scope: Scope) -> None:
        out = evaluate(self.select.target, scope)
        having = self.select.having
        if having is not None and not _condition(evaluate(having, Scope(event=out, group=scope.group,
                                                                       window=scope.window)), "having"):
            return
        outputs.append(out)

    def _groups_of(self, event: Any, scope: Scope) -> list[list[Any]]:
        if self.select.group_by is None:
            return [[None]]
        groups: list[list[Any]] = [[]]
        for part in dimensions(self.select.group_by):
            value = evaluate(part.expr, scope)
            if isinstance(part, GroupEach):
                if not isinstance(value, list):
                    raise TrickleRuntimeError(f"each(...) needs an array, not {type_name(value)}")
                groups = [[*g, v] for g in groups for v in value]
            else:
                groups = [[*g, value] for g in groups]
        return groups


def _condition(value: Any, clause: str) -> bool:
    if not isinstance(value, bool):
        raise TrickleRuntimeError(f"{clause} needs true or false, not {type_name(value)}")
    return value


def _whole(value: Any, spec: WindowDef) -> int:
    if not is_number(value) or isinstance(value, float) or value < 0:
        raise TrickleRuntimeError(f"the script of window {spec.name} gives {type_name(value)} {value!r}, "
                                  "not a whole number of at least 0")
    return int(value)
