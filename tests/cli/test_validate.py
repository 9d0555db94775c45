"""``tiltframe validate``: every kind of definition listed, as text and as one JSON document with stable
keys; continuous queries by their ``@info`` name, else ``continuous<i>``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tiltframe.cli.commands import app

runner = CliRunner()

APP = """\
@app:name('Mixed')
@eventTime('ts') define stream device_utils (device string, cpu_usage double, ts long);
define stream Req (device string);

from device_utils[cpu_usage > 50.0] select device, cpu_usage, ts insert into HotUtils;

define aggregation CpuAgg
from device_utils
select device, max(cpu_usage) as peak
group by device
aggregate by ts every sec ... hour;

@info(name='peaks')
from Req as r join CpuAgg as a on r.device == a.device
within "2024-01-** **:**:**" per "hours"
select a.device, a.peak
insert into PeakOut;

@info(name='max_cpu')
SELECT device, max(cpu_usage) AS top FROM tumble(device_utils, 5s) GROUP BY device, window_end;

SELECT count() AS n FROM device_utils EMIT PERIODIC 3s;

@preaggregate(workers='2')
define table AdImpressions (time long, site string, clicked int)
    preaggregate by time every min
    dimensions site
    measures count() as impressions, sum(clicked) as clicks;
define table Clicks (time long, site string);
"""


@pytest.fixture
def app_file(tmp_path: Path) -> Path:
    path = tmp_path / "mixed.siddhi"
    path.write_text(APP, encoding="utf-8")
    return path


def test_the_json_document(app_file: Path) -> None:
    result = runner.invoke(app, ["validate", str(app_file), "--format", "json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert list(doc) == ["app", "name", "valid", "streams", "aggregations", "queries", "continuous", "tables"]
    assert (doc["app"], doc["name"], doc["valid"]) == (str(app_file), "Mixed", True)
    streams = {s["name"]: s for s in doc["streams"]}
    assert set(streams) == {"device_utils", "Req", "HotUtils", "AdImpressions_ROWS"}
    assert streams["device_utils"]["attributes"] == [
        {"name": "device", "type": "string"}, {"name": "cpu_usage", "type": "double"}, {"name": "ts", "type": "long"}]
    assert (streams["device_utils"]["from"], streams["device_utils"]["where"]) == (None, None)
    assert streams["HotUtils"]["from"] == "device_utils" and "cpu_usage > 50.0" in streams["HotUtils"]["where"]
    assert doc["aggregations"] == [
        {"name": "CpuAgg", "from": "device_utils", "group_by": ["device"], "time": "ts",
         "levels": [{"per": "seconds", "table": "CpuAgg_SECONDS"}, {"per": "minutes", "table": "CpuAgg_MINUTES"},
                    {"per": "hours", "table": "CpuAgg_HOURS"}],
         "table": None},
        {"name": "AdImpressions", "from": "AdImpressions_ROWS", "group_by": ["site"], "time": "time",
         "levels": [{"per": "minutes", "table": "AdImpressions_MINUTES"}], "table": "AdImpressions"},
    ]
    assert doc["queries"] == [
        {"index": 0, "name": "peaks", "from": "Req", "aggregation": "CpuAgg", "within": ["2024-01-** **:**:**"],
         "per": "hours", "insert_into": "PeakOut"}]
    assert doc["continuous"] == [
        {"name": "max_cpu", "source": "device_utils", "window": "tumble", "size_ms": 5_000, "slide_ms": None,
         "gap_ms": None, "group_by": ["device", "window_end"], "emit": "after window close",
         "columns": ["device", "top"]},
        {"name": "continuous1", "source": "device_utils", "window": "global", "size_ms": None, "slide_ms": None,
         "gap_ms": None, "group_by": [], "emit": "periodic", "columns": ["n"]},
    ]
    assert doc["tables"] == [
        {"name": "AdImpressions", "columns": [{"name": "time", "type": "long"}, {"name": "site", "type": "string"},
                                              {"name": "clicked", "type": "int"}],
         "time_column": "time", "preaggregated": True, "interval": "minutes", "dimensions": ["site"],
         "measures": ["count() as impressions", "sum(clicked) as clicks"], "workers": 2},
        {"name": "Clicks", "columns": [{"name": "time", "type": "long"}, {"name": "site", "type": "string"}],
         "time_column": None, "preaggregated": False, "interval": None, "dimensions": [], "measures": [],
         "workers": None},
    ]


def test_the_text_lists_the_same(app_file: Path) -> None:
    result = runner.invoke(app, ["validate", str(app_file)], env={"COLUMNS": "160"})
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert out.startswith(f"ok: {app_file}")
    for title in ("streams", "aggregations", "retrieval queries", "continuous queries", "tables"):
        assert f"\n{title}" in out, title
    for name in ("HotUtils", "CpuAgg_MINUTES", "AdImpressions_MINUTES", "peaks", "PeakOut", "max_cpu",
                 "continuous1", "after window close", "Clicks", "raw rows", "sum(clicked) as clicks"):
        assert name in out, name


def test_an_app_without_queries_or_tables_lists_no_such_table(tmp_path: Path) -> None:
    path = tmp_path / "plain.siddhi"
    path.write_text("define stream S (x long);\n", encoding="utf-8")
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 0, result.output
    titles = [line.strip() for line in result.stdout.splitlines() if line.strip().isalpha()]
    assert titles == ["streams", "aggregations"]
    doc = json.loads(runner.invoke(app, ["validate", str(path), "--format", "json"]).stdout)
    assert (doc["aggregations"], doc["queries"], doc["continuous"], doc["tables"]) == ([], [], [], [])


def test_an_invalid_app_gives_no_document(tmp_path: Path) -> None:
    path = tmp_path / "bad.siddhi"
    path.write_text("define stream S (x lng);\n", encoding="utf-8")
    result = runner.invoke(app, ["validate", str(path), "--format", "json"])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.startswith("error (invalid definition): ")


def test_an_unknown_format(app_file: Path) -> None:
    result = runner.invoke(app, ["validate", str(app_file), "--format", "yaml"])
    assert result.exit_code == 2
    assert "--format: unknown format 'yaml' (expected one of: json, text)" in result.stderr


# --- trickle queries ---------------------------------------------------------------------------------------

TRICKLE = """\
use std::time::nanos;
define window `15secs` from tumbling with interval = nanos::from_seconds(15) end;
define window by_two from tumbling with size = 2 end;
select {"n": aggr::stats::count(), "g": group[0], "p": aggr::stats::hdr(event.v, ["0.5"])}
from in[`15secs`, by_two] group by set(event.g) into out;
"""


def test_validate_lists_a_trickle_querys_windows_and_selects(tmp_path: Path) -> None:
    path = tmp_path / "metrics.trickle"
    path.write_text(TRICKLE, encoding="utf-8")
    result = runner.invoke(app, ["validate", str(path), "--format", "json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["language"] == "trickle" and doc["valid"] is True
    assert [(w["name"], w["interval_ns"], w["size"]) for w in doc["windows"]] == [
        ("15secs", 15_000_000_000, None), ("by_two", None, 2)]
    assert doc["selects"] == [{"index": 0, "from": "in", "windows": ["15secs", "by_two"], "into": "out",
                               "grouped": True, "aggregates": ["aggr::stats::count", "aggr::stats::hdr"]}]
    text = runner.invoke(app, ["validate", str(path)], env={"COLUMNS": "160"})
    assert text.exit_code == 0 and "interval 15_000_000_000 ns" in text.stdout and "size 2" in text.stdout


def test_an_invalid_trickle_query_says_where_and_exits_2(tmp_path: Path) -> None:
    path = tmp_path / "bad.trickle"
    path.write_text(TRICKLE.replace("by_two]", "by_tw]"), encoding="utf-8")
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 2
    assert "unknown window 'by_tw' — did you mean 'by_two'?" in result.stderr and "at line 4, column 1" in result.stderr


def test_lang_says_a_file_of_any_name_is_trickle(tmp_path: Path) -> None:
    path = tmp_path / "metrics.tremor"
    path.write_text(TRICKLE, encoding="utf-8")
    result = runner.invoke(app, ["validate", str(path), "--lang", "trickle", "--format", "json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["selects"][0]["into"] == "out"
    wrong = runner.invoke(app, ["validate", str(path), "--lang", "trikle"])
    assert wrong.exit_code == 2 and "unknown language 'trikle' — did you mean 'trickle'?" in wrong.stderr
    as_siddhi = runner.invoke(app, ["validate", str(path)])  # by its name: SiddhiQL, which it is not
    assert as_siddhi.exit_code == 2

