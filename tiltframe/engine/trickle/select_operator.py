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
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from tiltframe.aggregates.trickle_stats import STATES, State
from tiltframe.functions.trickle_times import text_times_ms
from tiltframe.functions.trickle_values import Scope, TrickleRuntimeError, evaluate, is_number, type_name
from tiltframe.lang.checks.trickle_queries import aggregate_calls, nodes_in
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


@dataclass(frozen=True)
class Input:
    """What a group's chain of windows needs of one event (or tick), evaluated beforehand: the time ``t``
    (ingest time, or the tick's), the aggregates' arguments (None for a tick) and each window's ``script``
    value (None: no script).  A Spark run evaluates it on the executor that reads the event and ships it
    to the group's state; nothing in the chain looks at the event itself."""

    t: int
    args: tuple[Any, ...] | None = None
    times: tuple[int | None, ...] = ()

    @property
    def tick(self) -> bool:
        return self.args is None


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
        """The outputs of one event, in order: group by group, each group's input evaluated just before its
        windows take it (an error stops the event there, as in Tremor: the groups before keep it)."""
        outputs: list[Any] = []
        for values in self.groups_of(event, ingest_ns):
            if not self.windows:
                self._emit(outputs, Scope(event=event, group=[*values, group_key(values)],
                                          given=self._given(values), ingest_ns=ingest_ns,
                                          cardinality=len(self.groups)))
            else:
                item = self.input_of(event, values, ingest_ns)
                resolved, reasons = text_times([item], self.windows)
                if reasons[0] is not None:
                    raise TrickleRuntimeError(reasons[0])
                self.take(values, resolved[0], outputs)
        return outputs

    def on_tick(self, ns: int) -> list[Any]:
        """A timer tick at ``ns``: each live group's first window sees the time (interval windows may emit)."""
        outputs: list[Any] = []
        for key in list(self.groups):
            self.tick_group(key, ns, outputs)
        return outputs

    @property
    def ticks(self) -> bool:
        """Whether a timer tick can make this select emit: its first window is an interval window on ingest
        time (no ``script``); ticks do nothing to size windows or to windows on an event's own time."""
        return bool(self.windows) and self.windows[0].interval_ns is not None and self.windows[0].script is None

    def tick_group(self, key: str, ns: int, outputs: list[Any]) -> None:
        """A timer tick at ``ns`` for the group ``key`` alone (deleted if it then holds nothing)."""
        if self.ticks and self._run_chain(self.groups[key], Input(ns, None, (None,) * len(self.windows)), outputs):
            del self.groups[key]

    def due(self, key: str) -> int | None:
        """The time at or after which a tick makes the group ``key``'s first window emit (None: no tick can)."""
        group = self.groups.get(key)
        return group.chain[0].close if self.ticks and group is not None else None

    def groups_of(self, event: Any, ingest_ns: int) -> list[list[Any]]:
        """The values of each group ``event`` goes to, in order (none when ``where`` does not hold)."""
        scope = Scope(event=event, ingest_ns=ingest_ns, cardinality=len(self.groups))
        if self.select.where is not None and not _condition(evaluate(self.select.where, scope), "where"):
            return []
        return self._groups_of(event, scope)

    def input_of(self, event: Any, values: list[Any], ingest_ns: int) -> Input:
        """What the windows of the group ``values`` take of ``event``: the aggregates' arguments (in the first
        window's scope, each checked by its aggregate: the group's windows take the event whole or not at all)
        and each window's script value."""
        scope = Scope(event=event, group=[*values, group_key(values)], window=self.windows[0].name,
                      ingest_ns=ingest_ns, cardinality=len(self.groups))
        args = tuple(evaluate(c.args[0], scope) if c.args else None for c in self.aggregates)
        for call, arg in zip(self.aggregates, args, strict=True):
            STATES[call.name].check(arg)
        times = tuple(None if w.script is None else _script_value(evaluate(w.script, Scope(event=event)), w)
                      for w in self.windows)
        return Input(ingest_ns, args, times)

    def take(self, values: list[Any], item: Input, outputs: list[Any]) -> None:
        """Feed one group its input: the group is made if new (within ``max_groups``) and deleted once it
        holds nothing."""
        key = group_key(values)
        group = self.groups.get(key)
        new = group is None
        if group is None:
            if self.max_groups is not None and len(self.groups) >= self.max_groups:
                raise TrickleRuntimeError(MAX_GROUPS_ERROR.format(limit=self.max_groups, key=key))
            group = _Group(values, [_Window(w, self._fresh()) for w in self.windows])
        removable = self._run_chain(group, item, outputs)
        if removable:
            self.groups.pop(key, None)
        elif new:
            self.groups[key] = group

    # --- the chain ------------------------------------------------------------------------------------

    def _run_chain(self, group: _Group, item: Input, outputs: list[Any]) -> bool:
        """Feed the input (event or tick) into the group's chain; True when every window reached took it
        into the state it emitted (the group holds nothing then)."""
        incoming: list[State] | None = None  # what the window before handed on (None: the input itself)
        removable = True
        tick = item.tick
        group_value = [*group.values, group_key(group.values)]
        for level, window in enumerate(group.chain):
            if tick and level == 0 and (window.spec.size is not None or window.spec.script is not None):
                return False  # ticks do nothing to size windows, nor to windows on a script's time
            include, emit = self._decide(window, item, level, tick=tick and level == 0)
            if include or not emit:  # taken now: into the state it emits, or with no emission at all
                self._take(window, item, incoming)
            if not emit:
                return False  # the window goes on holding it
            handed, had = window.states, window.holds
            if had:
                given = self._given(group.values)
                given.update((id(c), s.value()) for c, s in zip(self.aggregates, handed, strict=True))
                self._emit(outputs, Scope(group=group_value, window=window.spec.name, given=given,
                                          ingest_ns=item.t, cardinality=len(self.groups)))
            window.states, window.holds = self._fresh(), False
            if not include:  # the input that made it emit starts the next window
                self._take(window, item, incoming)
            removable = removable and include
            if not had:
                return removable
            incoming = handed  # the next window takes the state (a merge, not a tick)
        return removable

    def _decide(self, window: _Window, item: Input, level: int, *, tick: bool) -> tuple[bool, bool]:
        """(include, emit) of one window for one input (Tremor's ``Trigger`` decisions).  A scripted window
        reached by a tick's merge runs on the tick's time."""
        spec = window.spec
        scripted = item.times[level] if item.times else None
        if spec.interval_ns is not None:
            now = item.t if spec.script is None or tick or scripted is None else scripted
            if window.close is None:
                window.close = now + spec.interval_ns
                return False, False
            if now >= window.close:
                window.close = now + spec.interval_ns
                return False, True
            return False, False
        assert spec.size is not None
        weight = 1 if spec.script is None or scripted is None else scripted
        if window.counted + weight >= spec.size:
            window.counted = window.counted + weight - spec.size
            return True, True
        window.counted += weight
        return False, False

    @staticmethod
    def _take(window: _Window, item: Input, incoming: list[State] | None) -> None:
        if incoming is not None:
            for mine, theirs in zip(window.states, incoming, strict=True):
                mine.merge(theirs)
            window.holds = True
        elif item.args is not None:
            for arg, state in zip(item.args, window.states, strict=True):
                state.add(arg)
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


def _script_value(value: Any, spec: WindowDef) -> int | str:
    """A window script's value: a whole number of at least 0 (an interval window's time in nanoseconds, as
    in Tremor, or a size window's weight), or for an interval window a text time, which ``text_times``
    reads."""
    if isinstance(value, str) and spec.interval_ns is not None:
        return value
    return _whole(value, spec)


def text_times(items: Sequence[Input], windows: Sequence[WindowDef]) -> tuple[list[Input], list[str | None]]:
    """``items`` with the text times their windows' scripts gave read as docs/time.md's table says (epoch
    milliseconds, Siddhi's form, ISO-8601: ``functions.trickle_times``, vectorised over all of them), in
    nanoseconds; and for each item the reason it cannot be taken (a text that is no time), or None."""
    texts = [(i, level, t) for i, item in enumerate(items) for level, t in enumerate(item.times) if isinstance(t, str)]
    if not texts:
        return list(items), [None] * len(items)
    where = [f"the script of window {windows[level].name}" for _, level, _ in texts]
    ms, why = text_times_ms(pd.Series([t for _, _, t in texts], dtype=object), where)
    times = [list(item.times) for item in items]
    reasons: list[str | None] = [None] * len(items)
    for (i, level, _), value, reason in zip(texts, ms.tolist(), why, strict=True):
        times[i][level] = value * 1_000_000
        if reason is not None and reasons[i] is None:
            reasons[i] = reason
    return [Input(item.t, item.args, tuple(t)) for item, t in zip(items, times, strict=True)], reasons


def _whole(value: Any, spec: WindowDef) -> int:
    if not is_number(value) or isinstance(value, float) or value < 0:
        raise TrickleRuntimeError(f"the script of window {spec.name} gives {type_name(value)} {value!r}, "
                                  "not a whole number of at least 0")
    return int(value)
