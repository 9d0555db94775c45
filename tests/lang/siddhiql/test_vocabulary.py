"""The closed annotation vocabularies (``lang.siddhiql.vocabulary``): every listed annotation is taken where it is
listed, in any case, and a misspelled annotation or element anywhere gets the closest listed name."""

from __future__ import annotations

import pytest

from tiltframe.errors import DefinitionError
from tiltframe.lang import parse_app
from tiltframe.lang.siddhiql.vocabulary import PLACES, Rule

STREAM = "define stream S (sym string, v double, ts long);\n"
AGG = "define aggregation A from S select sum(v) as total aggregate by ts every sec ... day;\n"
TABLE = "define table T (time long, x double) preaggregate by time every min measures sum(x) as s;\n"
QUERY = "from A within 0L, 1L per 'seconds' select total;\n"
CONTINUOUS = "SELECT count() AS n FROM S;\n"


def text_with(place: str, annotation: str) -> str:
    """A valid app with ``annotation`` on a definition of ``place``."""
    if place == "app":
        return f"{annotation}\n{STREAM}{AGG}"
    if place == "define stream":
        return f"{annotation}\n{STREAM}{AGG}"
    if place == "define aggregation":
        return f"{STREAM}{annotation}\n{AGG}"
    if place == "define table":
        return f"{annotation}\n{TABLE}"
    if place == "a retrieval query":
        return f"{STREAM}{AGG}{annotation}\n{QUERY}"
    return f"{STREAM}{annotation}\n{CONTINUOUS}"


RULES = [(place, rule) for place, rules in PLACES.items() for rule in rules]


@pytest.mark.parametrize(("place", "rule"), RULES, ids=[f"{p}:{r.name}" for p, r in RULES])
def test_every_example_is_taken_where_it_is_listed(place: str, rule: Rule) -> None:
    example = rule.example.replace("jdbc:postgresql://host:5432/db", "jdbc:sqlite:x.db")
    if rule.name == "eventTime":
        example = "@eventTime('ts')"
    parse_app(text_with(place, example))


@pytest.mark.parametrize(
    "annotation",
    ["@STORE(TYPE='rdbms', JDBC.URL='jdbc:sqlite:x.db')", "@partitionbyid('false')", "@Purge(Enable='false')",
     "@bUFFERsIZE('2')"],
)
def test_names_compare_case_insensitively(annotation: str) -> None:
    parse_app(text_with("define aggregation", annotation))


@pytest.mark.parametrize(("place", "rule"), [(p, r) for p, r in RULES if r.keys and not r.open],
                         ids=[f"{p}:{r.name}" for p, r in RULES if r.keys and not r.open])
def test_a_misspelled_element_gets_the_closest_name(place: str, rule: Rule) -> None:
    key = (rule.shown or rule.keys)[-1]
    wrong = key[:-1] + ("x" if key[-1] != "x" else "y")
    text = text_with(place, f"@{rule.name}({wrong}='1')")
    with pytest.raises(DefinitionError) as caught:
        parse_app(text)
    error = caught.value
    assert f"unknown element '{wrong}' of @{rule.name}" in error.message
    assert "did you mean" in error.message
    line = text.splitlines()[error.line - 1]
    assert line[error.column - 1 :].startswith(wrong)


@pytest.mark.parametrize("place", list(PLACES))
def test_a_misspelled_annotation_gets_the_closest_name(place: str) -> None:
    rule = PLACES[place][0]
    wrong = rule.name[:-1]
    with pytest.raises(DefinitionError, match=f"unknown annotation @{wrong} on .* did you mean '@{rule.name}'") as c:
        parse_app(text_with(place, f"@{wrong}('x')"))
    assert c.value.column == 1


def test_open_annotations_take_anything() -> None:
    """``@source`` and ``@sink`` configure Siddhi's transports, which tiltframe does not run."""
    parse_app(text_with("define stream", "@source(type='kafka', topic.list='t', @map(type='json', "
                                         "@attributes(sym='$.s')))\n@sink(type='log', prefix='x')"))


def test_an_unknown_annotation_is_not_kept_raw_any_more() -> None:
    """It used to be kept on the spec and ignored; a misspelling then silently lost its policy."""
    with pytest.raises(DefinitionError, match="unknown annotation @Custom on define aggregation A"):
        parse_app(text_with("define aggregation", "@Custom(x='1')"))


def test_the_docs_list_every_annotation() -> None:
    from pathlib import Path

    docs = (Path(__file__).resolve().parents[3] / "docs" / "schema.md").read_text(encoding="utf-8")
    listed = docs[docs.index("## Annotations"):docs.index("## Reading while")]
    for place, rule in RULES:
        assert f"`@{rule.name}`" in listed, (place, rule.name)
        for key in rule.shown or rule.keys:
            assert f"`{key}`" in listed, (rule.name, key)
