"""Parse SiddhiQL app texts, retrieval queries and continuous queries into the validated model.

The grammar lives in ``grammar.lark`` (LALR, contextual lexer); :class:`AppBuilder` walks its trees into
model dataclasses, each statement through the module that builds its kind (:mod:`tiltframe.lang.siddhiql.trees`
for definitions, ``_retrieval`` for queries, ``_tables`` for tables).  A continuous query (``SELECT ...``)
is one terminal of that grammar, handed on to :mod:`tiltframe.lang.sql.sql_parser`.  Syntax errors are put in
words by :mod:`tiltframe.lang.syntax`, with SiddhiQL's words (``SIDDHI``); then :mod:`tiltframe.lang.checks`
validates what was built.

Example:
    >>> q = parse_query('from TradeAggregation within "2018-01-** **:**:**" per "days" select *')
    >>> q.aggregation, q.per.value
    ('TradeAggregation', 'days')
"""

from __future__ import annotations

import functools
from collections.abc import Collection

from lark import Lark, Token, Tree, UnexpectedInput

from tiltframe.lang.checks.cross_references import validate_app
from tiltframe.lang.siddhiql.retrieval_trees import build_query
from tiltframe.lang.siddhiql.table_trees import build_table, build_table_query
from tiltframe.lang.siddhiql.trees import ParseTree, SpecBuilder, _kids, _present
from tiltframe.lang.siddhiql.vocabulary import RawAnnotation, check_annotations
from tiltframe.lang.sql.sql_parser import build_continuous
from tiltframe.lang.syntax import Vocabulary, build_lark, snippets_added, syntax_error
from tiltframe.model.aggregations import AggregationSpec
from tiltframe.model.app import AppSpec
from tiltframe.model.continuous import ContinuousQuery
from tiltframe.model.expressions import Expr
from tiltframe.model.queries import RetrievalQuery, StreamQuery
from tiltframe.model.streams import Annotation, StreamDef
from tiltframe.model.tables import TableQuery

__all__ = [
    "parse_app",
    "parse_continuous",
    "parse_expression",
    "parse_query",
    "parse_retrieval",
    "parse_sql",
    "parse_table_query",
]

# Readable names of the grammar's terminals; keyword and punctuation terminals are shown as written.
_TERMINAL_WORDS = {
    "IDENTIFIER": "a name",
    "STRING": "a string",
    "NUMBER": "a number",
    "ANNOTATION_NAME": "an annotation (@name)",
    "APP_ANNOTATION_NAME": "an app annotation (@app:name)",
    "COMPARATOR": "a comparison ('==', '!=', '<', '<=', '>' or '>=')",
    "SQL_STATEMENT": "a continuous query (SELECT ...)",
    "$END": "the end of the text",
}
_EXPRESSION_START = frozenset({"IDENTIFIER", "STRING", "NUMBER", "LPAR", "LSQB", "MINUS", "NOT", "TRUE", "FALSE"})
_OPERATORS = frozenset(
    {"PLUS", "MINUS", "STAR", "SLASH", "PERCENT", "COMPARATOR", "AND", "OR", "DOT", "LPAR"}
)
_STATEMENT_START = frozenset({"DEFINE", "FROM", "ANNOTATION_NAME", "SQL_STATEMENT"})
# What an expression is called in each clause, found from the nearest clause keyword before the error.
_EXPRESSION_IN_CLAUSE = {
    "SELECT": "a select item (an attribute, a function call or an expression)",
    "ON": "a condition (such as a.symbol == b.symbol)",
    "WITHIN": "a time (a date string, a long or an attribute)",
    "PER": 'a duration (a string such as "days" or an attribute)',
    "ORDER": "an expression to order by",
    "MEASURES": "a measure (an aggregate such as sum(clicked) as clicks)",
}
_NAME_IN_CLAUSE = {
    "EVERY": "a duration (sec, min, hour, day, month or year)",
    "GROUP": "an attribute name",
    "BY": "an attribute name",
    "FROM": "a stream or aggregation name",
    "JOIN": "a stream or aggregation name",
    "INTO": "a stream name",
    "STREAM": "an attribute name",
    "TABLE": "a column name",
    "DIMENSIONS": "a column name",
}


def _siddhi_name_phrase(clause: str | None, stack: list[object]) -> str | None:
    """A name inside ``define stream``: an attribute, or after one its type."""
    top = getattr(stack[-1], "type", None) if stack else None
    if clause in ("STREAM", "TABLE") and top == "IDENTIFIER":
        return "a type (string, int, long, float, double or bool)"
    return None


def _siddhi_unsupported(word: str, expected: set[str]) -> str | None:
    """Messages for SiddhiQL this release does not take, where the parser would say 'unexpected name'."""
    if word == "output" and "INSERT" in expected:
        return "output rate limiting ('output ... every ...') is not supported yet; a retrieval answers each request"
    if word in ("update", "delete", "return") and "INSERT" in expected:
        return f"'{word}' is not supported: a retrieval only reads; 'insert into' sends its rows on"
    if word in ("left", "right", "full", "inner", "outer", "unidirectional") and "JOIN" in expected:
        return f"'{word}' joins are not supported yet; a retrieval joins a request stream to an aggregation ('join')"
    if word == "partition" and "DEFINE" in expected:
        return "partitions ('partition with (...) begin ... end') are not supported yet"
    if word in ("window", "trigger", "function") and "STREAM" in expected:
        return f"'define {word}' is not supported yet; tiltframe defines streams, aggregations and tables"
    return None


@functools.cache
def _lark() -> Lark:
    return build_lark("siddhiql/grammar.lark", ["app", "query_text", "continuous_text", "expr"])


SIDDHI = Vocabulary(
    lark=_lark,
    terminal_words=_TERMINAL_WORDS,
    expression_start=_EXPRESSION_START,
    operators=_OPERATORS,
    statement_start=_STATEMENT_START,
    statement_phrase="a definition or a query ('define ...', 'from ...', 'select ...' or an @annotation before them)",
    statement_words=frozenset({"DEFINE", "FROM", "ANNOTATION_NAME", "SELECT"}),
    expression_in_clause=_EXPRESSION_IN_CLAUSE,
    name_in_clause=_NAME_IN_CLAUSE,
    name_phrase=_siddhi_name_phrase,
    unsupported=_siddhi_unsupported,
)


class AppBuilder(SpecBuilder):
    """The builder of whole SiddhiQL texts: each statement handed to the module that builds its kind
    (``_retrieval`` for queries, ``sql_parser`` for continuous queries, ``_tables`` for tables)."""

    # --- whole texts ------------------------------------------------------------------------------------

    def app(self, tree: ParseTree) -> AppSpec:
        app_annotations: list[Annotation] = []
        streams: list[StreamDef] = []
        aggregations: list[AggregationSpec] = []
        queries: list[RetrievalQuery] = []
        continuous: list[ContinuousQuery] = []
        stream_queries: list[StreamQuery] = []
        for child in _present(_kids(tree)):
            if child.data == "app_annotation":
                raw = self.annotation(child)
                check_annotations([raw], "app", "the app", self.error)
                app_annotations.append(raw.annotation)
                continue
            annotations = [self.annotation(a) for a in _kids(child)[:-1]]
            body = _kids(child)[-1]
            if body.data == "stream_def":
                streams.append(self.stream_def(body, annotations))
                self.known_streams.add(streams[-1].name)
            elif body.data == "aggregation_def":
                aggregations.append(self.aggregation_def(body, annotations))
                self.known_aggregations.add(aggregations[-1].name)
            elif body.data == "continuous_query":
                continuous.append(self.continuous_query(body, annotations))
            elif body.data == "table_def":
                self.tables.append(build_table(self, body, annotations))
            else:
                query = self.query(body, annotations)
                if isinstance(query, StreamQuery):
                    stream_queries.append(query)
                else:
                    queries.append(query)
        by_name = {a.name.lower(): a for a in app_annotations}
        return AppSpec(
            streams=tuple(streams),
            aggregations=tuple(aggregations),
            queries=tuple(queries),
            name=by_name["app:name"].get(None) if "app:name" in by_name else None,
            timezone=by_name["app:timezone"].get(None) if "app:timezone" in by_name else None,
            annotations=tuple(app_annotations),
            continuous=tuple(continuous),
            stream_queries=tuple(stream_queries),
        )

    def query_text(self, tree: ParseTree) -> RetrievalQuery:
        *annotations, body = _present(_kids(tree))
        self.one_query = True
        query = self.query(body, [self.annotation(a) for a in annotations])
        assert isinstance(query, RetrievalQuery)  # a stream query is refused alone (_retrieval._stream_query)
        return query

    def continuous_text(self, tree: ParseTree) -> ContinuousQuery:
        *annotations, body = _present(_kids(tree))
        return self.continuous_query(body, [self.annotation(a) for a in annotations])

    def continuous_query(self, tree: ParseTree, annotations: list[RawAnnotation]) -> ContinuousQuery:
        """Hand the captured ``SELECT ...`` text to the SQL grammar, at its place in the whole text."""
        return build_continuous(_kids(tree)[0], self.text, annotations)

    # --- retrieval queries ------------------------------------------------------------------------------

    def query(self, tree: ParseTree, annotations: list[RawAnnotation]) -> RetrievalQuery | StreamQuery:
        return build_query(self, tree, annotations)


def parse_app(text: str) -> AppSpec:
    """Parse a whole app (statements separated by ``;``) and validate its cross-references.

    Raises:
        DefinitionError: at the line and column of the first problem.
    """
    builder = AppBuilder(text)
    tree = _parse(text, "app")
    with snippets_added(text):
        app = builder.app(tree)
        if builder.tables:
            from tiltframe.lang.checks.table_defs import with_tables

            app = with_tables(app, builder.tables)
        return validate_app(app)


def parse_table_query(text: str, app: AppSpec) -> TableQuery:
    """Parse one ``SELECT ... FROM <table | partials(table)> [WHERE] [GROUP BY] [HAVING] [ORDER BY] [LIMIT]``
    and validate it against the tables of ``app`` (docs/preaggregation.md).

    Example:
        >>> t = parse_app("define table T (time long, site string, clicked int) "
        ...                  "preaggregate by time every min dimensions site measures sum(clicked) as clicks;")
        >>> q = parse_table_query("SELECT site, clicks FROM T GROUP BY site", t)
        >>> q.keys, q.measures, q.output_names
        (('site',), ('clicks',), ('site', 'clicks'))

    Raises:
        DefinitionError: a syntax error or an invalid reference, at its line and column.
    """
    from tiltframe.lang.checks.table_query import validate_table_query

    with snippets_added(text):
        return validate_table_query(app, build_table_query(text))


def parse_query(text: str, *, aggregations: Collection[str] = ()) -> RetrievalQuery:
    """Parse one retrieval query (``from Agg within ... per ... select ...``; the trailing ``;`` is optional).

    Args:
        text: the query.
        aggregations: names of known aggregations, used to tell which side of a ``join`` is the
            aggregation; without them the right side is taken, as in Siddhi's examples.
    """
    builder = AppBuilder(text, aggregations)
    tree = _parse(text, "query_text")
    with snippets_added(text):
        return builder.query_text(tree)


def parse_retrieval(text: str, app: AppSpec) -> RetrievalQuery:
    """Parse one retrieval query and validate it against ``app``: every attribute resolved to the request
    stream or the aggregation (``lang.checks.retrieval``), as an app file's query would be.

    Raises:
        DefinitionError: a syntax error or an invalid reference, at its line and column with a caret snippet.
    """
    from tiltframe.lang.checks.retrieval import validate_query

    builder = AppBuilder(text, [a.name for a in app.aggregations])
    builder.known_streams = {s.name for s in app.streams}
    tree = _parse(text, "query_text")
    with snippets_added(text):
        return validate_query(app, builder.query_text(tree))


def parse_continuous(text: str, app: AppSpec) -> ContinuousQuery:
    """Parse one continuous query (``[@info(name='q')] SELECT ... FROM ... [EMIT ...] [;]``) and validate it
    against the streams of ``app``, as an app file's statement would be.

    Example:
        >>> app = parse_app("define stream s (device string, cpu double);")
        >>> q = parse_continuous("SELECT device, max(cpu) AS top FROM tumble(s, 5s) GROUP BY device", app)
        >>> q.window.size_ms, q.keys, q.output_names, q.emit.policy.value
        (5000, ('device',), ('device', 'top'), 'after window close')

    Raises:
        DefinitionError: a syntax error or an invalid reference, at its line and column.
    """
    from tiltframe.lang.checks.continuous_queries import validate_continuous

    builder = AppBuilder(text)
    tree = _parse(text, "continuous_text")
    with snippets_added(text):
        return validate_continuous(app, builder.continuous_text(tree))


def parse_sql(text: str) -> ContinuousQuery:
    """One continuous query as written, before validation: syntax, windows, intervals and EMIT order only.

    For tools that show a query without an app (and for tests); the engine reads only validated queries.
    """
    builder = AppBuilder(text)
    tree = _parse(text, "continuous_text")
    with snippets_added(text):
        return builder.continuous_text(tree)


def parse_expression(text: str) -> Expr:
    """Parse one expression (``price * quantity``, ``avg(price)``, ``-7``) as the select clause reads it.

    Used by the Python builder so that ``b.sum("price * quantity")`` means exactly what the text means:
    same literal types, same precedence, same refusal of unknown functions.  Positions point into ``text``.

    Raises:
        DefinitionError: a syntax error or an unknown function, with line, column and a caret snippet.
    """
    builder = AppBuilder(text)
    tree = _parse(text, "expr")
    with snippets_added(text):
        return builder.checked_expr(tree)


# --- syntax errors ----------------------------------------------------------------------------------------


def _parse(text: str, start: str) -> Tree[Token]:
    try:
        return _lark().parse(text, start=start)
    except UnexpectedInput as exc:
        raise syntax_error(text, exc, SIDDHI) from None
