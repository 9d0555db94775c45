"""A retrieval join's request values resolved one request at a time: a request whose ``per`` or ``within``
values cannot be answered is refused naming the attribute and its value (``RequestRejected``), any other
is resolved to the range and level that Python's own datetime arithmetic gives."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tiltframe as tf
from tiltframe.aggregates.layout import AggregationLayout
from tiltframe.errors import QueryError
from tiltframe.retrieval.retrieve import RequestRejected, resolve

APP = """define stream S (symbol string, price double, ts long);
define aggregation A from S select symbol, sum(price) as total group by symbol aggregate by ts every sec, min, hour;
define stream Req (symbol string, a string, b string, p string);
from Req join A on A.symbol == Req.symbol within Req.a, Req.b per Req.p select AGG_TIMESTAMP, total insert into Out;
"""
KEPT = {"sec": 1_000, "seconds": 1_000, "SECONDS": 1_000, "min": 60_000, "minutes": 60_000, "hours": 3_600_000,
        "hour": 3_600_000}
NOT_KEPT = ("days", "weeks", "months", "year")
NOT_DURATIONS = ("fortnights", "", "5", "per day", "minutes in Nowhere/Land")
NOT_TIMES = ("abc", "2024-13-01 00:00:00", "2024-02-30 10:00:00", "yesterdayish", "")

app = tf.load_app(APP)
layout = AggregationLayout.of(app, "A")
query = app.queries[0]

times = st.datetimes(min_value=datetime(1990, 1, 1), max_value=datetime(2100, 1, 1)).map(
    lambda d: d.replace(microsecond=0))


@settings(max_examples=300, deadline=None)
@given(start=st.one_of(times, st.sampled_from(NOT_TIMES)), length=st.integers(-90_000, 10**9),
       end_bad=st.one_of(st.none(), st.sampled_from(NOT_TIMES)),
       per=st.sampled_from([*KEPT, *NOT_KEPT, *NOT_DURATIONS]))
def test_each_request_value_is_resolved_or_refused_by_name(start, length, end_bad, per) -> None:
    a = start if isinstance(start, str) else start.strftime("%Y-%m-%d %H:%M:%S")
    end = None if isinstance(start, str) else start + timedelta(seconds=length)
    b = end_bad if end_bad is not None else (end or datetime(2000, 1, 1)).strftime("%Y-%m-%d %H:%M:%S")
    request = {"symbol": "x", "a": a, "b": b, "p": per}
    if isinstance(start, str):
        with pytest.raises(RequestRejected) as refused:
            resolve(layout, query, request)
        assert (refused.value.field, refused.value.value) == ("a", a)
        assert refused.value.reason.startswith(f"field 'a': value {a!r} is not a time")
        return
    if end_bad is not None:
        with pytest.raises(RequestRejected) as refused:
            resolve(layout, query, request)
        assert (refused.value.field, refused.value.value) == ("b", b)
        return
    if length <= 0:
        with pytest.raises(RequestRejected) as refused:
            resolve(layout, query, request)
        assert (refused.value.field, refused.value.value) == ("a, b", f"{a}, {b}")
        assert "the start must be before the end" in refused.value.reason
        return
    if per not in KEPT:
        with pytest.raises(RequestRejected) as refused:
            resolve(layout, query, request)
        assert (refused.value.field, refused.value.value) == ("p", per)
        assert refused.value.reason.startswith(f"field 'p': value {per!r} is not a duration aggregation A keeps")
        return
    got = resolve(layout, query, request)
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    want_start = (start.replace(tzinfo=UTC) - epoch) // timedelta(milliseconds=1)
    want_end = (end.replace(tzinfo=UTC) - epoch) // timedelta(milliseconds=1)
    assert (got.start_ms, got.end_ms, got.granularity.unit.fixed_ms if got.granularity else None) == (
        want_start, want_end, KEPT[per])


def test_a_request_rejection_is_a_query_error_and_a_query_s_own_problems_are_not_rejections() -> None:
    assert issubclass(RequestRejected, QueryError)
    with pytest.raises(QueryError, match="needs a request event") as refused:
        resolve(layout, query)  # no request: the query's problem, not a request's
    assert not isinstance(refused.value, RequestRejected)
