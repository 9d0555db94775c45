"""``tiltframe inspect --format json`` on each store: the embedded SQLite file, PostgreSQL and MariaDB (whose
drivers give counts and sums as ``Decimal``).  Expected counts are worked out by hand from the events."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.bad_input.harness import run, store_url
from tests.servers import STORES, app_with_store
from tiltframe.cli.commands import app

runner = CliRunner()

APP = """\
define stream S (k string, v double, ts long);
define aggregation A from S
select k, sum(v) as total, count() as events
group by k
aggregate by ts every sec ... day;
"""
EVENTS = [  # 2024-01-01 00:00:00 GMT = 1704067200000; the last one is rejected (v is no number)
    '{"k": "a", "v": 1.5, "ts": 1704067200000}',
    '{"k": "a", "v": 2.5, "ts": 1704067201000}',
    '{"k": "b", "v": 4.0, "ts": 1704153600000}',
    '{"k": "b", "v": "four", "ts": 1704153601000}',
]


@pytest.mark.slow
@pytest.mark.parametrize("kind", STORES)
def test_inspect_json_on_every_store(spark: object, tmp_path: Path, kind: str) -> None:
    inbox = tmp_path / "in"
    inbox.mkdir()
    (inbox / "e.jsonl").write_text("\n".join(EVENTS) + "\n", encoding="utf-8")
    data = tmp_path / "data"
    with store_url(kind) as url:
        run(spark, APP, {"S": inbox}, data, store=url)
        text, env = app_with_store(APP, url)
        app_file = tmp_path / "app.siddhi"
        app_file.write_text(text, encoding="utf-8")
        result = runner.invoke(app, ["inspect", str(app_file), "--format", "json", "--data-dir", str(data)], env=env)
        tables = runner.invoke(app, ["inspect", str(app_file), "--data-dir", str(data)], env=env)
    assert result.exit_code == 0, result.output
    (info,) = json.loads(result.stdout)
    assert (info["events_read"], info["events_aggregated"], info["events_rejected"]) == (4, 3, 1)
    assert all(type(info[key]) is int for key in ("events_read", "events_aggregated", "events_rejected", "batches"))
    rows = {t["granularity"]: t["rows"] for t in info["tables"]}
    assert rows == {"seconds": 3, "minutes": 2, "hours": 2, "days": 2}  # a: two seconds of one minute
    assert [r["events"] for r in info["rejected_by_reason"]] == [1]
    assert info["min_event_time_gmt"] == "2024-01-01 00:00:00"
    assert info["max_event_time_gmt"] == "2024-01-02 00:00:00"
    assert len(info["latest_rejected"]) == 1 and "four" in info["latest_rejected"][0]["raw"]
    assert tables.exit_code == 0, tables.output
    assert "A_SECONDS" in tables.stdout and "2024-01-02 00:00:00" in tables.stdout
