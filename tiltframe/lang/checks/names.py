"""Names an app may not give, because a store or Spark would confuse them or refuse them mid-run.

Every name in an app ends up as an identifier somewhere: stream attributes are Spark columns; group-by
attributes, aliases and the state columns made from them (``<alias>_SUM``) are store columns; aggregation
names make tables and views (``<Aggregation>_<DURATION>``, ``..._FINAL``).  A clash there would crash the
first batch, or worse, let one column overwrite another.  So :func:`validate_names` refuses, each at the
line and column of the later name with the name to change:

- two names that differ only in case, where they meet: Spark compares column names case-insensitively by
  default, MySQL and MariaDB always do for columns and on many setups for tables;
- a group-by attribute or an alias that takes the name of a column tiltframe adds (``AGG_COUNT``,
  ``SHARD_ID``, ...) or of another item's state column (``total_SUM``);
- tables or views of two aggregations (or pre-aggregated tables) with the same name, or with the name of
  one of the store's bookkeeping tables (``TILTFRAME_BATCHES``, ...);
- identifiers longer than PostgreSQL's 63 bytes (MySQL and MariaDB take 64 characters; the embedded SQLite
  store takes any length, but an app must keep working when it moves to a server store);
- stream attributes named like the engine's working columns (``_tiltframe_...``, ``_reject_...``, ...).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from tiltframe.aggregates.registry import get
from tiltframe.errors import DefinitionError
from tiltframe.model.aggregations import AggregateItem, AggregationSpec, ExpressionItem
from tiltframe.model.app import AppSpec
from tiltframe.model.durations import Granularity
from tiltframe.model.expressions import Pos
from tiltframe.model.streams import StreamDef

__all__ = ["INTERNAL_NAMES", "INTERNAL_PREFIXES", "validate_names"]

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: Prefixes of the columns the engine adds to the events while it types, orders and aggregates them
#: (``engine.events.typed``, ``engine.events.arrival``, ``engine.rollup.partials``); a test keeps this list complete.
INTERNAL_PREFIXES = ("_tiltframe", "_reject", "_fold_", "_earliest_", "_latest")
#: Whole names of the engine's other working columns (``engine.events.typed``, ``engine.events.arrival``,
#: ``engine.inputs.sources``, ``retrieval.merge``).
INTERNAL_NAMES = ("_raw", "_event_ts", "_corrupt_record", "_arrival_seq", "_metadata", "_group")
_STORES = "PostgreSQL takes at most 63 bytes, MySQL and MariaDB 64 characters"


@dataclass(frozen=True, slots=True)
class _Name:
    """One identifier an app makes, what made it (for messages), where, and what to rename."""

    name: str
    what: str
    pos: Pos | None
    fix: str
    #: The name the user wrote that this one is made from (an alias for its state columns).
    base: str = ""


def _fail(message: str, pos: Pos | None) -> DefinitionError:
    return DefinitionError.at(message, pos)


def _where(pos: Pos | None) -> str:
    return f" (line {pos.line}, column {pos.column})" if pos is not None else ""


def _later(pos: Pos | None, fallback: Pos | None) -> Pos | None:
    return pos if pos is not None else fallback


def validate_names(app: AppSpec) -> None:
    """Refuse the names of ``app`` that a store or Spark would confuse or refuse (see the module doc).

    Expects each stream and aggregation to be valid on its own already (references resolve, functions
    exist).
    """
    tables = {a.source: a.name for a in app.aggregations if a.workers is not None}  # their input streams
    for stream in app.streams:
        _stream_names(stream, tables.get(stream.name))
    for agg in app.aggregations:
        _output_names(agg)
        _column_names(agg)
    _table_names(app.aggregations)


# --- streams -------------------------------------------------------------------------------------------


def internal(name: str) -> bool:
    """Whether ``name`` is (case-insensitively) one of the engine's working columns."""
    lowered = name.lower()
    return lowered in INTERNAL_NAMES or lowered.startswith(INTERNAL_PREFIXES)


def _stream_names(stream: StreamDef, table: str | None) -> None:
    """Attributes: plain identifiers, none like an engine column, none differing from another in case only;
    ``table`` names the pre-aggregated table whose input ``stream`` is (its columns are the attributes)."""
    seen: dict[str, str] = {}
    for a in stream.attributes:
        where = f"column '{a.name}' of table {table}" if table else f"attribute '{a.name}' of stream {stream.name}"
        pos = _later(a.pos, stream.pos)
        if not _NAME.match(a.name):
            raise _fail(f"{where} must be a plain identifier (letters, digits and _, not first a digit)", pos)
        if internal(a.name):
            msg = (f"{where} takes a name tiltframe keeps for its working columns (names starting with "
                   f"{', '.join(INTERNAL_PREFIXES)}, and {', '.join(INTERNAL_NAMES)}, in any case); rename it")
            raise _fail(msg, pos)
        other = seen.get(a.name.lower())
        if other is not None:
            msg = (f"{where} differs from '{other}' only in case; Spark and the stores compare names "
                   f"case-insensitively, so the two would be one column: rename one of them")
            raise _fail(msg, pos)
        seen[a.name.lower()] = a.name


# --- the columns of one aggregation's tables ---------------------------------------------------------


def _kind(agg: AggregationSpec) -> str:
    """How messages call the definition: a pre-aggregated table's rollup is the table."""
    return "table" if agg.workers is not None else "aggregation"


def _key(agg: AggregationSpec, key: str) -> _Name:
    if agg.workers is not None:
        return _Name(key, f"dimension '{key}'", agg.key_pos(key), f"rename column '{key}' of table {agg.name}", key)
    return _Name(key, f"group-by attribute '{key}'", agg.key_pos(key), f"rename attribute '{key}' in stream "
                 f"{agg.source}", key)


def _columns(agg: AggregationSpec) -> list[_Name]:
    """Every column of the tables of ``agg``, in table order, tiltframe's own first."""
    from tiltframe.aggregates.layout import FIXED_COLUMNS

    cols = [_Name(c, f"tiltframe's own column {c}", None, "") for c in FIXED_COLUMNS]
    cols += [_key(agg, key) for key in agg.group_by]
    for item in agg.select:
        if isinstance(item, AggregateItem):
            fn = get(item.function)
            for state in fn.states:
                name = f"{item.alias}_{state.suffix}"
                cols.append(_Name(name, f"state column '{name}' of {fn.name}(...) as {item.alias}", item.pos,
                                  f"choose another alias than '{item.alias}'", item.alias))
        elif isinstance(item, ExpressionItem):
            cols.append(_Name(item.alias, f"select item '{item.alias}'", item.pos,
                              f"choose another alias than '{item.alias}'", item.alias))
    return cols


def _column_names(agg: AggregationSpec) -> None:
    """No two columns of one table alike in case-insensitive comparison, none too long."""
    for item in agg.select:
        name = item.output_name
        if not _NAME.match(name):
            msg = f"'{name}' in {_kind(agg)} {agg.name} must be a plain identifier (letters, digits and _)"
            raise _fail(msg, _later(item.pos, agg.pos))
    cols = _columns(agg)
    place = f"in the tables of aggregation {agg.name}" if agg.workers is None else f"in the rows of table {agg.name}"
    _distinct(cols, place, agg.pos,
              "Spark, MySQL and MariaDB compare column names case-insensitively")
    for col in cols:
        if col.fix and internal(col.name):
            msg = (f"{col.what} in {_kind(agg)} {agg.name} takes a name tiltframe keeps for its working columns "
                   f"(names starting with {', '.join(INTERNAL_PREFIXES)}, and {', '.join(INTERNAL_NAMES)}): "
                   f"{col.fix}")
            raise _fail(msg, _later(col.pos, agg.pos))
        size = len(col.name.encode())
        if size > _limit():
            most = len(col.base) - (size - _limit())
            msg = (f"{col.what} in {_kind(agg)} {agg.name} is a column name of {size} characters; {_STORES}, and an "
                   f"app must run on every store: shorten '{col.base}' to at most {most} characters")
            raise _fail(msg, _later(col.pos, agg.pos))


def _output_names(agg: AggregationSpec) -> None:
    """The columns a retrieval gives back (keys, each aggregate's outputs, values): no case-only twins."""
    from tiltframe.aggregates.layout import AGG_EVENT_TIMESTAMP, AGG_TIMESTAMP
    from tiltframe.timeutil import AGG_TIME

    outs = [_Name(c, f"tiltframe's own column {c}", None, "") for c in (AGG_TIMESTAMP, AGG_TIME, AGG_EVENT_TIMESTAMP)]
    outs += [_key(agg, key) for key in agg.group_by]
    for item in agg.select:
        if isinstance(item, AggregateItem):
            fn = get(item.function)
            for name in fn.output_names(item.alias, fn.resolve(item.params)):
                what = f"alias '{name}'" if name == item.alias else f"output '{name}' of alias '{item.alias}'"
                outs.append(_Name(name, what, item.pos, f"choose another alias than '{item.alias}'"))
        elif isinstance(item, ExpressionItem):
            fix = f"choose another alias than '{item.alias}'"
            outs.append(_Name(item.alias, f"alias '{item.alias}'", item.pos, fix))
    _distinct(outs, f"among the results of {_kind(agg)} {agg.name}", agg.pos,
              "Spark and the stores compare names case-insensitively")


def _distinct(names: Iterable[_Name], place: str, fallback: Pos | None, why: str) -> None:
    seen: dict[str, _Name] = {}
    for n in names:
        first = seen.get(n.name.lower())
        if first is None:
            seen[n.name.lower()] = n
            continue
        same = "has the same name as" if first.name == n.name else "differs only in case from"
        msg = f"{n.what} {same} {first.what} {place} ({why}): {n.fix or first.fix}"
        raise _fail(msg, _later(n.pos, fallback))


# --- tables and views ---------------------------------------------------------------------------------


def _every(g: Granularity) -> str:
    """A level as ``every`` writes it: ``'every 10 sec'``."""
    word = g.unit.word
    return f"'every {word}'" if g.multiple == 1 else f"'every {g.multiple} {word}'"


def _limit() -> int:
    from tiltframe.aggregates.layout import MAX_IDENTIFIER_BYTES

    return MAX_IDENTIFIER_BYTES


def _order(item: tuple[int, AggregationSpec]) -> tuple[int, int, int, int]:
    """Text order: definitions with a position by it, Python-built ones after, in the order given."""
    i, agg = item
    return (0, agg.pos.line, agg.pos.column, i) if agg.pos is not None else (1, 0, 0, i)


def _table_names(aggregations: Iterable[AggregationSpec]) -> None:
    """Each table and view name belongs to one aggregation (case-insensitively), is not one of the store's
    bookkeeping tables, and fits in every store."""
    from tiltframe.aggregates.layout import ASIDE_SUFFIX, BOOKKEEPING_TABLES, VIEW_SUFFIX, table_name

    owners = {t.lower(): f"the store's bookkeeping table {t}" for t in BOOKKEEPING_TABLES}
    for _, agg in sorted(enumerate(aggregations), key=_order):
        kind = _kind(agg)
        for g in agg.granularities:
            table = table_name(agg.name, g)
            for name, what in ((table, "table"), (table + VIEW_SUFFIX, "view")):
                owner = owners.get(name.lower())
                if owner is not None:
                    msg = (f"{kind} {agg.name} would store its {_every(g)} level in {what} {name}, which is {owner}; "
                           f"tables are named <name>_<DURATION> as in Siddhi, and table names compare "
                           f"case-insensitively in MySQL and MariaDB: rename "
                           + (f"{kind} {agg.name}" if owner.startswith("the store's") else "one of the two"))
                    raise _fail(msg, agg.pos)
                owners[name.lower()] = (f"also the {what} {name} of {kind} {agg.name}{_where(agg.pos)} "
                                        f"for its {_every(g)} level")
            longest = max((table + s for s in (VIEW_SUFFIX, ASIDE_SUFFIX)), key=len)
            size = len(longest.encode())
            if size > _limit():
                most = len(agg.name) - (size - _limit())
                msg = (f"{kind} {agg.name} makes the name {longest} ({size} characters) for its {_every(g)} level; "
                       f"{_STORES}, and an app must run on every store: shorten the name of {kind} {agg.name} "
                       f"to at most {most} characters")
                raise _fail(msg, agg.pos)
