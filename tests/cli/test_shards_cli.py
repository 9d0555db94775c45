"""A deployment that turns @PartitionById on: the run points to `tiltframe migrate`, which upgrades the
tables in place; the shard then keeps its id, and queries merge its rows with a second shard's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.cli.test_cli import APP, EVENTS
from tiltframe.cli.commands import app

runner = CliRunner()
QUERY = ('from TradeAggregation within "2023-01-01 00:00:00", "2025-01-01 00:00:00" per "years" '
         "select symbol, total, trades order by symbol")


@pytest.mark.slow
def test_migrate_then_two_shards(spark: object, tmp_path: Path) -> None:
    plain, sharded = tmp_path / "plain.siddhi", tmp_path / "sharded.siddhi"
    store = f"@store(type='rdbms', jdbc.url='jdbc:sqlite:{tmp_path / 'shared.db'}')\n"
    plain.write_text(APP.replace("define aggregation", store + "define aggregation"))
    sharded.write_text(APP.replace("define aggregation", store + "@PartitionById\ndefine aggregation"))
    first, second = tmp_path / "in1", tmp_path / "in2"
    for folder, lines in ((first, EVENTS[:2]), (second, EVENTS[2:4])):
        folder.mkdir()
        (folder / "trades.jsonl").write_text("\n".join(lines) + "\n")
    node_a, node_b = str(tmp_path / "node-a"), str(tmp_path / "node-b")

    def run(app_file: Path, inputs: Path, data: str, *options: str, env: dict[str, str] | None = None):
        return runner.invoke(app, ["run", str(app_file), "--input", f"TradeStream={inputs}", "--data-dir", data,
                                   *options], env=env)

    assert run(plain, first, node_a).exit_code == 0
    refused = run(sharded, first, node_a, "--shard-id", "a")
    assert refused.exit_code == 1  # a store error, found before Spark reads anything
    text = " ".join(refused.output.split())
    assert "created without a SHARD_ID column" in text and "tiltframe migrate APP --shard-id ID" in text

    migrated = runner.invoke(app, ["migrate", str(sharded), "--data-dir", node_a], env={"TILTFRAME_SHARD_ID": "a"})
    assert migrated.exit_code == 0, migrated.output
    assert "added SHARD_ID to TradeAggregation_SECONDS" in migrated.output
    again = runner.invoke(app, ["migrate", str(sharded), "--data-dir", node_a, "--shard-id", "a"])
    assert "TradeAggregation: up to date" in again.output

    # The migrated deployment keeps shard a: its checkpoint already holds the first input.
    moved = run(sharded, first, node_a, "--shard-id", "b")
    assert moved.exit_code == 2 and "has run as shard 'a'" in " ".join(moved.output.split())
    assert run(sharded, first, node_a, env={"TILTFRAME_SHARD_ID": "a"}).exit_code == 0
    config = tmp_path / "node-b.toml"
    config.write_text('shard_id = "b"\n')
    result = run(sharded, second, node_b, "--config", str(config))
    assert result.exit_code == 0, result.output

    result = runner.invoke(app, ["query", str(sharded), QUERY, "--format", "json", "--data-dir", node_b])
    assert json.loads(result.stdout) == [{"symbol": "IBM", "total": 13, "trades": 3},
                                         {"symbol": "WSO2", "total": 2, "trades": 1}]
    result = runner.invoke(app, ["inspect", str(sharded), "--data-dir", node_a])
    assert "shards: a, b (rows merged on read)" in result.stdout
