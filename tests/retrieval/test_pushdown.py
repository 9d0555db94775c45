"""The keys a retrieval's ``on`` pins are read alone from the store, and the answer never depends on it:
keys differing only in case or spaces (equal under MariaDB's default collation) stay apart on every store."""

from __future__ import annotations

from pathlib import Path

import pytest

import tiltframe as tf
from tests.bad_input.harness import run, store_url
from tests.servers import STORES
from tiltframe.aggregates.layout import AggregationLayout
from tiltframe.lang.siddhiql.parser import parse_retrieval
from tiltframe.retrieval.pushdown import pinned_keys

APP = """
define stream S (k string, n int, flag bool, v double, ts long);
define aggregation A from S
select k, n, flag, sum(v) as total, count() as events
group by k, n, flag
aggregate by ts every sec ... day;
"""
RANGE = 'within "2024-01-05", "2024-01-06" per "days"'


def pinned(on: str, request: dict | None = None) -> dict:
    app = tf.load_app(APP)
    text = f"from A on {on} {RANGE} select k, total" if request is None else (
        f"define stream R (q string, m long); from R join A on {on} {RANGE} select A.k, total insert into Out;")
    if request is None:
        query = parse_retrieval(text, app)
    else:
        app = tf.load_app(APP + text)
        query = app.queries[0]
    return pinned_keys(AggregationLayout.of(app, "A"), query, request)


def test_what_is_pinned() -> None:
    assert pinned('k == "a"') == {"k": ("a",)}
    assert pinned('"a" == k and n == 3') == {"k": ("a",), "n": (3,)}
    assert pinned('(k == "a" or k == "b") and n > 1') == {"k": ("a", "b")}
    assert pinned('k == "a" and k == "b"') == {"k": ()}  # nothing can match: nothing is read
    assert pinned("flag == true") == {"flag": (True,)}


def test_what_is_not_pinned() -> None:
    assert pinned('k == "a" or n == 1') == {}  # two keys: either may hold
    assert pinned('not (k == "a")') == {}
    assert pinned('k != "a"') == {}
    assert pinned("n == 1.0") == {}  # a double against an int key: left to the condition
    assert pinned("n == true") == {}
    assert pinned("flag == 1") == {}


def test_a_request_value_is_pinned_when_its_type_is_the_key_s() -> None:
    assert pinned("A.k == R.q", {"q": "IBM", "m": 1}) == {"k": ("IBM",)}
    assert pinned("A.n == R.m", {"q": "IBM", "m": 2}) == {"n": (2,)}
    assert pinned("A.k == R.q", {"q": 5, "m": 1}) == {}


@pytest.mark.slow
@pytest.mark.parametrize("kind", STORES)
def test_keys_alike_under_a_collation_stay_apart(spark: object, tmp_path: Path, kind: str) -> None:
    inbox = tmp_path / "in"
    inbox.mkdir()
    keys = {"IBM": 1.0, "ibm": 2.0, "IBM ": 4.0, "İBM": 8.0}
    (inbox / "e.jsonl").write_text("".join(
        f'{{"k": "{k}", "n": 1, "flag": true, "v": {v}, "ts": "2024-01-05 10:00:00"}}\n' for k, v in keys.items()),
        encoding="utf-8")
    with store_url(kind) as url:
        out = run(spark, APP, {"S": inbox}, tmp_path / "data", store=url)
        for key, total in keys.items():
            got = out.query(f'from A on k == "{key}" {RANGE} select k, total')
            assert list(zip(got["k"], got["total"], strict=True)) == [(key, total)], key
        both = out.query(f'from A on k == "IBM" or k == "ibm" {RANGE} select k, total order by k')
        assert list(both["k"]) == ["IBM", "ibm"]
        none = out.query(f'from A on k == "IBM" and k == "ibm" {RANGE} select k, total')
        assert none.empty
