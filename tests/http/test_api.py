"""The HTTP API over a store built by a real run (SQLite, PostgreSQL, MariaDB): every figure equals the
pandas oracle over the raw events, errors have their status and shape, and the server never writes."""

from __future__ import annotations

import hashlib
import io
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.bad_input.harness import store_url
from tests.http.served import DAY, SYMBOLS, T0, Served, build, oracle, serving
from tests.servers import STORES

QUERY = ('from TradeAggregation within "2024-01-** **:**:**" per "days" '
         "select AGG_TIMESTAMP, AGG_TIME, symbol, total, trades, avgPrice")


@pytest.fixture(scope="module", params=STORES)
def served(request: pytest.FixtureRequest, spark: object, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp(f"served-{request.param}")
    with store_url(request.param) as url:
        app, events = build(spark, tmp, url)
        with serving(app, tmp / "data", events, rejected=3) as s:
            yield s


def expected_days(s: Served) -> pd.DataFrame:
    return oracle(s.events)


@pytest.mark.slow
def test_the_catalog_shows_what_the_store_holds(served: Served) -> None:
    with served.client() as c:
        doc = c.get("/api/aggregations").json()
    (agg,) = doc["aggregations"]
    assert agg["name"] == "TradeAggregation" and agg["zone"] == "UTC"
    assert agg["group_by"] == [{"name": "symbol", "type": "string"}]
    assert [(m["name"], m["function"], m["type"]) for m in agg["measures"]] == [
        ("avgPrice", "avg", "double"), ("total", "sum", "long"), ("trades", "count", "long")]
    assert agg["granularities"] == ["seconds", "minutes", "hours", "days", "months", "years"]
    events = served.events
    assert agg["events"] == {"read": len(events) + 3, "aggregated": len(events), "moved": 0, "rejected": 3}
    # the first event's finest bucket (the store keeps bucket starts), and the latest event time
    assert (agg["first_event"], agg["last_event"]) == (events["ts"].min() // 1000 * 1000, events["ts"].max())
    days = next(t for t in agg["tables"] if t["granularity"] == "days")
    want = expected_days(served)
    assert days["rows"] == len(want)
    assert (days["first_bucket"], days["last_bucket"]) == (want["AGG_TIMESTAMP"].min(), want["AGG_TIMESTAMP"].max())
    seconds = next(t for t in agg["tables"] if t["granularity"] == "seconds")
    assert seconds["rows"] == len(oracle(events, 1000))
    assert doc["continuous"] == [] and doc["tables"] == []
    with served.client() as c:
        assert c.get("/api/aggregations/TradeAggregation").json()["events"] == agg["events"]


@pytest.mark.slow
def test_series_equal_the_oracle(served: Served) -> None:
    want = expected_days(served)
    with served.client() as c:
        doc = c.get("/api/aggregations/TradeAggregation/series", params={"per": "days", "measure": "total"}).json()
        avg = c.get("/api/aggregations/TradeAggregation/series",
                    params={"per": "days", "measure": "avgPrice", "on": 'symbol == "IBM"',
                            "start": "2024-01-05", "end": str(T0 + 10 * DAY)}).json()
        few = c.get("/api/aggregations/TradeAggregation/series", params={"per": "days", "max_series": 2}).json()
    assert (doc["per"], doc["measure"], doc["zone"], doc["group_by"]) == ("days", "total", "UTC", ["symbol"])
    assert doc["series_total"] == len(SYMBOLS)
    got = {line["label"]: line["points"] for line in doc["series"]}
    assert sorted(got) == sorted(SYMBOLS)
    for symbol, rows in want.groupby("symbol"):
        assert got[symbol] == [[int(t), int(v)] for t, v in zip(rows["AGG_TIMESTAMP"], rows["total"], strict=True)]
    ts = want["AGG_TIMESTAMP"]
    ibm = want[(want["symbol"] == "IBM") & (ts >= T0 + 4 * DAY) & (ts < T0 + 10 * DAY)]
    (line,) = avg["series"]
    assert line["key"] == {"symbol": "IBM"} and [p[0] for p in line["points"]] == list(ibm["AGG_TIMESTAMP"])
    assert [p[1] for p in line["points"]] == pytest.approx(list(ibm["avgPrice"]), rel=1e-12)
    assert (few["series_total"], [s["label"] for s in few["series"]]) == (3, sorted(SYMBOLS)[:2])
    assert few["measure"] == "avgPrice"  # the first numeric measure when none is named


@pytest.mark.slow
def test_queries_answer_as_json_csv_and_arrow(served: Served) -> None:
    want = expected_days(served)
    with served.client() as c:
        doc = c.post("/api/query", json={"query": QUERY}).json()
        csv = c.post("/api/query", params={"format": "csv"}, json={"query": QUERY})
        arrow = c.post("/api/query", headers={"Accept": "application/vnd.apache.arrow.stream"}, json={"query": QUERY})
    assert doc["columns"] == ["AGG_TIMESTAMP", "AGG_TIME", "symbol", "total", "trades", "avgPrice"]
    got = pd.DataFrame(doc["rows"]).sort_values(["AGG_TIMESTAMP", "symbol"]).reset_index(drop=True)
    assert list(got["AGG_TIMESTAMP"]) == list(want["AGG_TIMESTAMP"])
    assert list(got["AGG_TIME"]) == [pd.Timestamp(t, unit="ms", tz="UTC").isoformat(timespec="milliseconds")
                                     for t in want["AGG_TIMESTAMP"]]
    assert (list(got["symbol"]), list(got["total"]), list(got["trades"])) == (
        list(want["symbol"]), list(want["total"]), list(want["trades"]))
    assert list(got["avgPrice"]) == pytest.approx(list(want["avgPrice"]), rel=1e-12)
    assert csv.headers["content-type"].startswith("text/csv")
    from_csv = pd.read_csv(io.StringIO(csv.text)).sort_values(["AGG_TIMESTAMP", "symbol"]).reset_index(drop=True)
    assert list(from_csv["total"]) == list(want["total"]) and from_csv["AGG_TIME"][0].endswith("+00:00")
    assert arrow.headers["content-type"] == "application/vnd.apache.arrow.stream"
    table = pa.ipc.open_stream(arrow.content).read_all().to_pandas()
    table = table.sort_values(["AGG_TIMESTAMP", "symbol"]).reset_index(drop=True)
    assert list(table["trades"]) == list(want["trades"]) and str(table["AGG_TIME"].dtype) == "datetime64[ms, UTC]"


@pytest.mark.slow
def test_status_rejected_and_metrics(served: Served) -> None:
    with served.client() as c:
        status = c.get("/api/status").json()
        rejected = c.get("/api/rejected/TradeAggregation", params={"limit": 2}).json()
        c.post("/api/query", json={"query": QUERY})
        metrics = c.get("/metrics").text
    n = len(served.events)
    assert status["pipeline"] is None  # no pipeline in this process
    agg = status["aggregations"]["TradeAggregation"]
    assert (agg["events_read"], agg["events_aggregated"], agg["events_rejected"]) == (n + 3, n, 3)
    assert agg["watermark"] == served.events["ts"].max() and agg["watermark_time"].endswith("+00:00")
    assert len(rejected["rows"]) == 2
    assert all("n/a" in r["value"] and "price" in r["reason"] for r in rejected["rows"])
    assert all(r["event_time"] == "2024-01-01T00:00:00.000+00:00" for r in rejected["rows"])
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in text_string_to_metric_families(metrics) for s in family.samples}
    label = (("aggregation", "TradeAggregation"),)
    assert samples[("tiltframe_events_read_total", label)] == n + 3
    assert samples[("tiltframe_events_aggregated_total", label)] == n
    assert samples[("tiltframe_events_rejected_total", label)] == 3
    assert samples[("tiltframe_store_up", label)] == 1
    assert samples[("tiltframe_rollup_rows", (*label, ("granularity", "days")))] == len(expected_days(served))
    reasons = [v for (name, labels), v in samples.items() if name == "tiltframe_events_rejected_by_reason_total"]
    assert sum(reasons) == 3
    assert samples[("tiltframe_retrieval_duration_seconds_count", label)] >= 1
    assert any(name == "tiltframe_http_requests_total" and ("route", "/api/query") in labels
               for name, labels in samples)


@pytest.mark.slow
def test_errors_have_their_status_and_shape(served: Served) -> None:
    with served.client() as c:
        typo = c.post("/api/query", json={"query": QUERY.replace('per "days"', 'per "dayz"')})
        syntax = c.post("/api/query", json={"query": "from TradeAggregation within 0L, 1L per 'days' selec *"})
        unknown = c.get("/api/aggregations/TradeAgregation/series")
        rejected = c.get("/api/rejected/Nope")
        bad_on = c.get("/api/aggregations/TradeAggregation/series", params={"on": "symbl == 'IBM'"})
        bad_measure = c.get("/api/aggregations/TradeAggregation/series", params={"measure": "totl"})
        bad_range = c.get("/api/aggregations/TradeAggregation/series",
                          params={"start": "2024-02-01", "end": "2024-01-01"})
        no_body = c.post("/api/query", json={"text": QUERY})
        bad_format = c.post("/api/query", params={"format": "xml"}, json={"query": QUERY})
        no_route = c.get("/api/nothing")
        commented = c.get("/api/aggregations/TradeAggregation/series", params={"on": 'symbol == "IBM" -- the one'})
        clause = c.get("/api/aggregations/TradeAggregation/series", params={"on": 'symbol == "IBM" group by symbol'})
        too_many = c.get("/api/aggregations/TradeAggregation/series", params={"per": "seconds"})  # 20 days
        one_day = c.get("/api/aggregations/TradeAggregation/series",
                        params={"per": "seconds", "start": "2024-01-03", "end": "2024-01-03T12:00:00Z"})
    assert typo.status_code == 400
    assert typo.json() == {"error": typo.json()["error"], "line": 1, "column": 56, "hint": "did you mean 'day'?"}
    assert "unknown duration 'dayz'" in typo.json()["error"]
    assert syntax.status_code == 400 and (syntax.json()["line"], syntax.json()["column"]) == (1, 48)
    assert syntax.json()["hint"] == "did you mean 'select'?"
    assert unknown.status_code == 404 and unknown.json()["hint"] == "did you mean 'TradeAggregation'?"
    assert rejected.status_code == 404
    assert bad_on.status_code == 400 and (bad_on.json()["line"], bad_on.json()["column"]) == (1, 1)
    assert "in on:" in bad_on.json()["error"] and bad_on.json()["hint"] == "did you mean 'symbol'?"
    assert bad_measure.status_code == 400 and bad_measure.json()["hint"] == "did you mean 'total'?"
    assert bad_range.status_code == 400 and "must be before" in bad_range.json()["error"]
    assert no_body.status_code == 400 and "body.query" in no_body.json()["error"]
    assert bad_format.status_code == 400 and "unknown format 'xml'" in bad_format.json()["error"]
    assert no_route.status_code == 404 and set(no_route.json()) == {"error", "line", "column", "hint"}
    assert [line["label"] for line in commented.json()["series"]] == ["IBM"]
    assert clause.status_code == 400 and clause.json()["error"].startswith("in on: ")
    assert too_many.status_code == 400 and "buckets for each key, more than the 50,000" in too_many.json()["error"]
    assert one_day.status_code == 200 and one_day.json()["per"] == "seconds"
    for response in (typo, syntax, unknown, bad_on, no_body, no_route):
        assert "Traceback" not in response.text


@pytest.mark.slow
def test_a_token_guards_every_request_but_the_page(served: Served) -> None:
    with serving(served.app, served.data_dir, served.events, 3, token="s3cret") as guarded:
        with guarded.client(token="") as anonymous:
            assert anonymous.get("/api/aggregations").status_code == 401
            assert anonymous.get("/metrics").status_code == 401
            refused = anonymous.post("/api/query", json={"query": QUERY})
            assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer"
            assert anonymous.get("/").status_code == 200  # the page holds no data; it asks for the token
            described = anonymous.get("/openapi.json").json()["paths"]  # nor does the API's description
            assert {"/api/query", "/api/aggregations", "/api/status"} <= set(described)
        with guarded.client(token="wrong") as wrong:
            assert wrong.get("/api/status").status_code == 401
        with guarded.client() as right:
            assert right.get("/api/status").status_code == 200
            assert right.post("/api/query", json={"query": QUERY}).status_code == 200


def test_a_store_that_cannot_be_read_is_503_and_nothing_is_written(tmp_path: Path) -> None:
    """No data yet: every read says so with 503, and the server creates no file (read-only)."""
    import tiltframe as tf
    from tests.http.served import APP

    app = tf.load_app(APP)
    data = tmp_path / "data"
    with serving(app, data, pd.DataFrame(), 0) as s, s.client() as c:
        answers = [c.post("/api/query", json={"query": QUERY}), c.get("/api/aggregations"),
                   c.get("/api/aggregations/TradeAggregation/series"), c.get("/api/rejected/TradeAggregation")]
        status = c.get("/api/status").json()
        metrics = c.get("/metrics").text
    assert [a.status_code for a in answers] == [503] * 4
    assert all("no data for aggregation TradeAggregation" in a.json()["error"] for a in answers)
    assert "no data" in status["aggregations"]["TradeAggregation"]["error"]
    assert 'tiltframe_store_up{aggregation="TradeAggregation"} 0.0' in metrics
    assert not data.exists()


@pytest.mark.slow
def test_reads_leave_the_embedded_store_unchanged(spark: object, tmp_path: Path) -> None:
    app, events = build(spark, tmp_path, None, n=50, bad=0)
    db = tmp_path / "data" / "tiltframe.db"
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    files = sorted(p.name for p in db.parent.iterdir())
    with serving(app, tmp_path / "data", events, 0) as s, s.client() as c:
        for _ in range(3):
            assert c.post("/api/query", json={"query": QUERY}).status_code == 200
            assert c.get("/api/aggregations").status_code == 200
            assert c.get("/metrics").status_code == 200
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before
    assert sorted(p.name for p in db.parent.iterdir()) == files


@pytest.mark.slow
def test_select_over_a_pre_aggregated_table(spark: object, tmp_path: Path) -> None:
    import tiltframe as tf

    app = tf.load_app("""@preaggregate(workers='2')
define table AdImpressions (time long, site string, clicked int)
    preaggregate by time every min
    dimensions site
    measures count() as impressions, sum(clicked) as clicks;
""")
    rows = pd.DataFrame([{"time": T0 + i * 7_000, "site": "a" if i % 3 else "b", "clicked": i % 2} for i in range(90)])
    tf.insert(app, "AdImpressions", rows, data_dir=tmp_path / "data", spark=spark)
    want = rows.groupby("site", as_index=False).agg(impressions=("clicked", "size"), clicks=("clicked", "sum"))
    with serving(app, tmp_path / "data", rows, 0) as s, s.client() as c:
        answer = c.post("/api/query", json={"query": "SELECT site, impressions, clicks FROM AdImpressions "
                                                     "GROUP BY site ORDER BY site"}).json()
        wrong = c.post("/api/query", json={"query": "SELECT site, clicked FROM AdImpressions"})
        catalog = c.get("/api/aggregations").json()
    assert answer["rows"] == want.to_dict("records")
    assert wrong.status_code == 400 and wrong.json()["line"] == 1
    (table,) = catalog["tables"]
    assert (table["name"], table["preaggregated"], table["interval"], table["dimensions"]) == (
        "AdImpressions", True, "minutes", ["site"])
    assert table["measures"] == ["count() as impressions", "sum(clicked) as clicks"]
    minutes = rows["time"] // 60_000 * 60_000
    assert (table["first_interval"], table["last_interval"]) == (minutes.min(), minutes.max())
    assert minutes.nunique() <= table["rows"] <= 2 * rows.groupby([minutes, rows["site"]]).ngroups  # 2 workers


@pytest.mark.slow
def test_series_of_an_aggregation_without_keys_in_another_zone(spark: object, tmp_path: Path) -> None:
    """Days start at Kolkata's midnight (18:30 GMT the day before); one line, labelled by the measure."""
    import tiltframe as tf
    from tests.http.served import trades, write_csv

    app = tf.load_app("""define stream S (symbol string, price double, quantity long, timestamp long);
@timezone('Asia/Kolkata')
define aggregation Daily from S select sum(quantity) as total aggregate by timestamp every day ... month;
""")
    inbox = tmp_path / "in"
    inbox.mkdir()
    events = trades(400, seed=11, days=6)
    write_csv(events, inbox / "t.csv")
    tf.run(app, {"S": inbox}, data_dir=tmp_path / "data", spark=spark)
    local = pd.to_datetime(events["ts"], unit="ms", utc=True).dt.tz_convert("Asia/Kolkata").dt.normalize()
    want = events.groupby(local)["quantity"].sum()
    with serving(app, tmp_path / "data", events, 0) as s, s.client() as c:
        doc = c.get("/api/aggregations/Daily/series", params={"per": "days"}).json()
        query = 'from Daily within 0L, 4102444800000L per "days" select AGG_TIME, total'
        text = c.post("/api/query", json={"query": query})
    assert (doc["zone"], doc["group_by"], doc["series_total"]) == ("Asia/Kolkata", [], 1)
    (line,) = doc["series"]
    assert (line["key"], line["label"]) == ({}, "total")
    assert line["points"] == [[int(t.timestamp() * 1000), int(v)] for t, v in want.items()]
    assert [r["AGG_TIME"] for r in text.json()["rows"]] == [t.isoformat(timespec="milliseconds") for t in want.index]


@pytest.mark.slow
def test_kept_answers_follow_every_commit(spark: object, tmp_path: Path) -> None:
    """The server keeps answers while the embedded store is unchanged; each new batch, from this process or
    another writer, is in the next answer, and the catalog's and the metrics' counts follow."""
    import tiltframe as tf
    from tests.http.served import trades, write_csv
    from tiltframe.store.reads.sqlite_read import change_token

    app, events = build(spark, tmp_path, None, n=200, bad=0)
    db = tmp_path / "data" / "tiltframe.db"
    inbox = tmp_path / "in put"
    with serving(app, tmp_path / "data", events, 0) as s, s.client() as c:
        token = change_token(db)
        first = c.post("/api/query", json={"query": QUERY}).json()["rows"]
        assert c.post("/api/query", json={"query": QUERY}).json()["rows"] == first
        assert change_token(db) == token  # reading changes nothing
        for round_ in range(3):
            more = trades(50, seed=100 + round_)
            write_csv(more, inbox / f"more {round_}.csv")
            tf.run(app, {"TradeStream": inbox}, data_dir=tmp_path / "data", spark=spark)
            events = pd.concat([events, more], ignore_index=True)
            assert change_token(db) != token
            token = change_token(db)
            got = pd.DataFrame(c.post("/api/query", json={"query": QUERY}).json()["rows"])
            want = oracle(events)
            assert list(got["total"]) == list(want["total"]) and list(got["trades"]) == list(want["trades"])
            (agg,) = c.get("/api/aggregations").json()["aggregations"]
            assert agg["events"]["read"] == len(events)
            assert f'tiltframe_events_read_total{{aggregation="TradeAggregation"}} {float(len(events))}' in (
                c.get("/metrics").text)
