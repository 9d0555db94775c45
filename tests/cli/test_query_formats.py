"""``tiltframe query --format``: one answer, with NULLs, in every format (table, csv, json, jsonl, parquet; to
stdout and to ``--output FILE``) on each store, every format telling the same rows; ``inspect --aggregation``
and the width of piped tables.  Expected rows are worked out by hand from the events below."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from tests.bad_input.harness import run, store_url
from tests.servers import STORES, app_with_store
from tiltframe.cli import querying
from tiltframe.cli.commands import app

runner = CliRunner()

APP = """\
define stream TradeStream (symbol string, price double, quantity long, timestamp long);

define aggregation TradeAggregation
from TradeStream
select symbol, avg(price) as avgPrice, sum(quantity) as total, count() as trades
group by symbol
aggregate by timestamp every sec ... day;
"""
# 2024-01-01 00:00:00 GMT = 1704067200000, 2024-01-02 00:00:00 = 1704153600000.
EVENTS = [
    '{"symbol": "IBM", "price": 10.0, "quantity": 5, "timestamp": 1704067200000}',
    '{"symbol": "IBM", "price": 20.0, "quantity": 7, "timestamp": 1704067200500}',
    '{"symbol": "IBM", "price": 30.0, "quantity": 1, "timestamp": 1704189600000}',  # 2024-01-02 10:00:00
    '{"symbol": "NUL", "price": 1.5, "timestamp": 1704067300000}',  # no quantity: total NULL
    '{"symbol": "NUL2", "quantity": 3, "timestamp": 1704067300000}',  # no price: avgPrice NULL
]
QUERY = ('from TradeAggregation within "2024-01-** **:**:**" per "days" '
         "select AGG_TIMESTAMP, AGG_TIME, symbol, total, avgPrice, trades order by AGG_TIMESTAMP, symbol")
DAY1, DAY2 = 1704067200000, 1704153600000
ROWS = [
    {"AGG_TIMESTAMP": DAY1, "AGG_TIME": "2024-01-01T00:00:00.000+00:00", "symbol": "IBM", "total": 12,
     "avgPrice": 15.0, "trades": 2},
    {"AGG_TIMESTAMP": DAY1, "AGG_TIME": "2024-01-01T00:00:00.000+00:00", "symbol": "NUL", "total": None,
     "avgPrice": 1.5, "trades": 1},
    {"AGG_TIMESTAMP": DAY1, "AGG_TIME": "2024-01-01T00:00:00.000+00:00", "symbol": "NUL2", "total": 3,
     "avgPrice": None, "trades": 1},
    {"AGG_TIMESTAMP": DAY2, "AGG_TIME": "2024-01-02T00:00:00.000+00:00", "symbol": "IBM", "total": 1,
     "avgPrice": 30.0, "trades": 1},
]
ARROW_TYPES = {"AGG_TIMESTAMP": pa.int64(), "AGG_TIME": pa.timestamp("ms", tz="UTC"), "symbol": pa.string(),
               "total": pa.int64(), "avgPrice": pa.float64(), "trades": pa.int64()}


def _inbox(tmp_path: Path) -> Path:
    inbox = tmp_path / "in"
    inbox.mkdir()
    (inbox / "trades.jsonl").write_text("\n".join(EVENTS) + "\n", encoding="utf-8")
    return inbox


def _parquet_rows(data: bytes) -> list[dict[str, object]]:
    """Parquet's rows with the types checked and its timestamps as JSON's text, to compare with ROWS."""
    table = pq.read_table(io.BytesIO(data))
    assert {f.name: f.type for f in table.schema} == ARROW_TYPES
    assert table.column("total").null_count == 1 and table.column("avgPrice").null_count == 1
    rows = table.to_pylist()
    for row in rows:
        when = row["AGG_TIME"]
        assert int(when.timestamp() * 1000) == row["AGG_TIMESTAMP"]
        row["AGG_TIME"] = when.isoformat(timespec="milliseconds")
    return rows


@pytest.mark.slow
@pytest.mark.parametrize("kind", STORES)
def test_every_format_tells_the_same_answer(spark: object, tmp_path: Path, kind: str) -> None:
    data = tmp_path / "data"
    with store_url(kind) as url:
        run(spark, APP, {"TradeStream": _inbox(tmp_path)}, data, store=url)
        text, env = app_with_store(APP, url)
        app_file = tmp_path / "app.siddhi"
        app_file.write_text(text, encoding="utf-8")

        def query(*options: str) -> tuple[str, bytes, str]:
            result = runner.invoke(app, ["query", str(app_file), QUERY, "-d", str(data), *options], env=env)
            assert result.exit_code == 0, result.output
            return result.stdout, result.stdout_bytes, result.stderr

        as_json, _, _ = query("--format", "json")
        as_jsonl, _, _ = query("--format", "jsonl")
        as_csv, _, _ = query("--format", "csv")
        _, as_parquet, _ = query("--format", "parquet")
        as_table, _, table_note = query()
        files = {fmt: tmp_path / f"answer.{fmt}" for fmt in ("json", "jsonl", "csv", "parquet")}
        for fmt, path in files.items():
            out, _, note = query("--format", fmt, "--output", str(path))
            assert out == "" and f"4 rows written to {path}" in note

    assert json.loads(as_json) == ROWS
    lines = as_jsonl.splitlines()
    assert as_jsonl.endswith("\n") and len(lines) == len(ROWS)
    assert [json.loads(line) for line in lines] == ROWS  # one object per line, json's values
    assert '"total":null' in lines[1] and '"avgPrice":null' in lines[2]
    records = list(csv.DictReader(io.StringIO(as_csv)))
    assert records == [{k: "" if v is None else str(v) for k, v in row.items()} for row in ROWS]
    assert _parquet_rows(as_parquet) == ROWS
    assert files["json"].read_text(encoding="utf-8") == as_json
    assert files["jsonl"].read_text(encoding="utf-8") == as_jsonl
    assert files["csv"].read_text(encoding="utf-8") == as_csv
    assert _parquet_rows(files["parquet"].read_bytes()) == ROWS
    for row in ROWS:
        assert row["symbol"] in as_table and str(row["trades"]) in as_table
    assert "<NA>" not in as_table and "nan" not in as_table.lower()
    assert "4 rows" in table_note


@pytest.mark.slow
def test_inspect_one_aggregation_piped(spark: object, tmp_path: Path) -> None:
    two = APP + """
define aggregation DailyTrades
from TradeStream
select symbol, sum(quantity) as total, count() as trades
group by symbol
aggregate by timestamp every day;
"""
    data = tmp_path / "data"
    run(spark, two, {"TradeStream": _inbox(tmp_path)}, data)
    app_file = tmp_path / "app.siddhi"
    app_file.write_text(two, encoding="utf-8")
    base = ["inspect", str(app_file), "-d", str(data)]

    result = runner.invoke(app, [*base, "--aggregation", "DailyTrades", "--format", "json"])
    assert result.exit_code == 0, result.output
    (info,) = json.loads(result.stdout)
    assert info["name"] == "DailyTrades" and [t["granularity"] for t in info["tables"]] == ["days"]
    assert info["events_read"] == len(EVENTS)

    result = runner.invoke(app, [*base, "-a", "TradeAggregation"], env={"COLUMNS": None})
    assert result.exit_code == 0, result.output
    assert "TradeAggregation_SECONDS" in result.stdout and "DailyTrades" not in result.stdout
    assert max(len(line) for line in result.stdout.splitlines()) == 100  # piped: 100 columns
    narrow = runner.invoke(app, base, env={"COLUMNS": "72"})
    assert narrow.exit_code == 0, narrow.output
    assert "DailyTrades_DAYS" in narrow.stdout and "TradeAggregation_DAYS" in narrow.stdout
    assert max(len(line) for line in narrow.stdout.splitlines()) <= 72

    wrong = runner.invoke(app, [*base, "-a", "DailyTrade"])
    assert wrong.exit_code == 2
    assert wrong.stderr.startswith("error (usage error): --aggregation: unknown aggregation 'DailyTrade' — did "
                                   "you mean 'DailyTrades'? (expected one of: DailyTrades, TradeAggregation)")


@pytest.fixture
def app_file(tmp_path: Path) -> Path:
    path = tmp_path / "trades.siddhi"
    path.write_text(APP, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--format", "xml"], "--format: unknown format 'xml' (expected one of: csv, json, jsonl, parquet, table)"),
        (["--output", "{tmp}/a.txt"], "--output {tmp}/a.txt: give --format csv, json, jsonl or parquet"),
        (["--format", "jsonl", "-o", "{tmp}"], "--output {tmp} is a directory; give a file name"),
        (["--format", "parquet", "-o", "{tmp}/no/a.parquet"], "--output {tmp}/no/a.parquet: folder '{tmp}/no' does "
         "not exist"),
    ],
)
def test_where_an_answer_cannot_go(app_file: Path, tmp_path: Path, options: list[str], message: str) -> None:
    args = [o.format(tmp=tmp_path) for o in options]
    result = runner.invoke(app, ["query", str(app_file), QUERY, "-d", str(tmp_path / "data"), *args])
    assert result.exit_code == 2
    assert result.stderr.startswith(f"error (usage error): {message.format(tmp=tmp_path)}"), result.stderr
    assert not (tmp_path / "data").exists()  # refused before the store is opened


def test_parquet_is_not_written_to_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    from tiltframe.errors import UsageError

    monkeypatch.setattr(querying.sys, "stdout", Terminal())
    with pytest.raises(UsageError, match="--format parquet writes binary: give --output FILE"):
        querying.check_output("parquet", None)
    querying.check_output("jsonl", None)  # text may go to a terminal
    querying.check_output("parquet", Path("answer.parquet"))
