"""A continuous query's id, which names its checkpoint and files: the same as before the window kinds
were classes, so a query finds the state it kept."""

from __future__ import annotations

import pytest

from tiltframe.engine.continuous.query import query_id
from tiltframe.lang import parse_app

S = "@eventTime('ts') define stream s (k string, v double, ts long, end_time long);\n"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("s GROUP BY k EMIT PERIODIC 1s", "query-85a43ce50537"),
        ("tumble(s, 10s) GROUP BY k", "query-e9d77edc571d"),
        ("hop(s, ts, 1s, 10s) GROUP BY k", "query-d6badea6d2ff"),
        ("session(s, 5s, 1m) GROUP BY k", "query-c0e1efc5ca82"),
        ("session(s, 5s, [v > 1, v < 0)) GROUP BY k", "query-fde9704eb220"),
        ("tumble(s, 100 events) GROUP BY k", "query-3c162ae562e3"),
        ("tumble(s, [size 2, interval 1m]) GROUP BY k", "query-1b9f27df1800"),
    ],
)
def test_query_id_is_kept(source: str, expected: str) -> None:
    app = parse_app(S + f"SELECT k, count() AS n FROM {source};")
    assert query_id(app, app.continuous[0]) == expected
