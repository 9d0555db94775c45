"""What both grammars share: building a lark parser (its tables cached on disk) and turning lark's
exceptions into :class:`~tiltframe.errors.DefinitionError` in words.

Every message names what was found and what was expected in words (never lark terminal names), with the
line, column and a caret snippet; each grammar brings its own words as a :class:`Vocabulary`
(``SIDDHI`` in :mod:`tiltframe.lang.siddhiql.parser`, ``SQL`` in :mod:`tiltframe.lang.sql.sql_parser`).
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from importlib import resources

from lark import Lark, Token, UnexpectedCharacters, UnexpectedInput, UnexpectedToken
from lark.lark import PostLex
from lark.lexer import PatternStr

from tiltframe.cache import cache_dir
from tiltframe.errors import DefinitionError, NotSupportedYet


@contextlib.contextmanager
def snippets_added(text: str) -> Iterator[None]:
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


def snippet(text: str, line: int, column: int) -> str:
    """The source line with a caret under ``column``, like compilers print it."""
    lines = text.splitlines() or [""]
    source = lines[line - 1] if 0 < line <= len(lines) else ""
    gutter = f"{line:>4} | "
    caret = " " * len(source[: max(column - 1, 0)].expandtabs()) + "^"
    return f"{gutter}{source.expandtabs()}\n{' ' * (len(gutter) - 2)}| {caret}"


class NamesEverywhere(PostLex):
    """Offer IDENTIFIER to the lexer in every parser state.

    Keywords are then recognised only as whole words (lark turns an IDENTIFIER spelled like an acceptable
    keyword into that keyword), and a misspelt keyword reads as a name the error message can correct.
    """

    always_accept = ("IDENTIFIER",)

    def process(self, stream: Iterator[Token]) -> Iterator[Token]:
        return stream


@dataclass(frozen=True)
class Vocabulary:
    """How one grammar's terminals and clauses read in error messages.

    The SiddhiQL grammar and the streaming SQL grammar (:mod:`tiltframe.lang.sql.sql_parser`) share the
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


def build_lark(grammar_file: str, start: list[str]) -> Lark:
    """A parser for a grammar of this package (``grammar_file``: its path under ``tiltframe/lang``), as every
    language uses them: LALR(1) with the contextual lexer (keywords reserved only where they can appear),
    positions kept, names offered everywhere.

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
        cache=parser_cache(f"{grammar_file.replace('/', '-')}-{'-'.join(start)}") or False,
    )


def parser_cache(name: str) -> str | None:
    """The file lark keeps a built parser in, in tiltframe's cache folder (:func:`tiltframe.cache.cache_dir`);
    ``None`` (no cache) where there is none."""
    where = cache_dir()
    return None if where is None else os.path.join(where, f"lark-{name}.pickle")


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
