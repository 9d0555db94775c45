"""Parse SiddhiQL app texts, retrieval queries and continuous queries into the spec model.

The grammar lives in ``grammar.lark`` (LALR, contextual lexer); :mod:`tiltframe.lang._build` turns trees
into spec dataclasses.  A continuous query (``SELECT ...``) is one terminal of that grammar, handed on to
:mod:`tiltframe.lang.sql_parser`.  This module owns the translation of lark's exceptions into
:class:`~tiltframe.errors.DefinitionError` for both grammars (a :class:`Vocabulary` each): every message
names what was found and what was expected in words (never lark terminal names), with the line, column
and a caret snippet.

Example:
    >>> q = parse_query('from TradeAggregation within "2018-01-** **:**:**" per "days" select *')
    >>> q.aggregation, q.per.value
    ('TradeAggregation', 'days')
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import os
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from importlib import resources

from lark import Lark, Token, Tree, UnexpectedCharacters, UnexpectedInput, UnexpectedToken
from lark.lark import PostLex
from lark.lexer import PatternStr

from tiltframe.errors import DefinitionError, NotSupportedYet
from tiltframe.lang._build import SpecBuilder, snippet
from tiltframe.spec.continuous import ContinuousQuery
from tiltframe.spec.expressions import Expr
from tiltframe.spec.model import AppSpec, RetrievalQuery
from tiltframe.spec.tables import TableQuery
from tiltframe.spec.validate import validate_app

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


class NamesEverywhere(PostLex):
    """Offer IDENTIFIER to the lexer in every parser state.

    Keywords are then recognised only as whole words (lark turns an IDENTIFIER spelled like an acceptable
    keyword into that keyword), and a misspelt keyword reads as a name the error message can correct.
    """

    always_accept = ("IDENTIFIER",)

    def process(self, stream: Iterator[Token]) -> Iterator[Token]:
        return stream


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


@dataclass(frozen=True)
class Vocabulary:
    """How one grammar's terminals and clauses read in error messages.

    The SiddhiQL grammar and the streaming SQL grammar (:mod:`tiltframe.lang.sql_parser`) share the
    translation of lark's exceptions below; each brings its own words.
    """

    #: The grammar's (cached) parser: its terminals give the keyword spellings.
    lark: Callable[[], Lark]
    terminal_words: Mapping[str, str]
    expression_start: frozenset[str]
    operators: frozenset[str]
    #: Terminals that begin a statement, folded into ``statement_phrase`` when all are expected.
    statement_start: frozenset[str]
    statement_phrase: str
    #: Terminal names (or lower-case words read as names) that begin a statement, and characters that do:
    #: found where a statement goes on, the ';' before them is missing.
    statement_words: frozenset[str]
    expression_in_clause: Mapping[str, str]
    name_in_clause: Mapping[str, str]
    #: A better phrase for an expected name in a clause, or None for ``name_in_clause``.
    name_phrase: Callable[[str | None, list[object]], str | None] = lambda _clause, _stack: None
    statement_chars: str = ""
    comparison_hint: str = "compare with '==' (a single '=' only appears in annotations)"
    #: The message for a name (lower case) that starts a clause this release does not support, given the
    #: terminals expected there; None for an ordinary syntax error.
    unsupported: Callable[[str, set[str]], str | None] = lambda _word, _expected: None

    @property
    def clause_keywords(self) -> frozenset[str]:
        return frozenset(self.expression_in_clause) | frozenset(self.name_in_clause)

    @functools.cached_property
    def keywords(self) -> dict[str, str]:
        """Keyword spelling (lower case) -> terminal name, for words the lexer read as names."""
        return {
            t.pattern.value: t.name
            for t in self.lark().terminals
            if isinstance(t.pattern, PatternStr) and t.pattern.value.isalpha()
        }


@functools.cache
def _lark() -> Lark:
    return build_lark("grammar.lark", ["app", "query_text", "continuous_text", "expr"])


def build_lark(grammar_file: str, start: list[str]) -> Lark:
    """A parser for a grammar of this package, as both languages use them: LALR(1) with the contextual
    lexer (keywords reserved only where they can appear), positions kept, names offered everywhere.

    Building the LALR tables takes one to two seconds, which every command would pay before reading a
    line; lark keeps them in a cache file (``parser_cache``) that it checks against the grammar, its
    options and its own version, so a changed grammar or an upgrade builds them again."""
    grammar = resources.files("tiltframe.lang").joinpath(grammar_file).read_text(encoding="utf-8")
    return Lark(
        grammar,
        parser="lalr",
        lexer="contextual",
        start=start,
        propagate_positions=True,
        maybe_placeholders=True,
        postlex=NamesEverywhere(),
        cache=parser_cache(f"{grammar_file}-{'-'.join(start)}") or False,
    )


def parser_cache(name: str) -> str | None:
    """The file lark keeps a built parser in: ``$TILTFRAME_CACHE_DIR``, else ``$XDG_CACHE_HOME/tiltframe``
    or ``~/.cache/tiltframe``, made for the current user only; ``None`` (no cache) where that folder
    cannot be made or written, or when ``TILTFRAME_CACHE_DIR`` is empty."""
    where = os.environ.get("TILTFRAME_CACHE_DIR")
    if where is None:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        where = os.path.join(base, "tiltframe")
    if not where:
        return None
    try:
        os.makedirs(where, mode=0o700, exist_ok=True)
    except OSError:
        return None
    if not os.access(where, os.W_OK | os.X_OK):
        return None
    return os.path.join(where, f"lark-{name}.pickle")


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


def parse_app(text: str) -> AppSpec:
    """Parse a whole app (statements separated by ``;``) and validate its cross-references.

    Raises:
        DefinitionError: at the line and column of the first problem.
    """
    builder = SpecBuilder(text)
    tree = _parse(text, "app")
    with _snippets(text):
        app = builder.app(tree)
        if builder.tables:
            from tiltframe.spec.validate_tables import with_tables

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
    from tiltframe.lang._tables import build_table_query
    from tiltframe.spec.validate_table_query import validate_table_query

    with _snippets(text):
        return validate_table_query(app, build_table_query(text))


def parse_query(text: str, *, aggregations: Collection[str] = ()) -> RetrievalQuery:
    """Parse one retrieval query (``from Agg within ... per ... select ...``; the trailing ``;`` is optional).

    Args:
        text: the query.
        aggregations: names of known aggregations, used to tell which side of a ``join`` is the
            aggregation; without them the right side is taken, as in Siddhi's examples.
    """
    builder = SpecBuilder(text, aggregations)
    tree = _parse(text, "query_text")
    with _snippets(text):
        return builder.query_text(tree)


def parse_retrieval(text: str, app: AppSpec) -> RetrievalQuery:
    """Parse one retrieval query and validate it against ``app``: every attribute resolved to the request
    stream or the aggregation (``spec.validate_retrieval``), as an app file's query would be.

    Raises:
        DefinitionError: a syntax error or an invalid reference, at its line and column with a caret snippet.
    """
    from tiltframe.spec.validate_retrieval import validate_query

    builder = SpecBuilder(text, [a.name for a in app.aggregations])
    builder.known_streams = {s.name for s in app.streams}
    tree = _parse(text, "query_text")
    with _snippets(text):
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
    from tiltframe.spec.validate_continuous import validate_continuous

    builder = SpecBuilder(text)
    tree = _parse(text, "continuous_text")
    with _snippets(text):
        return validate_continuous(app, builder.continuous_text(tree))


def parse_sql(text: str) -> ContinuousQuery:
    """One continuous query as written, before validation: syntax, windows, intervals and EMIT order only.

    For tools that show a query without an app (and for tests); the engine reads only validated queries.
    """
    builder = SpecBuilder(text)
    tree = _parse(text, "continuous_text")
    with _snippets(text):
        return builder.continuous_text(tree)


def parse_expression(text: str) -> Expr:
    """Parse one expression (``price * quantity``, ``avg(price)``, ``-7``) as the select clause reads it.

    Used by the Python builder so that ``b.sum("price * quantity")`` means exactly what the text means:
    same literal types, same precedence, same refusal of unknown functions.  Positions point into ``text``.

    Raises:
        DefinitionError: a syntax error or an unknown function, with line, column and a caret snippet.
    """
    builder = SpecBuilder(text)
    tree = _parse(text, "expr")
    with _snippets(text):
        return builder.checked_expr(tree)


@contextlib.contextmanager
def _snippets(text: str) -> Iterator[None]:
    """Add a caret snippet to positioned errors raised by other modules (durations, types, validation)."""
    try:
        yield
    except DefinitionError as exc:
        if exc.snippet or exc.line is None or exc.column is None:
            raise
        try:
            better = type(exc)(
                exc.message, line=exc.line, column=exc.column, snippet=snippet(text, exc.line, exc.column)
            )
        except TypeError:  # a subclass with another signature: keep it as it is
            raise exc from None
        raise better from exc


# --- syntax errors ----------------------------------------------------------------------------------------


def _parse(text: str, start: str) -> Tree[Token]:
    try:
        return _lark().parse(text, start=start)
    except UnexpectedInput as exc:
        raise syntax_error(text, exc, SIDDHI) from None


def _positioned(message: str, hint: str, line: int, column: int, text: str) -> DefinitionError:
    """``<message> at line L, column C; <hint>`` with a caret snippet.

    DefinitionError appends the position after the whole message; syntax errors read better with the
    expectation after it, so the position is written here and set on the error afterwards.
    """
    error = DefinitionError(
        f"{message} at line {line}, column {column}; {hint}", snippet=snippet(text, line, column)
    )
    error.line, error.column = line, column
    return error


def syntax_error(text: str, exc: UnexpectedInput, vocab: Vocabulary) -> DefinitionError:
    """lark's exception as a DefinitionError in words; ``text`` draws the caret snippet."""
    if isinstance(exc, UnexpectedToken):
        return _unexpected_token(text, exc, vocab)
    line, column = exc.line, exc.column
    if isinstance(exc, UnexpectedCharacters):
        char, offset = exc.char, exc.pos_in_stream or 0
        if char in "'\"":
            hint = f"close it with {char} on the same line"
            return _positioned("unterminated string", hint, line, column, text)
        if text.startswith("/*", offset):
            return _positioned("unterminated comment", "close it with */", line, column, text)
        if char in vocab.statement_chars:
            return _positioned("unexpected '@'", "expected ';' to end the statement before it", line, column, text)
        expected = _describe_expected(_expected_of(exc, set(exc.allowed or ())), [], vocab)
        return _positioned(f"unexpected character {char!r}", f"expected {expected}", line, column, text)
    return _positioned(
        "unexpected end of the text", "the text stops in the middle of a statement", line, column, text
    )


def _expected_of(exc: UnexpectedInput, fallback: set[str]) -> set[str]:
    """The terminals the parser accepts where it stopped (lark's own sets include LALR look-aheads)."""
    parser = getattr(exc, "interactive_parser", None)
    if parser is None:
        return fallback
    try:
        return set(parser.accepts())
    except UnexpectedInput:  # pragma: no cover - accepts() replays the parser; keep lark's own guess
        return fallback


def _unexpected_token(text: str, exc: UnexpectedToken, vocab: Vocabulary) -> DefinitionError:
    token: Token = exc.token
    if token.type == "SLASH" and text.startswith("/*", token.start_pos or 0):
        return _positioned(
            "unterminated comment", "close it with */", token.line or 1, token.column or 1, text
        )
    stack: list[object] = list(getattr(exc.state, "value_stack", []) or [])
    expected = _expected_of(exc, set(exc.expected))
    if token.type == "$END":
        line, column = token.end_line or exc.line, token.end_column or exc.column
    else:
        line, column = token.line or exc.line, token.column or exc.column
    word = str(token).lower()
    unsupported = vocab.unsupported(word, expected) if token.type == "IDENTIFIER" else None
    if unsupported:
        return NotSupportedYet(unsupported, line=line, column=column, snippet=snippet(text, line, column))
    kind = vocab.keywords.get(word, token.type) if token.type == "IDENTIFIER" else token.type
    hint = f"expected {_describe_expected(expected, stack, vocab)}"
    if (kind in vocab.statement_words or word in vocab.statement_words) and "SEMICOLON" in expected:
        hint = "expected ';' to end the statement before it"
    elif str(token) == "=" and "COMPARATOR" in expected:
        hint = vocab.comparison_hint
    elif kind == "IDENTIFIER":
        hint += _did_you_mean(str(token), expected, vocab)
    found = f"'{token}'" if kind != token.type else _describe_found(token)
    return _positioned(f"unexpected {found}", hint, line, column, text)


def _did_you_mean(word: str, expected: set[str], vocab: Vocabulary) -> str:
    """Suggest the keyword a misspelt word was probably meant to be (``lmit`` -> ``limit``)."""
    spellings = [value for value, name in vocab.keywords.items() if name in expected]
    close = difflib.get_close_matches(word.lower(), spellings, n=1, cutoff=0.7)
    return f" — did you mean '{close[0]}'?" if close else ""


def _describe_found(token: Token) -> str:
    if token.type == "$END":
        return "end of the text"
    if token.type == "IDENTIFIER":
        return f"name '{token}'"
    if token.type == "STRING":
        return f"string {token}"
    if token.type == "NUMBER":
        return f"number {token}"
    if token.type == "INTERVAL":
        return f"interval {token}"
    if token.type in ("ANNOTATION_NAME", "APP_ANNOTATION_NAME"):
        return f"annotation {token}"
    return f"'{token}'"


def _clause(stack: Iterable[object], vocab: Vocabulary) -> str | None:
    """The nearest clause keyword on the parser's stack: tells what the missing piece is called."""
    items = list(stack)
    clauses = vocab.clause_keywords
    for i in range(len(items) - 1, -1, -1):
        item = items[i]
        if isinstance(item, Token) and item.type in clauses:
            before = items[i - 1] if i > 0 else None
            if item.type == "BY" and isinstance(before, Token) and before.type in ("ORDER", "GROUP"):
                return before.type
            return item.type
    return None


def _describe_expected(expected: set[str], stack: list[object], vocab: Vocabulary) -> str:
    """Terminal names in words, with expression starts and operators folded into one phrase each."""
    expected = set(expected)  # narrowed below; the caller keeps its own set
    clause = _clause(stack, vocab)
    phrases: list[str] = []
    if {"IDENTIFIER", "STRING", "NUMBER"} <= expected:
        phrases.append(vocab.expression_in_clause.get(clause or "", "an expression"))
        expected -= vocab.expression_start
        if "STAR" in expected and clause == "SELECT":
            phrases.append("'*'")
            expected.discard("STAR")
    if {"PLUS", "STAR", "COMPARATOR"} <= expected or {"AND", "OR"} <= expected:
        phrases.append("an operator")
        expected -= vocab.operators
    if vocab.statement_start and expected >= vocab.statement_start:
        phrases.append(vocab.statement_phrase)
        expected -= vocab.statement_start | {"APP_ANNOTATION_NAME"}
    if "IDENTIFIER" in expected:
        expected.discard("IDENTIFIER")
        phrases.append(_name_phrase(clause, stack, vocab))
    terminals = vocab.lark().get_terminal
    for name in sorted(expected, key=lambda n: (n == "$END", n)):
        if name in vocab.terminal_words:
            phrases.append(vocab.terminal_words[name])
            continue
        try:
            phrases.append(f"'{terminals(name).pattern.value}'")
        except KeyError:  # pragma: no cover - every terminal of the grammar has a pattern
            phrases.append(name.lower())
    if not phrases:
        return "something else"
    return phrases[0] if len(phrases) == 1 else f"{', '.join(phrases[:-1])} or {phrases[-1]}"


def _name_phrase(clause: str | None, stack: list[object], vocab: Vocabulary) -> str:
    top = getattr(stack[-1], "type", None) if stack else None
    if top in ("AS", "STREAM", "AGGREGATION", "TABLE"):
        return "a name"
    return vocab.name_phrase(clause, stack) or vocab.name_in_clause.get(clause or "", "a name")
