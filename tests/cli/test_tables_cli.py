"""A pre-aggregated table from the command line: insert (with and without pre-aggregation), SELECT,
compact, and clear errors for bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tiltframe.cli.commands import app

runner = CliRunner()
APP = """@preaggregate(workers='2')
define table AdImpressions (time long, site string, clicked int)
    preaggregate by time every min
    dimensions site
    measures count() as impressions, sum(clicked) as clicks;
define table Clicks (time long, site string);
"""
T0 = 1_704_067_200_000
ROWS = [{"time": T0 + i * 7_000, "site": "a" if i % 3 else "b", "clicked": i % 2} for i in range(30)]


@pytest.mark.slow
def test_insert_select_compact(spark: object, tmp_path: Path) -> None:
    app_file, data = tmp_path / "ads.siddhi", str(tmp_path / "data")
    app_file.write_text(APP)
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    first.write_text("".join(json.dumps(r) + "\n" for r in ROWS[:20]) + '{"time": "soon", "site": "a"}\n')
    second.write_text("".join(json.dumps(r) + "\n" for r in ROWS[20:]))
    result = runner.invoke(app, ["insert", str(app_file), "AdImpressions", str(first), "--data-dir", data])
    assert result.exit_code == 0, result.output
    assert "21 rows read, 20 inserted, 1 rejected" in result.stdout
    result = runner.invoke(app, ["insert", str(app_file), "AdImpressions", str(second), "--data-dir", data,
                                 "--no-preaggregation"])
    assert result.exit_code == 0, result.output

    def select(text: str) -> list[dict]:
        out = runner.invoke(app, ["query", str(app_file), text, "--format", "json", "--data-dir", data])
        assert out.exit_code == 0, out.output
        return json.loads(out.stdout)

    per_site = "SELECT site, impressions, clicks FROM AdImpressions GROUP BY site ORDER BY site"
    want = [{"site": s, "impressions": sum(r["site"] == s for r in ROWS),
             "clicks": sum(r["clicked"] for r in ROWS if r["site"] == s)} for s in ("a", "b")]
    assert select(per_site) == want
    result = runner.invoke(app, ["compact", str(app_file), "--data-dir", data])
    assert result.exit_code == 0 and "partial rows merged away" in result.stdout
    assert select(per_site) == want
    assert all(r["SHARD_ID"] in ("*", "0", "1") or r["SHARD_ID"].startswith("row-")
               for r in select("SELECT * FROM partials(AdImpressions)"))

    bad = runner.invoke(app, ["query", str(app_file), "SELECT site, clicked FROM AdImpressions", "--data-dir", data])
    assert bad.exit_code == 2 and "line 1" in bad.output
    missing = runner.invoke(app, ["insert", str(app_file), "Nope", str(first), "--data-dir", data])
    assert missing.exit_code == 2 and "unknown table 'Nope' (expected one of: AdImpressions, Clicks)" in missing.output
    raw = runner.invoke(app, ["compact", str(app_file), "--table", "Clicks", "--data-dir", data])
    assert raw.exit_code == 2 and "table Clicks has no preaggregate clause" in raw.output

    # A changed definition: migrate applies it and says what changed; the answers that remain stay.
    app_file.write_text(APP.replace("sum(clicked) as clicks", "max(clicked) as clicked"))
    result = runner.invoke(app, ["migrate", str(app_file), "--data-dir", data])
    assert result.exit_code == 0, result.output
    assert "AdImpressions: changed - measure clicks removed - measure clicked added: intervals stored before hold no " \
        "value" in " ".join(result.stdout.split())
    assert "Clicks" not in result.stdout  # a raw table has nothing stored to migrate
    assert select("SELECT site, impressions FROM AdImpressions GROUP BY site ORDER BY site") == [
        {"site": w["site"], "impressions": w["impressions"]} for w in want]
    again = runner.invoke(app, ["migrate", str(app_file), "--data-dir", data])
    assert again.exit_code == 0 and "AdImpressions: up to date" in again.stdout
