"""Every bad text is a DefinitionError at the right line and column, worded for people, not for lark."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.errors import LARK_WORDS
from tiltframe.errors import DefinitionError
from tiltframe.lang import parse_app, parse_query

HERE = Path(__file__).parent
INVALID = sorted((HERE / "invalid").glob("*.siddhi"))
TRADE_STREAM = "define stream TradeStream (symbol string, price double, quantity long, timestamp long);\n"


def expectations(path: Path) -> tuple[int, int, list[str]]:
    """Read ``line: N``, ``column: N`` and one or more ``message: fragment`` lines."""
    line = column = 0
    fragments: list[str] = []
    for row in path.with_suffix(".expected").read_text(encoding="utf-8").splitlines():
        key, _, value = row.partition(":")
        if key == "line":
            line = int(value)
        elif key == "column":
            column = int(value)
        elif key == "message":
            fragments.append(value.strip())
    return line, column, fragments


def error_of(text: str) -> DefinitionError:
    with pytest.raises(DefinitionError) as caught:
        parse_app(text)
    return caught.value


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.stem)
def test_invalid_files(path: Path) -> None:
    line, column, fragments = expectations(path)
    error = error_of(path.read_text(encoding="utf-8"))
    assert (error.line, error.column) == (line, column), str(error)
    for fragment in fragments:
        assert fragment in str(error)
    assert not LARK_WORDS.search(str(error).split("\n")[0])


def test_every_invalid_file_has_expectations() -> None:
    assert INVALID
    for path in INVALID:
        line, column, fragments = expectations(path)
        assert line and column and fragments, path.name


def test_seed001_double_comma_points_at_the_second_comma() -> None:
    error = error_of((HERE / "invalid" / "seed001_double_comma.siddhi").read_text(encoding="utf-8"))
    assert (error.line, error.column) == (14, 21)
    assert error.message == (
        "unexpected ',' at line 14, column 21; "
        "expected a select item (an attribute, a function call or an expression)"
    )
    source_line, caret_line = error.snippet.splitlines() if error.snippet else ("", "")
    assert "select a.symbol,, a.avgPrice" in source_line
    assert caret_line.index("^") == source_line.index(",,") + 1


def test_the_snippet_marks_the_column_for_semantic_errors_too() -> None:
    error = error_of(
        TRADE_STREAM + "define aggregation A from TradeStream select sum(price) aggregate every sec"
    )
    assert (error.line, error.column) == (2, 46)
    assert error.snippet is not None
    source_line, caret_line = error.snippet.splitlines()
    assert caret_line.index("^") == source_line.index("sum(price)")


@pytest.mark.parametrize(
    ("text", "line", "column", "fragment"),
    [
        ("from A within 0L, 1L per", 1, 25, "expected a duration"),
        ("from A within 0L, 1L per 'days' group by x", 1, 33, "'group by' needs a select list"),
        ("from A within 0L, 1L per 'days' select", 1, 39, "or '*'"),
        ("from A within 0L, 1L per 'days' select * limit 1.5", 1, 48, "limit must be a whole number"),
        ("from A within 0L, 1L per 'days' select nope(x) as y", 1, 40, "unknown function 'nope'"),
        ("from A within 1.5L, 1L per 'days' select *", 1, 15, "a long literal must be a whole number"),
        ("from A within 99999999999999999999, 1L per 'days' select *", 1, 15, "does not fit in a long"),
        ("from A join B join C within 0L, 1L per 'days' select *", 1, 15, "unexpected 'join'"),
        ("@app:name('x') from A within 0L, 1L per 'days' select *", 1, 1, "app annotation @app:name"),
    ],
)
def test_query_errors(text: str, line: int, column: int, fragment: str) -> None:
    with pytest.raises(DefinitionError) as caught:
        parse_query(text)
    assert (caught.value.line, caught.value.column) == (line, column), str(caught.value)
    assert fragment in str(caught.value)


@pytest.mark.parametrize(
    ("definition", "column", "fragment"),
    [
        ("select sum() as s aggregate every sec", 8, "sum() needs an argument"),
        ("select sum(price, quantity) as s aggregate every sec", 8, "sum() takes one argument, got 2"),
        ("select sum(max(price)) as s aggregate every sec", 12, "cannot be used inside another aggregate"),
        ("select 1 aggregate every sec", 8, "select item '1' needs a name"),
        (
            "select sum(price) as s group by symbol, symbol aggregate every sec",
            41,
            "listed twice in group by",
        ),
        (
            "select sum(price) as s aggregate every 10 sec ... min",
            40,
            "a duration range takes plain durations",
        ),
        ("select sum(price) as s aggregate every 0 sec", 40, "must be a positive integer"),
        ("select sum(price) as s aggregate every min, minutes", 45, "(as 'min' and 'minutes')"),
    ],
)
def test_aggregation_errors(definition: str, column: int, fragment: str) -> None:
    error = error_of(TRADE_STREAM + "define aggregation A from TradeStream " + definition)
    assert (error.line, error.column) == (2, column + 38), str(error)
    assert fragment in str(error)


@pytest.mark.parametrize(
    ("annotations", "line", "fragment"),
    [
        ("@store(type='rdbms')\n@store(type='rdbms')", 3, "annotation @store is given twice"),
        ("@store(jdbc.url='x')", 2, "@store needs a type"),
        ("@store(type='rdbms', @PrimaryKey('symbol'))", 2, "@store takes no nested annotation"),
        ("@purge(enable='maybe')", 2, "@purge takes 'true' or 'false', got 'maybe'"),
        ("@purge(@other(a='1'))", 2, "takes only a nested @retentionPeriod"),
        ("@BufferSize('-1')", 2, "@BufferSize needs a whole number"),
        ("@BufferSize", 2, "got nothing"),
        ("@IgnoreEventsOlderThanBuffer", 2, "got nothing"),
        ("@timezone()", 2, "@timezone needs a time zone name"),
    ],
)
def test_annotation_errors(annotations: str, line: int, fragment: str) -> None:
    definition = "define aggregation A from TradeStream select sum(price) as s aggregate every sec"
    text = f"{TRADE_STREAM}{annotations}\n{definition}"
    error = error_of(text)
    assert error.line == line, str(error)
    assert fragment in str(error)


@pytest.mark.parametrize("annotation", ["@store(type='rdbms', jdbc.url='jdbc:mysql://h/db')", "@BufferSize('3')"])
def test_aggregation_annotation_on_a_stream(annotation: str) -> None:
    """Above define stream it would be ignored (the rollups would silently go to the embedded store)."""
    error = error_of(f"{annotation}\n{TRADE_STREAM}")
    assert (error.line, error.column) == (1, 1)
    assert "belongs on a define aggregation, not on define stream TradeStream" in str(error)


def test_join_of_two_aggregations() -> None:
    aggregations = "".join(
        f"define aggregation {name} from TradeStream select sum(price) as s aggregate every sec;\n"
        for name in ("A", "B")
    )
    error = error_of(TRADE_STREAM + aggregations + "from A join B within 0L, 1L per 'days' select *")
    assert (error.line, error.column) == (4, 6)
    assert "A and B are both aggregations" in str(error)


def truncations() -> list[str]:
    text = (HERE / "valid" / "seed000_trade_app.siddhi").read_text(encoding="utf-8")
    cuts = [m.start() for m in re.finditer(r"\s", text)]
    return [text[:cut] + "\n ," for cut in cuts[::3]]


@pytest.mark.parametrize("text", truncations(), ids=lambda t: f"cut{len(t)}")
def test_broken_texts_never_leak_lark_names(text: str) -> None:
    """Cut a valid app anywhere and add junk: the error is ours, positioned and in words."""
    error = error_of(text)
    assert error.line is not None and error.column is not None
    assert error.snippet and "^" in error.snippet
    assert not LARK_WORDS.search(str(error).split("\n")[0]), str(error)


@pytest.mark.parametrize(
    ("text", "column", "fragment"),
    [
        ("from A within 0L, 1L per 'days' select * lmit 5", 42, "did you mean 'limit'?"),
        ("from A within 0L, 1L per 'days' slect *", 33, "did you mean 'select'?"),
        ("defne stream T (a int)", 1, "did you mean 'define'?"),
        ("from A within 0L, 1L per 'days' select * order by x ascending", 53, "unexpected name 'ascending'"),
    ],
)
def test_keywords_are_whole_words_and_misspellings_are_corrected(
    text: str, column: int, fragment: str
) -> None:
    error = error_of(text)
    assert (error.line, error.column) == (1, column), str(error)
    assert fragment in str(error)


def test_errors_from_validation_get_a_snippet() -> None:
    error = error_of(
        "define stream T (a int);\ndefine aggregation A from Tx select sum(a) as s aggregate every sec"
    )
    assert error.line == 2
    assert "Tx" in str(error)
    assert error.snippet is not None and "^" in error.snippet
