"""Every annotation tiltframe accepts, where it may stand and what it takes: the one list of them.

A misspelled annotation or element would otherwise be ignored, and its policy silently not in force
(``@purge(enabled='false')`` would leave purging on).  So the vocabularies are closed: an annotation, an
element name or a nested annotation not listed here is refused at its line and column, with the closest
listed name.  Names compare case-insensitively, as Siddhi compares annotation names (``@Store`` is
``@store``, ``@partitionbyid`` is ``@PartitionById``).

Some annotations Siddhi gives meaning to are accepted and ignored, because ignoring them changes no
result: ``@app:description`` and ``@app:statistics`` (Siddhi's own metrics), ``@source`` / ``@sink`` on a
stream (tiltframe reads the folders or DataFrames ``run`` is given, and writes its tables and sinks; their
elements configure Siddhi's transports, so they are not checked), ``@async`` on a stream (Siddhi's
threading), and ``@store(jdbc.driver.name=...)`` or a driver class given as a bare value (seed 001: the URL
picks the driver here).  Each rule's ``effect`` says what tiltframe does with it; ``docs/schema.md`` shows
the list.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tiltframe.errors import DefinitionError, did_you_mean
from tiltframe.model.durations import UNIT_NAMES
from tiltframe.model.expressions import Pos
from tiltframe.model.streams import Annotation

__all__ = ["NESTED", "PLACES", "RawAnnotation", "Rule", "check_annotations", "rule_of"]

ErrorFactory = Callable[[str, Pos | None], DefinitionError]


@dataclass(frozen=True, slots=True)
class RawAnnotation:
    """An annotation and the annotations nested in it (``@purge(..., @retentionPeriod(...))``).

    :class:`Annotation` holds only key/value elements, so nested annotations travel beside it.
    """

    annotation: Annotation
    nested: tuple[RawAnnotation, ...] = ()
    #: Where each element of ``annotation.elements`` was written (empty for annotations made in Python).
    element_pos: tuple[Pos, ...] = ()

    @property
    def title(self) -> str:
        return f"@{self.annotation.name}"

    @property
    def pos(self) -> Pos | None:
        return self.annotation.pos

    def first_value(self) -> str | None:
        return self.annotation.elements[0][1] if self.annotation.elements else None

    def pos_of(self, key: str) -> Pos | None:
        """Where element ``key`` (any case) was written; the annotation's position when unknown."""
        for i, (k, _) in enumerate(self.annotation.elements):
            if k is not None and k.lower() == key.lower() and i < len(self.element_pos):
                return self.element_pos[i]
        return self.pos



@dataclass(frozen=True, slots=True)
class Rule:
    """What one annotation takes.

    ``keys`` are its element names; ``values`` how many unnamed values it takes; ``single``: one element
    in all, named or not (``@eventTime('ts')`` or ``@eventTime(attribute='ts')``); ``nested`` the
    annotations it may hold; ``open``: its elements and nested annotations belong to Siddhi's transports
    and are not checked.  ``example`` is shown when it is written wrongly.
    """

    name: str
    effect: str
    example: str
    keys: tuple[str, ...] = ()
    values: int = 0
    single: bool = False
    nested: tuple[str, ...] = ()
    open: bool = False
    #: The keys messages list, when ``keys`` holds several spellings of each.
    shown: tuple[str, ...] = ()


_STORE = Rule(
    "store", "the database of the tables (docs/deployment.md)",
    "@store(type='rdbms', jdbc.url='jdbc:postgresql://host:5432/db', username='u', password='p')",
    keys=("type", "jdbc.url", "url", "username", "password", "jdbc.driver.name", "pool.properties"),
    values=1,  # seed 001 gives the driver class as a bare value; the URL picks the driver here
)
_INFO = Rule("info", "names the query", "@info(name='q1')", keys=("name",))
_RETENTION = Rule("retentionPeriod", "how long each duration is kept (docs/retention.md)",
                  "@retentionPeriod(sec='120 sec', min='24 hours')", keys=tuple(UNIT_NAMES),
                  shown=("sec", "min", "hour", "day", "month", "year"))

#: The rules of each place an annotation can stand, by the words messages call the place.
PLACES: dict[str, tuple[Rule, ...]] = {
    "app": (
        Rule("app:name", "names the app", "@app:name('Trades')", values=1),
        Rule("app:timezone", "the time zone of the app's buckets", "@app:timezone('Asia/Kolkata')", values=1),
        Rule("app:description", "accepted and ignored", "@app:description('...')", values=1),
        Rule("app:statistics", "accepted and ignored (Siddhi's metrics)", "@app:statistics('true')",
             keys=("reporter", "interval", "include", "enable"), values=1),
    ),
    "define stream": (
        Rule("eventTime", "the attribute continuous queries window by", "@eventTime('ts')",
             keys=("attribute",), values=1, single=True),
        Rule("source", "accepted and ignored: tiltframe reads the inputs run is given", "@source(type='http')",
             open=True),
        Rule("sink", "accepted and ignored: tiltframe writes its tables and sinks", "@sink(type='log')", open=True),
        Rule("async", "accepted and ignored (Siddhi's threading)", "@async(buffer.size='1024')",
             keys=("buffer.size", "workers", "batch.size.max")),
    ),
    "define aggregation": (
        _STORE,
        Rule("BufferSize", "Siddhi's buffer of late buckets (docs/late-events.md)", "@BufferSize('3')",
             values=1, single=True),
        Rule("IgnoreEventsOlderThanBuffer", "drops events older than the buffer (docs/late-events.md)",
             "@IgnoreEventsOlderThanBuffer('true')", values=1, single=True),
        Rule("allowedLateness", "the bounded lateness policy (docs/late-events.md)", "@allowedLateness('10 min')",
             values=1, single=True),
        Rule("purge", "purging on or off and how often (docs/retention.md)",
             "@purge(enable='true', interval='10 min', @retentionPeriod(sec='120 sec'))",
             keys=("enable", "interval"), nested=("retentionPeriod",)),
        _RETENTION,
        Rule("PartitionById", "rows per shard (docs/shards.md)", "@PartitionById(enable='true')",
             keys=("enable",), values=1, single=True),
        Rule("timezone", "the time zone of the buckets (docs/time.md)", "@timezone('Asia/Kolkata')",
             values=1, single=True),
    ),
    "define table": (
        _STORE,
        Rule("preaggregate", "the workers of a pre-aggregated table (docs/preaggregation.md)",
             "@preaggregate(workers='4')", keys=("workers",)),
    ),
    "a retrieval query": (_INFO,),
    "a continuous query": (_INFO,),
}

#: Rules of the annotations that stand inside another one, by lower-case name.
NESTED: dict[str, Rule] = {"retentionperiod": _RETENTION}


def rule_of(place: str, name: str) -> Rule | None:
    """The rule of annotation ``name`` (any case) at ``place``, or None when it is not taken there."""
    return next((r for r in PLACES[place] if r.name.lower() == name.lower()), None)


def check_annotations(annotations: Sequence[RawAnnotation], place: str, where: str, error: ErrorFactory) -> None:
    """Refuse an annotation ``place`` does not take, and any element or nested annotation its rule does
    not list; ``where`` names the definition in messages (``define aggregation A``)."""
    for raw in annotations:
        rule = rule_of(place, raw.annotation.name)
        if rule is None:
            raise error(_unknown_annotation(raw.annotation.name, place, where), raw.pos)
        _check(raw, rule, error)


def _unknown_annotation(name: str, place: str, where: str) -> str:
    elsewhere = [p for p in PLACES if p != place and rule_of(p, name) is not None]
    if elsewhere:  # an aggregation's @store above define stream would leave its rollups in the embedded store
        other = elsewhere[0]
        return f"@{name} belongs on {'a ' if other.startswith('define') else ''}{other}, not on {where}"
    names = [f"@{r.name}" for r in PLACES[place]]
    return f"unknown annotation @{name} on {where}{did_you_mean('@' + name, names)} (it takes: {', '.join(names)})"


def _check(raw: RawAnnotation, rule: Rule, error: ErrorFactory) -> None:
    if rule.open:
        return
    title = f"@{raw.annotation.name}"
    seen: set[str] = set()
    values = 0
    elements = raw.annotation.elements
    for i, (key, value) in enumerate(elements):
        pos = raw.element_pos[i] if i < len(raw.element_pos) else raw.pos
        if key is None:
            values += 1
            if values > rule.values:
                raise error(_too_many_values(title, rule, value), pos)
            continue
        if key.lower() not in {k.lower() for k in rule.keys}:
            shown = rule.shown or rule.keys
            takes = f"it takes {', '.join(f'{k}=...' for k in shown)}" if shown else "it takes no named element"
            msg = f"unknown element '{key}' of {title}{did_you_mean(key, rule.keys)} ({takes}, as in {rule.example})"
            raise error(msg, pos)
        if key.lower() in seen:
            raise error(f"element '{key}' is given twice in {title}", pos)
        seen.add(key.lower())
    if rule.single and len(elements) > 1:
        pos = raw.element_pos[1] if len(raw.element_pos) > 1 else raw.pos
        raise error(f"{title} takes one value, as in {rule.example}; got {len(elements)}", pos)
    for inner in raw.nested:
        inner_name = inner.annotation.name
        if inner_name.lower() not in {n.lower() for n in rule.nested}:
            if not rule.nested:
                raise error(f"{title} takes no nested annotation, got @{inner_name}", inner.pos)
            listed = " or ".join(f"@{n}" for n in rule.nested)
            hint = did_you_mean("@" + inner_name, [f"@{n}" for n in rule.nested])
            raise error(f"{title} takes only a nested {listed}, got @{inner_name}{hint}", inner.pos)
        _check(inner, NESTED[inner_name.lower()], error)


def _too_many_values(title: str, rule: Rule, value: str) -> str:
    if rule.values == 0:
        named = ", ".join(f"{k}=..." for k in rule.shown or rule.keys)
        return f"{title} takes named elements only ({named}), got the value '{value}'; write it as in {rule.example}"
    return f"{title} takes {rule.values} value{'s' if rule.values > 1 else ''}, as in {rule.example}; got '{value}' too"
