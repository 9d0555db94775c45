"""What the store records of an aggregation's definition, and the plan that takes its tables from a recorded
definition to a new one (``tiltframe migrate``, ``tiltframe validate -d``; docs/lifecycle.md).

The registry keeps only a digest of a definition (``AggregationLayout.spec_hash``), which says *that* it
changed.  :class:`Definition` keeps enough to say *what* changed, so that each change can be carried out
on the stored rows instead of refused:

- what every row of every level depends on (``rows``: the source stream and the queries before it, its
  keys and time attribute with their types, and its zone): a change there needs the whole rollup rebuilt
  from the inputs;
- the measures (aggregates and latest-event values), each with what computes it (function, expression,
  parameters and the types of the attributes it reads) and its stored columns: one added gets new
  columns, NULL in the rows stored before, and reads NULL for every bucket that starts before the time
  from which it is complete (``complete_from``), never a partial value; one removed loses its columns;
- the levels: one removed loses its table, one added is filled from a finer kept level;
- the stream's other attributes and the settings that do not shape stored rows (retention, buffer):
  applied as they are.

Pure functions over layouts and JSON, so ``validate`` can show a plan without Spark.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tiltframe.aggregates.layout import AGG_ARRIVAL_BATCH, AGG_ARRIVAL_SEQ, AggregationLayout
from tiltframe.model.aggregations import AggregateItem, ExpressionItem, KeyItem
from tiltframe.model.expressions import attributes_of

__all__ = ["Definition", "DefinitionPlan", "plan"]

#: The columns every row keeps only while some measure is a latest-event value.
_ARRIVAL_COLUMNS = (AGG_ARRIVAL_BATCH, AGG_ARRIVAL_SEQ)


@dataclass(frozen=True)
class Measure:
    """One select item that is not a key: what computes it, and the columns it stores."""

    name: str
    #: The item without its alias and source position: a change here is a different measure.
    computes: str
    columns: dict[str, str]
    #: A latest-event value (stored rows then also keep the arrival order of their latest event).
    latest: bool = False
    #: The stream attributes it reads.
    reads: tuple[str, ...] = ()


@dataclass(frozen=True)
class Definition:
    """The recorded definition of one aggregation (``TILTFRAME_DEFINITIONS``)."""

    name: str
    app: str | None
    spec_hash: str
    #: What every stored row depends on, part by part (each a description; see :func:`_row_parts`).
    rows: dict[str, str]
    attributes: dict[str, str]
    measures: tuple[Measure, ...]
    levels: tuple[str, ...]
    #: Settings that do not shape the stored rows (retention, purge, buffer, lateness), in words.
    settings: str
    #: Per measure: the epoch ms from which it is complete; buckets starting before it read NULL.
    complete_from: dict[str, int] = field(default_factory=dict)
    #: The digests of the definitions before this one, latest last: their pipelines' checkpoints are
    #: this definition's (``engine.checkpoints``).
    earlier: tuple[str, ...] = ()

    @classmethod
    def of(cls, layout: AggregationLayout, app: str | None = None) -> Definition:
        spec = layout.spec
        measures = []
        for item in spec.select:
            if isinstance(item, AggregateItem):
                cols = {s.name: s.type.value for s in layout.states if s.item == item}
                types = {} if item.arg is None else {a.name: layout.stream.attribute(a.name).type.value
                                                     for a in attributes_of(item.arg)}
                measures.append(Measure(item.alias, repr((item.function, item.arg, item.params, types)), cols,
                                        reads=tuple(types)))
            elif isinstance(item, ExpressionItem):
                value = next(v for v in layout.values if v.name == item.alias)
                types = {a.name: layout.stream.attribute(a.name).type.value for a in attributes_of(item.expr)}
                measures.append(Measure(item.alias, repr((item.expr, types)), {value.name: value.type.value},
                                        latest=True, reads=tuple(types)))
        settings = repr((spec.retention, spec.purge, spec.buffer_size, spec.ignore_events_older_than_buffer,
                         spec.allowed_lateness_ms))
        return cls(spec.name, app, layout.spec_hash, _row_parts(layout),
                   {a.name: a.type.value for a in layout.stream.attributes}, tuple(measures),
                   tuple(g.table_suffix for g in spec.granularities), settings)

    def measure(self, name: str) -> Measure | None:
        return next((m for m in self.measures if m.name == name), None)

    def to_json(self) -> str:
        return json.dumps({
            "name": self.name, "app": self.app, "spec_hash": self.spec_hash, "rows": self.rows,
            "attributes": self.attributes,
            "measures": [[m.name, m.computes, m.columns, m.latest, list(m.reads)] for m in self.measures],
            "levels": list(self.levels), "settings": self.settings, "complete_from": self.complete_from,
            "earlier": list(self.earlier),
        })

    @classmethod
    def from_json(cls, text: str) -> Definition:
        d: dict[str, Any] = json.loads(text)
        measures = tuple(Measure(n, c, cols, latest, tuple(reads)) for n, c, cols, latest, reads in d["measures"])
        return cls(d["name"], d["app"], d["spec_hash"], d["rows"], d["attributes"], measures, tuple(d["levels"]),
                   d["settings"],
                   {k: int(v) for k, v in d["complete_from"].items()}, tuple(d["earlier"]))


def _row_parts(layout: AggregationLayout) -> dict[str, str]:
    """What every stored row of every level depends on, as named parts (so a plan can say which changed)."""
    spec = layout.spec
    read = set(spec.group_by) | ({spec.time_attribute} if spec.time_attribute else set())
    keys = [repr(i) for i in spec.select if isinstance(i, KeyItem)]
    parts = {
        "source": spec.source + (f" through {_digest(repr(layout.source_queries))}" if layout.source_queries
                                 else ""),
        "group by": ", ".join(spec.group_by) + (f" (selected as {'; '.join(keys)})" if keys else ""),
        "time attribute": spec.time_attribute or "arrival time",
        "time zone": layout.zone,
    }
    parts.update({f"type of {name}": layout.stream.attribute(name).type.value for name in sorted(read)})
    return parts


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:12]


@dataclass(frozen=True)
class DefinitionPlan:
    """The steps from a recorded definition to a new one; empty when nothing changed."""

    stored: Definition
    new: Definition
    #: The row parts that differ, ``(part, stored, new)``: the rollup must be rebuilt from its inputs.
    rebuild: tuple[tuple[str, str, str], ...] = ()
    added: tuple[Measure, ...] = ()
    removed: tuple[Measure, ...] = ()
    added_levels: tuple[str, ...] = ()
    removed_levels: tuple[str, ...] = ()
    added_columns: dict[str, str] = field(default_factory=dict)
    dropped_columns: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def changed(self) -> bool:
        return self.stored.spec_hash != self.new.spec_hash or bool(self.notes)

    @property
    def shapes_nothing(self) -> bool:
        """Nothing stored changes (attributes no aggregate reads, settings): the tables serve both."""
        return not (self.rebuild or self.added or self.removed or self.added_levels or self.removed_levels
                    or self.added_columns or self.dropped_columns or self.other_app)

    @property
    def reads_stored(self) -> bool:
        """Each measure and level of the new definition is stored as it is: it reads the stored tables (less
        than they hold) correctly."""
        return not (self.rebuild or self.added or self.added_levels or self.other_app)

    @property
    def other_app(self) -> bool:
        """The stored aggregation was defined by another (named) app: its tables are not this app's."""
        return None not in (self.stored.app, self.new.app) and self.stored.app != self.new.app

    def steps(self, *, notes: bool = True) -> list[str]:
        """The plan in words, one step per line; without ``notes``, only the steps that change what is stored."""
        name = self.new.name
        if self.other_app:
            return [f"aggregation {name} in this store belongs to app {self.stored.app!r}, not to "
                    f"{self.new.app!r}: it is left alone"]
        out = [f"rebuild every level of {name} from its inputs: its {part} changed ({old} -> {new})"
               for part, old, new in self.rebuild]
        out += [f"measure {m.name} removed: columns {', '.join(m.columns)} dropped at every level"
                for m in self.removed]
        out += [f"measure {m.name} added: columns {', '.join(m.columns)} at every level, NULL for the buckets "
                f"stored before" for m in self.added]
        out += [f"level {s} removed: table {name}_{s} dropped" for s in self.removed_levels]
        out += [f"level {s} added: table {name}_{s}, built from the finest kept level it nests in (buckets that "
                f"level no longer holds are not kept)" for s in self.added_levels]
        return out + list(self.notes) if notes else out


def backfill_hint(measures: Sequence[str], stream: str) -> str:
    """What ``tiltframe migrate --input`` would do for ``measures`` added to a stored rollup fed by ``stream``:
    the words the refusals and plans say it in."""
    return (f"measures {', '.join(measures)} read NULL in the buckets stored before they are complete; "
            f"tiltframe migrate APP -d DIR --input {stream}=PATH backfills them from the inputs instead (every "
            f"level recomputed from the files the pipeline read)")


def plan(stored: Definition, new: Definition) -> DefinitionPlan:
    """The steps that take ``stored``'s tables to ``new``'s.  A measure is known by its name; one whose
    computation changed under the same name is removed and added again (its history restarts)."""
    rebuild = tuple((part, stored.rows.get(part, "none"), new.rows.get(part, "none"))
                    for part in dict.fromkeys([*stored.rows, *new.rows])
                    if stored.rows.get(part) != new.rows.get(part))
    kept = {m.name for m in new.measures if stored.measure(m.name) == m}
    added = tuple(m for m in new.measures if m.name not in kept)
    removed = tuple(m for m in stored.measures if m.name not in kept)
    old_columns = _value_columns(stored)
    new_columns = _value_columns(new)
    reset = {c for m in added for c in m.columns}  # a measure added again starts from NULL
    dropped = tuple(c for c in old_columns if c not in new_columns or c in reset)
    added_columns = {c: t for c, t in new_columns.items() if c not in old_columns or c in reset}
    notes = []
    read = {a for d in (stored, new) for m in d.measures for a in m.reads}
    unused = [a for a in dict.fromkeys([*stored.attributes, *new.attributes])
              if stored.attributes.get(a) != new.attributes.get(a) and a not in read
              and f"type of {a}" not in new.rows and f"type of {a}" not in stored.rows]
    for a in unused:
        what = ("added" if a not in stored.attributes else "removed" if a not in new.attributes
                else f"retyped {stored.attributes[a]} -> {new.attributes[a]}")
        notes.append(f"attribute {a} of stream {new.rows['source'].split()[0]} {what}: no aggregate reads it, "
                     f"nothing stored changes")
    if stored.settings != new.settings:
        notes.append("retention, purge or out-of-order settings changed: applied from the next run, nothing "
                     "stored changes (buckets purged before stay purged)")
    return DefinitionPlan(
        stored, new, rebuild, added, removed,
        tuple(s for s in new.levels if s not in stored.levels), tuple(s for s in stored.levels if s not in new.levels),
        added_columns, dropped, tuple(notes),
    )


def _value_columns(d: Definition) -> dict[str, str]:
    """The measure columns of ``d``'s tables, with the arrival columns latest-event values need."""
    cols = {c: t for m in d.measures for c, t in m.columns.items()}
    if any(m.latest for m in d.measures):
        cols.update(dict.fromkeys(_ARRIVAL_COLUMNS, "long"))
    return cols
