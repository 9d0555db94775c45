"""Build ``define table`` statements and SELECT queries over tables from their parse trees.

A table's measures are the select items of ``define aggregation`` (``SpecBuilder.aggregation_item``), so a
measure parses and fails exactly like an aggregate there.  A SELECT over a table is parsed with the
streaming SQL grammar (``sql.lark``, start ``table_query_text``: no EMIT, but ORDER BY and LIMIT) and the
expression walker of continuous queries.
"""

from __future__ import annotations

import dataclasses
import functools
import re

from lark import Lark, UnexpectedInput

from tiltframe.errors import did_you_mean
from tiltframe.lang.siddhiql.annotations import store_spec
from tiltframe.lang.siddhiql.trees import ParseTree, SpecBuilder, _kids
from tiltframe.lang.siddhiql.vocabulary import RawAnnotation, check_annotations
from tiltframe.lang.sql.sql_parser import SQL, SqlBuilder
from tiltframe.lang.syntax import Vocabulary, build_lark, syntax_error
from tiltframe.model.aggregations import AggregateItem, StoreSpec
from tiltframe.model.expressions import Attr, Pos
from tiltframe.model.queries import OrderItem
from tiltframe.model.tables import DEFAULT_WORKERS, Measure, Preaggregation, TableQuery, TableSpec

__all__ = ["TABLE_SQL", "build_table", "build_table_query"]

_STORE = "store"


# --- define table -------------------------------------------------------------------------------------------


def build_table(b: SpecBuilder, tree: ParseTree, annotations: list[RawAnnotation]) -> TableSpec:
    """``define table`` as written; names and types are checked by ``validate_tables``."""
    name, *rest = _kids(tree)
    *attribute_defs, clause = rest
    columns = tuple(b.attribute_def(a) for a in attribute_defs)
    check_annotations(annotations, "define table", f"define table {name}", b.error)
    store, rest_annotations = _store_of(b, annotations)
    workers, workers_pos = _workers(b, str(name), rest_annotations, clause)
    written = tuple(a.annotation for a in annotations)
    if clause is None:
        return TableSpec(str(name), columns, annotations=written, store=store, pos=b.pos(tree))
    time_attribute, durations, dimensions, measure_items = _kids(clause)
    time_token = _kids(time_attribute)[0]
    granularities = b.durations(durations)
    if len(granularities) != 1:
        msg = (
            f"a pre-aggregated table has one granularity, got {len(granularities)} "
            f"({', '.join(str(g) for g in granularities)}); write one duration, such as 'every min'"
        )
        raise b.error(msg, b.pos(durations))
    positions: list[tuple[str, Pos]] = [("time", b.pos(time_token)), ("granularity", b.pos(durations))]
    if workers_pos is not None:
        positions.append(("workers", workers_pos))
    names: list[str] = []
    for token in _kids(dimensions) if dimensions is not None else []:
        if str(token) in names:
            raise b.error(f"dimension '{token}' is listed twice", b.pos(token))
        names.append(str(token))
        positions.append((f"dimension:{token}", b.pos(token)))
    pre = Preaggregation(
        granularity=granularities[0],
        measures=tuple(_measure(b, item) for item in _kids(measure_items)),
        dimensions=tuple(names),
        workers=workers,
        pos=b.pos(clause),
        positions=tuple(positions),
    )
    return TableSpec(str(name), columns, str(time_token), pre, annotations=written, store=store, pos=b.pos(tree))


def _measure(b: SpecBuilder, item: ParseTree) -> Measure:
    written = b.source_of(item)
    built = b.aggregation_item(item, [])
    if not isinstance(built, AggregateItem):
        msg = (
            f"'{written}' is not a measure: a measure aggregates a column, such as sum(clicked) as clicks "
            "(columns to group by are listed after 'dimensions')"
        )
        raise b.error(msg, built.pos)
    arg = built.arg
    if arg is not None and (not isinstance(arg, Attr) or arg.qualifier is not None):
        msg = f"a measure aggregates one column of the table, such as {built.function}(<column>); got '{written}'"
        raise b.error(msg, arg.pos)
    return Measure(built.function, arg.name if arg is not None else None, built.alias, built.params, pos=built.pos)


def _store_of(b: SpecBuilder, annotations: list[RawAnnotation]) -> tuple[StoreSpec | None, list[RawAnnotation]]:
    """``@store(...)`` as on ``define aggregation``, and the other annotations."""
    stores = [raw for raw in annotations if raw.annotation.name.lower() == _STORE]
    if len(stores) > 1:
        raise b.error(f"annotation {stores[1].title} is given twice", stores[1].pos)
    rest = [raw for raw in annotations if raw.annotation.name.lower() != _STORE]
    return (store_spec(stores[0], b.error) if stores else None), rest


def _workers(
    b: SpecBuilder, table: str, annotations: list[RawAnnotation], clause: ParseTree | None
) -> tuple[int, Pos | None]:
    """``@preaggregate(workers='4')``, the annotation a table takes besides ``@store`` (its elements are
    checked by the vocabulary already)."""
    found: RawAnnotation | None = None
    for raw in annotations:
        if found is not None:
            raise b.error(f"annotation {raw.title} is given twice", raw.pos)
        found = raw
    if found is None:
        return DEFAULT_WORKERS, None
    if clause is None:
        msg = (
            f"{found.title} needs a pre-aggregation: write 'define table {table} (...) preaggregate by <time column> "
            "every <duration> [dimensions ...] measures ...'"
        )
        raise b.error(msg, found.pos)
    workers = DEFAULT_WORKERS
    for _, value in found.annotation.elements:
        if not re.fullmatch(r"\s*[0-9]+\s*", value) or int(value) < 1:
            raise b.error(f"{found.title}(workers=...) takes a whole number of at least 1, got '{value}'",
                          found.pos_of("workers"))
        workers = int(value)
    return workers, found.pos


# --- SELECT ... FROM <table | partials(table)> --------------------------------------------------------------


@functools.cache
def _lark() -> Lark:
    return build_lark("sql/sql.lark", ["table_query_text"])


def _unsupported(word: str, _expected: set[str]) -> str | None:
    if word == "emit":
        return "EMIT belongs to continuous queries over streams; a SELECT over a table is answered once"
    if word in ("join", "union", "with", "settings"):
        return f"{word.upper()} is not supported in a SELECT over a table"
    return None


#: The words of the table query grammar in error messages: those of continuous queries, plus ORDER BY.
TABLE_SQL: Vocabulary = dataclasses.replace(
    SQL,
    lark=_lark,
    expression_in_clause={
        **SQL.expression_in_clause,
        "WHERE": "a condition on the time column or dimensions (such as site = 'a.com')",
        "HAVING": "a condition (such as clicks > 10)",
        "ORDER": "an expression to order by",
    },
    name_in_clause={"FROM": "a table name or partials(<table>)"},
    unsupported=_unsupported,
)


def build_table_query(text: str) -> TableQuery:
    """One SELECT over a table as written; ``validate_table_query`` resolves its names."""
    try:
        tree = _lark().parse(text, start="table_query_text")
    except UnexpectedInput as exc:
        raise syntax_error(text, exc, TABLE_SQL) from None
    return _TableQueryBuilder(text).table_query(tree)


class _TableQueryBuilder(SqlBuilder):
    def table_query(self, tree: ParseTree) -> TableQuery:
        select_clause, from_clause, where, group_by, having, order_by, limit = _kids(tree)
        items = _kids(select_clause)
        stars = [i for i in items if i.data == "select_star"]
        if stars and len(items) > 1:
            msg = "SELECT * stands alone: list the columns instead, or select only *"
            raise self.error(msg, self.pos(stars[0]))
        table, partials, table_pos = self.table_source(_kids(from_clause)[0])
        order = []
        for item in _kids(order_by) if order_by is not None else []:
            expr, direction = _kids(item)
            order.append(OrderItem(self.expr(expr), direction is None or str(direction).lower() == "asc"))
        return TableQuery(
            table=table,
            select=() if stars else tuple(self.select_item(i) for i in items),
            partials=partials,
            where=self.expr(_kids(where)[0]) if where is not None else None,
            group_by=tuple(self.expr(e) for e in _kids(group_by)) if group_by is not None else (),
            having=self.expr(_kids(having)[0]) if having is not None else None,
            order_by=tuple(order),
            limit=self.whole_number(_kids(limit)[0], "LIMIT") if limit is not None else None,
            text=self.text.strip(),
            pos=self.pos(tree),
            table_pos=table_pos,
        )

    def table_source(self, tree: ParseTree) -> tuple[str, bool, Pos]:
        """``T`` or ``partials(T)``."""
        if tree.data == "stream_source":
            token = _kids(tree)[0]
            return str(token), False, self.pos(token)
        function, *args = _kids(tree)
        if str(function).lower() != "partials":
            msg = (
                f"a SELECT over a table reads FROM <table> or FROM partials(<table>), got {function}(...)"
                f"{did_you_mean(str(function), ['partials'])}"
            )
            raise self.error(msg, self.pos(function))
        if len(args) != 1 or args[0].data != "arg_name":
            raise self.error("partials() takes one table name, such as partials(AdImpressions)", self.pos(tree))
        token = _kids(args[0])[0]
        return str(token), True, self.pos(token)
