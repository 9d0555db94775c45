"""The two steps a trickle query's events take on the executors (``spark_run`` runs them): staging, where
each line is parsed and each select reading ``in`` evaluates what its groups' windows need of the event
(``Staging``), and the windows, where each group's chain takes its inputs in arrival order (``Windows``,
a ``transformWithStateInPandas`` processor keyed by a hash bucket of the group).

Timer ticks, for a query with a select whose first window is an interval window on ingest time
(``ticks_reach``), come as rows of a clock source (``engine.continuous.clock``), one per bucket: each
bucket's groups whose first window is due (their times in the map state ``due``) see the tick.  A tick's
outputs come after the events before it, in the order of the groups' keys.
"""

from __future__ import annotations

import json
import pickle
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle, TimerValues

from tiltframe.engine.trickle.select_operator import Input, SelectOperator, group_key, text_times
from tiltframe.functions.trickle_values import TrickleRuntimeError
from tiltframe.lang.checks.trickle_queries import nodes_in
from tiltframe.model.expressions import Call
from tiltframe.model.trickle import INPUT_PORT, TrickleQuery

#: The order of outputs: the event that made them (by arrival), the select (readers of ``in`` in Tremor's
#: order), the group (in the event's order), then the output's place among that group's.
ORDER = ["ingest_ns", "file", "block", "line", "reader", "fork", "n"]
#: Rows between the executors' two steps: an input of a group's windows (``in``), a whole event for a
#: sequential run (``ev``), a timer tick (``tick``), a made output (``out``), an event that could not be
#: taken (``err``) or a partition's count of events read (``read``).  Out of the second step come outputs,
#: errors, counts and, from bucket 0, each tick (``tick``: the selects after the first see it on the driver).
STAGED = ("bucket int, kind string, reader int, grp string, vals string, args string, times string, "
          "stream string, text string, reason string, ingest_ns long, file string, block long, line long, "
          "fork int, n int")
OUTPUT = ("kind string, stream string, text string, reason string, ingest_ns long, file string, block long, "
          "line long, reader int, fork int, n int")
OUTPUT_COLUMNS = [c.split()[0] for c in OUTPUT.split(", ")]
STAGED_COLUMNS = [c.split()[0] for c in STAGED.split(", ")]
#: Where a tick's rows sort among the rows of its time (the ``file`` column): its outputs after the events'
#: (a group's by its key), and the tick itself for the driver after those.
TICK_OUTPUT = "\uffff"
_AFTER_TICK = "\uffff\uffff\uffff"
#: Errors are recorded under this name in the run's record (``<data_dir>/trickle/<id>/rejected``).
ERROR_STREAM = "err"


def needs_every_group(query: TrickleQuery) -> bool:
    """Whether a select reading ``in`` counts its groups (``max_groups``, ``win::cardinality``): each event
    then needs the state of every group of the select, so the run is sequential (the module's docstring)."""
    for select in query.selects:
        if select.source != INPUT_PORT:
            continue  # run on the driver, over the outputs of the selects before it: every group at hand
        if any(query.window(name).max_groups is not None for name in select.windows):
            return True
        for clause in (select.target, select.where, select.having):
            if clause is not None and any(isinstance(n, Call) and n.name == "win::cardinality"
                                          for n in nodes_in(clause)):
                return True
    return False


def ticks_reach(query: TrickleQuery) -> bool:
    """Whether a timer tick can make a select of the query emit (its first window is an interval window on
    ingest time): the run then takes ticks from a clock."""
    return any(SelectOperator(s, query).ticks for s in query.selects)


def staged_ticks(clock: DataFrame) -> DataFrame:
    """The clock's rows (``engine.continuous.clock``: one per bucket and move) as step 3's tick rows."""
    types = dict(c.split() for c in STAGED.split(", "))
    given = {"bucket": F.col("bucket"), "kind": F.lit("tick"), "reader": F.lit(0),
             "ingest_ns": F.col("now") * 1_000_000, "file": F.lit(TICK_OUTPUT), "block": F.lit(0),
             "line": F.lit(0), "fork": F.lit(0), "n": F.lit(0)}
    return clock.where(F.col("now").isNotNull()).select(
        *(given.get(c, F.lit(None)).cast(types[c]).alias(c) for c in STAGED_COLUMNS))


def readers(query: TrickleQuery) -> list[SelectOperator]:
    """The selects reading ``in``, in the order an event reaches them (the one written last first, as in
    Tremor and ``replay.QueryGraph``)."""
    return [SelectOperator(s, query) for s in reversed(query.selects) if s.source == INPUT_PORT]


def _bucket(text: str, buckets: int) -> int:
    return zlib.crc32(text.encode("utf-8")) % buckets


def shown_path(uri: str) -> str:
    """A file's URI as Spark gives it (``file:/a/b%20c``) as its path, for messages; other URIs as they are."""
    parts = urlsplit(uri)
    return unquote(parts.path) if parts.scheme == "file" else uri


def _where(file: str, block: int, line: int) -> str:
    return f"{file}, line {line}" if block == 0 else f"{file}, line {line} after byte {block}"


def dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


@dataclass
class Staging:
    """Step 2, on the executors: every line of a partition (in file order) as rows for the windows."""

    query: TrickleQuery
    buckets: int
    sequential: bool = field(init=False)

    def __post_init__(self) -> None:
        self.sequential = needs_every_group(self.query)
        #: The text of each event of the frame with text times (for its error line, should one be no time).
        self._texts: dict[tuple[Any, ...], str] = {}

    def __call__(self, frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        ops = readers(self.query)
        lines: dict[tuple[str, int], int] = {}  # a partition may hold several files, or part of one
        read = 0
        for frame in frames:
            rows: list[tuple[Any, ...]] = []
            timed: list[tuple[int, Input]] = []  # the rows whose windows' scripts gave text times
            self._texts.clear()
            for text, file, mtime_us, block in zip(frame["value"], frame["file"], frame["mtime_us"], frame["block"],
                                                   strict=True):
                number = lines[(file, block)] = lines.get((file, block), 0) + 1
                if number == 1 and block == 0:
                    text = text.removeprefix("\ufeff")
                if not text.strip():
                    continue  # a blank line is no event
                read += 1
                self._stage(rows, ops, text, shown_path(file), int(block), number, int(mtime_us) * 1000, timed)
            if timed:
                rows = self._read_times(rows, timed, ops)
            yield pd.DataFrame(rows, columns=STAGED_COLUMNS)
        yield pd.DataFrame([(0, "read", 0, None, None, None, None, None, None, None, 0, "", 0, 0, 0, read)],
                           columns=STAGED_COLUMNS)

    def _read_times(self, rows: list[tuple[Any, ...]], timed: list[tuple[int, Input]], ops: list[SelectOperator]
                    ) -> list[tuple[Any, ...]]:
        """The text times of a frame's staged inputs read at once (``select.text_times``); an event with one
        that is no time goes on ``err`` with the reason instead, and, as for any error, neither that select
        (none of its groups) nor the selects after it take the event."""
        failed: dict[tuple[Any, ...], tuple[int, str]] = {}  # an event's spot: the first select failing, why
        for reader in {rows[at][2] for at, _ in timed}:
            mine = [(at, item) for at, item in timed if rows[at][2] == reader]
            items, reasons = text_times([item for _, item in mine], ops[reader].windows)
            for (at, _), item, reason in zip(mine, items, reasons, strict=True):
                row = rows[at]
                spot = row[10:14]
                if reason is not None:
                    if spot not in failed or failed[spot][0] > reader:
                        failed[spot] = (reader, reason)
                else:
                    rows[at] = (*row[:6], dumps(item.times), *row[7:])
        if not failed:
            return rows
        kept = [r for r in rows if r[10:14] not in failed or r[2] < failed[r[10:14]][0] or r[1] not in ("in", "out")]
        for spot, (reader, reason) in failed.items():
            event = self._texts[spot]
            where = _where(*spot[1:])
            kept.append((_bucket(f"{spot[1]}:{spot[2]}:{spot[3]}", self.buckets), "err", reader, None, None, None,
                         None, ERROR_STREAM, event, f"{where}: {reason}", *spot, 0, 0))
        return kept

    def _stage(self, rows: list[tuple[Any, ...]], ops: list[SelectOperator], text: str, file: str, block: int,
               line: int, ingest_ns: int, timed: list[tuple[int, Input]]) -> None:
        spot = (ingest_ns, file, block, line)
        where = _where(file, block, line)
        spread = _bucket(f"{file}:{block}:{line}", self.buckets)
        try:
            event = json.loads(text)
        except json.JSONDecodeError as exc:
            reason = f"{where}: not JSON ({exc.msg} at column {exc.colno})"
            rows.append((spread, "err", 0, None, None, None, None, ERROR_STREAM, text, reason, *spot, 0, 0))
            return
        if self.sequential:  # every select of the event in step 3, in one bucket
            rows.append((0, "ev", 0, None, None, None, None, None, text, None, *spot, 0, 0))
            return
        for rank, op in enumerate(ops):
            try:
                if not op.windows:
                    made = [(op.select.into, out) for out in op.on_event(event, ingest_ns)]
                    staged = []
                else:
                    made = []
                    staged = [(values, op.input_of(event, values, ingest_ns))
                              for values in op.groups_of(event, ingest_ns)]
            except TrickleRuntimeError as exc:
                rows.append((spread, "err", rank, None, None, None, None, ERROR_STREAM, text, f"{where}: {exc}",
                             *spot, 0, 0))
                return  # the selects after it do not see the event (Tremor's order)
            for n, (stream, out) in enumerate(made):
                rows.append((spread, "out", rank, None, None, None, None, stream, dumps(out), None, *spot, 0, n))
            for fork, (values, item) in enumerate(staged):
                grp = group_key(values)  # records with their keys sorted: one group however they are written
                texts = any(isinstance(t, str) for t in item.times)
                if texts:
                    timed.append((len(rows), item))
                    self._texts[spot] = text
                rows.append((_bucket(f"{rank}:{grp}", self.buckets), "in", rank, grp, dumps(values),
                             dumps(item.args), None if texts else dumps(item.times), None, None, None, *spot, fork, 0))


class Windows(StatefulProcessor):
    """Step 3, per bucket: each group's chain of windows, kept in map state between micro-batches."""

    def __init__(self, query: TrickleQuery) -> None:
        self.query = query
        self.ticking = ticks_reach(query)
        self.sequential = needs_every_group(query)

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.groups = handle.getMapState("groups", "reader int, grp string", "data binary")
        if self.ticking:  # when each group's first window is due (a state only such queries have)
            self.due = handle.getMapState("due", "reader int, grp string", "at long")

    def handleInputRows(self, key: Any, rows: Iterator[pd.DataFrame], timerValues: TimerValues
                        ) -> Iterator[pd.DataFrame]:
        frames = [f for f in rows if len(f)]
        if not frames:
            return
        batch = pd.concat(frames, ignore_index=True).sort_values(ORDER, kind="stable")
        ops = readers(self.query)
        touched: set[tuple[int, str]] = set()
        loaded: dict[tuple[int, str], bytes] | None = None  # a sequential run's groups, all of them
        out: list[tuple[Any, ...]] = []
        for row in batch.itertuples(index=False):
            spot = (row.ingest_ns, row.file, row.block, row.line, row.reader, row.fork)
            if row.kind == "ev" or (row.kind == "tick" and self.sequential):
                if loaded is None:
                    loaded = self._load_all(ops)
                _every_select(ops, row, out)
            elif row.kind == "tick":
                self._tick(ops, int(row.ingest_ns), touched, out)
            elif row.kind != "in":
                out.append((row.kind, row.stream, row.text, row.reason, *spot, row.n))
                continue
            else:
                self._take(ops, row, touched, out)
            if row.kind == "tick" and int(key[0]) == 0:  # for the selects after the first, on the driver
                out.append(("tick", None, None, None, row.ingest_ns, _AFTER_TICK, 0, 0, 0, 0, 0))
        for reader, grp in touched:
            group = ops[reader].groups.get(grp)
            if group is None:
                self.groups.removeKey((reader, grp))
            else:
                self.groups.updateValue((reader, grp), (pickle.dumps(group),))
            if self.ticking:
                due = ops[reader].due(grp)
                if due is None:
                    self.due.removeKey((reader, grp))
                else:
                    self.due.updateValue((reader, grp), (due,))
        if loaded is not None:
            self._store_all(ops, loaded)
        yield pd.DataFrame(out, columns=OUTPUT_COLUMNS)

    def _group(self, ops: list[SelectOperator], reader: int, grp: str, touched: set[tuple[int, str]]) -> None:
        """The group ``grp`` of select ``reader`` into its operator, from the map state the first time."""
        if (reader, grp) not in touched:
            touched.add((reader, grp))
            if self.groups.containsKey((reader, grp)):
                ops[reader].groups[grp] = pickle.loads(self.groups.getValue((reader, grp))[0])

    def _take(self, ops: list[SelectOperator], row: Any, touched: set[tuple[int, str]],
              out: list[tuple[Any, ...]]) -> None:
        spot = (row.ingest_ns, row.file, row.block, row.line, row.reader, row.fork)
        op = ops[row.reader]
        self._group(ops, int(row.reader), row.grp, touched)
        item = Input(int(row.ingest_ns), tuple(json.loads(row.args)), tuple(json.loads(row.times)))
        made: list[Any] = []
        try:
            op.take(json.loads(row.vals), item, made)
        except TrickleRuntimeError as exc:
            reason = f"{_where(row.file, row.block, row.line)}: {exc} (group {row.grp})"
            out.append(("err", ERROR_STREAM, None, reason, *spot, len(made)))
        out.extend(("out", op.select.into, dumps(value), None, *spot, n) for n, value in enumerate(made))

    def _tick(self, ops: list[SelectOperator], ns: int, touched: set[tuple[int, str]],
              out: list[tuple[Any, ...]]) -> None:
        """A tick at ``ns`` for the bucket's groups that are due, in the order of their keys (each group's
        outputs placed by its key: the same order whichever bucket holds it)."""
        due = sorted(entry for entry, (at,) in self.due.iterator() if at <= ns)
        for reader, grp in due:
            self._group(ops, reader, grp, touched)
            made: list[Any] = []
            where = (ns, TICK_OUTPUT + grp, 0, 0, reader, 0)
            try:
                ops[reader].tick_group(grp, ns, made)
            except TrickleRuntimeError as exc:
                out.append(("err", ERROR_STREAM, json.dumps({"tick": ns}), f"tick at {ns} ns: {exc} (group {grp})",
                            *where, len(made)))
            out.extend(("out", ops[reader].select.into, dumps(v), None, *where, n) for n, v in enumerate(made))

    def _load_all(self, ops: list[SelectOperator]) -> dict[tuple[int, str], bytes]:
        """Every group of every select into ``ops``; what each was, to write back only the changed ones."""
        loaded = {}
        for (reader, grp), (data,) in self.groups.iterator():
            ops[reader].groups[grp] = pickle.loads(data)
            loaded[(reader, grp)] = bytes(data)
        return loaded

    def _store_all(self, ops: list[SelectOperator], loaded: dict[tuple[int, str], bytes]) -> None:
        for reader, op in enumerate(ops):
            for grp, group in op.groups.items():
                data = pickle.dumps(group)
                if loaded.pop((reader, grp), None) != data:
                    self.groups.updateValue((reader, grp), (data,))
        for entry in loaded:  # groups deleted in the batch
            self.groups.removeKey(entry)

    def close(self) -> None:
        pass


def _every_select(ops: list[SelectOperator], row: Any, out: list[tuple[Any, ...]]) -> None:
    """A sequential run's event (or tick) through every select reading ``in``, as ``replay.QueryGraph``
    pushes it: an error stops it there (the outputs already made stay) and comes out on ``err``."""
    tick = row.kind == "tick"
    ns = int(row.ingest_ns)
    spot = (ns, TICK_OUTPUT if tick else row.file, row.block, row.line, 0, 0)
    made: list[tuple[str, Any]] = []
    try:
        for op in ops:
            values = op.on_tick(ns) if tick else op.on_event(json.loads(row.text), ns)
            made.extend((op.select.into, value) for value in values)
    except TrickleRuntimeError as exc:
        reason = f"tick at {ns} ns: {exc}" if tick else f"{_where(row.file, row.block, row.line)}: {exc}"
        text = json.dumps({"tick": ns}) if tick else row.text
        out.append(("err", ERROR_STREAM, text, reason, *spot, len(made)))
    out.extend(("out", stream, dumps(value), None, *spot, n) for n, (stream, value) in enumerate(made))
