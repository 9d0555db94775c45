"""Plain stream queries (``from S[filter] select ... insert into T``) on Spark: the events of ``T`` made from
the files of ``S`` feed an aggregation, a continuous query and a sink, checked against pandas over the same
rows; a row ``S`` cannot type is rejected with its own reason wherever it is read, never dropped."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tiltframe as tf
from tiltframe.engine.sinks import CallbackSink
from tiltframe.errors import UsageError

pytestmark = pytest.mark.slow

APP = """@eventTime('ts') define stream S (symbol string, price double, volume long, ts long);
from S[price > 10] select symbol, price * 2 as p, volume, ts insert into T;
define aggregation A from T select symbol, sum(p) as total, count() as n, max(volume) as top
  group by symbol aggregate by ts every sec ... min;
from T[p > 50] select symbol, p insert into U;
@info(name='w') SELECT symbol, count() AS n, sum(p) AS total FROM tumble(T, ts, 1m) GROUP BY symbol
  EMIT AFTER WINDOW CLOSE;
"""

#: Kinds of input rows: what each must become.
KINDS = ("fine", "iso_time", "filtered", "bad_price", "no_symbol", "nan_price")

row_case = st.lists(st.tuples(st.sampled_from(KINDS), st.sampled_from("ab"), st.integers(11, 60),
                              st.integers(0, 250_000)), min_size=1, max_size=30)


def _row(kind: str, symbol: str, price: int, ts: int) -> dict[str, Any]:
    row: dict[str, Any] = {"symbol": symbol, "price": price, "volume": price % 7, "ts": ts}
    if kind == "iso_time":
        row["ts"] = pd.Timestamp(ts, unit="ms").strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    elif kind == "filtered":
        row["price"] = price % 11  # at most 10: the filter leaves it out
    elif kind == "bad_price":
        row["price"] = "twelve"
    elif kind == "no_symbol":
        row["symbol"] = None
    elif kind == "nan_price":
        row["price"] = "NaN"  # a missing value: the filter does not pass it (NULL), no rejection
    return row


def _run(tmp: Path, spark: Any, rows: list[dict[str, Any]]) -> tuple[Any, pd.DataFrame, pd.DataFrame]:
    (tmp / "in").mkdir()
    (tmp / "in" / "part-0.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    app = tf.load_app(APP)
    got: dict[str, list[pd.DataFrame]] = {"U": [], "w": []}
    sinks = {name: CallbackSink(lambda _s, r, name=name: got[name].append(r.copy())) for name in got}
    result = tf.run(app, {"S": str(tmp / "in")}, data_dir=tmp / "data", spark=spark, outputs=sinks)
    frames = {name: pd.concat(parts, ignore_index=True) if parts else pd.DataFrame() for name, parts in got.items()}
    return result, frames["U"], frames["w"]


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cases=row_case)
def test_stream_query_rows_feed_an_aggregation_a_sink_and_a_continuous_query(spark, tmp_path_factory, cases) -> None:
    tmp = tmp_path_factory.mktemp("sq")
    rows = [_row(*c) for c in cases]
    result, u_rows, w_rows = _run(tmp, spark, rows)
    kinds = pd.DataFrame(cases, columns=["kind", "symbol", "price", "ts"])
    events = kinds[kinds["kind"].isin(["fine", "iso_time"])].assign(p=lambda f: f["price"] * 2.0,
                                                                    volume=lambda f: f["price"] % 7)
    rejected = int(kinds["kind"].isin(["bad_price", "no_symbol"]).sum())
    totals = result.aggregations["A"]
    assert (totals.events_aggregated, totals.events_rejected) == (len(events), rejected)
    answer = tf.query(tf.load_app(APP), 'from A within 0L, 9000000000000L per "minutes" select symbol, total, n, top',
                      data_dir=tmp / "data")
    want = events.groupby("symbol").agg(total=("p", "sum"), n=("p", "size"), top=("volume", "max")).reset_index()
    got = answer.groupby("symbol").agg(total=("total", "sum"), n=("n", "sum"), top=("top", "max")).reset_index()
    pd.testing.assert_frame_equal(got, want, check_dtype=False)
    # U: every T event with p > 50, a missing symbol included (U needs none); rejected rows counted apart.
    no_symbol = kinds[kinds["kind"] == "no_symbol"].assign(symbol=None, p=lambda f: f["price"] * 2.0)
    want_u = pd.concat([events, no_symbol])
    want_u = want_u[want_u["p"] > 50]
    assert sorted(u_rows["p"].tolist() if not u_rows.empty else []) == sorted(want_u["p"].tolist())
    bad = int((kinds["kind"] == "bad_price").sum())
    assert (result.streams["U"].rows, result.streams["U"].rejected) == (len(want_u), bad)
    # The continuous query: one row per symbol and minute of T's events, for the minutes the greatest event
    # time closed (AFTER WINDOW CLOSE; the input is one micro-batch, so no event is late).
    closed = events[(events["ts"] // 60_000 + 1) * 60_000 <= events["ts"].max()] if not events.empty else events
    minutes = closed.assign(minute=closed["ts"] // 60_000).groupby(["symbol", "minute"])
    want_w = sorted(zip(minutes["p"].size().index.get_level_values(0), minutes["p"].size(), minutes["p"].sum(),
                        strict=True))
    got_w = sorted(zip(w_rows["symbol"], w_rows["n"], w_rows["total"], strict=True)) if not w_rows.empty else []
    assert got_w == [(s, int(n), float(t)) for s, n, t in want_w]


def test_an_input_for_a_stream_a_query_writes_is_refused(spark, tmp_path: Path) -> None:
    said = r"stream T is written by a stream query \(line 2\); give the input to stream S"
    with pytest.raises(UsageError, match=said):
        tf.run(tf.load_app(APP), {"T": str(tmp_path)}, data_dir=tmp_path / "data", spark=spark)


def test_a_stream_query_makes_a_join_s_requests(spark, tmp_path: Path) -> None:
    """Requests filtered and renamed by a stream query before the join answers them; a request the query's
    input cannot type is counted as rejected, one the filter leaves out is not answered."""
    app = tf.load_app(
        "define stream S (symbol string, price double, ts long);\n"
        "define aggregation A from S select symbol, sum(price) as total group by symbol aggregate by ts every sec;\n"
        "define stream Raw (sym string, per string, wanted int);\n"
        "from Raw[wanted == 1] select sym as symbol, per insert into Req;\n"
        "from Req join A on A.symbol == Req.symbol within 0L, 10000L per Req.per "
        "select AGG_TIMESTAMP, A.symbol, total insert into Out;\n"
    )
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in [
        {"symbol": "a", "price": 1.5, "ts": 1000}, {"symbol": "a", "price": 2.0, "ts": 2500},
        {"symbol": "b", "price": 4.0, "ts": 1000}]))
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in [
        {"sym": "a", "per": "seconds", "wanted": 1}, {"sym": "b", "per": "seconds", "wanted": 0},
        {"sym": "b", "per": "seconds", "wanted": "yes"}]))
    got: list[pd.DataFrame] = []
    result = tf.run(app, {"S": str(tmp_path / "s"), "Raw": str(tmp_path / "r")}, data_dir=tmp_path / "data",
                    spark=spark, outputs={"Out": CallbackSink(lambda _s, r: got.append(r.copy()))})
    rows = pd.concat(got, ignore_index=True)
    assert rows[["AGG_TIMESTAMP", "symbol", "total"]].values.tolist() == [[1000, "a", 1.5], [2000, "a", 2.0]]
    assert result.requests_rejected == 1


def test_the_cli_runs_stream_queries_from_a_csv_with_a_header(tmp_path: Path) -> None:
    """``tiltframe run`` over a CSV file (header, a quoted comma, ISO and epoch times, a bad price) in a
    folder with a space: the aggregation over the derived stream gets its events (no 'no --input' note),
    and the stream nothing reads goes to its output with its rejected row counted."""
    from typer.testing import CliRunner

    from tiltframe.cli.commands import app as cli

    folder = tmp_path / "in dir"
    folder.mkdir()
    (folder / "trades (1).csv").write_text(
        'symbol,price,volume,ts\nA,20,1,2024-01-01T00:00:01Z\nB,x,1,2024-01-01T00:00:02Z\n"B, Inc",40,1,1704067203000\n'
    )
    (tmp_path / "app.siddhi").write_text(APP)
    args = ["run", str(tmp_path / "app.siddhi"), "--input", f"S={folder}", "-d", str(tmp_path / "data"),
            "--output", f"U=jsonl:{tmp_path / 'out'}"]
    done = CliRunner().invoke(cli, args)
    assert done.exit_code == 0, done.output
    assert "has no --input" not in done.output
    assert "stream U: 1 events written, 1 events rejected" in done.output
    rows = [json.loads(line) for f in (tmp_path / "out").glob("*.jsonl") for line in f.read_text().splitlines()]
    assert [(r["symbol"], r["p"]) for r in rows] == [("B, Inc", 80.0)]
    answer = tf.query(tf.load_app(APP), 'from A within "2024-01-01 00:00:00", "2024-01-02 00:00:00" per "minutes" '
                      "select symbol, total, n", data_dir=tmp_path / "data")
    assert sorted(answer[["symbol", "total", "n"]].values.tolist()) == [["A", 40.0, 1], ["B, Inc", 80.0, 1]]
