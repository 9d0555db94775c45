"""tiltframe run over real folders as exports fill them: monthly files of pandas' to_csv, compressed and
plain, a damaged archive among them, blank lines; then the folder moved.  The run's summary, inspect and
query agree with pandas over the files' rows."""

from __future__ import annotations

import bz2
import gzip
import json
import random
import re
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from tests.bad_input.harness import T0, TOTALS_APP
from tiltframe.cli.commands import app

pytestmark = pytest.mark.slow
runner = CliRunner()

DAY = 'from A within "2024-01-05", "2024-01-06" per "days" select k, total, events'


def month(seed: int, n: int) -> pd.DataFrame:
    rng = random.Random(seed)
    return pd.DataFrame({"k": [rng.choice("abc") for _ in range(n)], "v": [rng.randrange(0, 400) / 4 for _ in range(n)],
                         "ts": [T0 + rng.randrange(0, 86_400_000) for _ in range(n)]})


def summary(output: str, line: str) -> int:
    found = re.search(rf"^ *{line} +(\d+)", output, re.MULTILINE)
    assert found, output
    return int(found.group(1))


def by_key(frames: list[pd.DataFrame]) -> dict[str, list]:
    got = pd.concat(frames).groupby("k").agg(total=("v", "sum"), events=("v", "size"))
    return {k: [float(r.total), int(r.events)] for k, r in got.iterrows()}


def test_compressed_exports_then_a_moved_folder(spark: object, tmp_path: Path) -> None:
    app_file = tmp_path / "app.siddhi"
    app_file.write_text(TOTALS_APP)
    landing = tmp_path / "landing"
    landing.mkdir()
    months = [month(i, 20 + i) for i in range(4)]
    months[0].to_csv(landing / "2024-01.csv.gz", index=False, compression="gzip")
    months[1].to_csv(landing / "2024-02.csv.bz2", index=False, compression="bz2")
    text = months[2].to_csv(index=False)
    (landing / "2024-03.csv").write_text(text.replace("\n", "\n\n", 3) + "   \n")  # blank lines
    whole = gzip.compress(month(9, 5000).to_csv(index=False).encode())
    (landing / "2024-04.csv.gz").write_bytes(whole[: len(whole) // 2])  # cut in half
    (landing / "notes.csv.bz2").write_bytes(b"not bzip2 at all\n")
    data = str(tmp_path / "data")

    result = runner.invoke(app, ["run", str(app_file), "-i", f"S={landing}", "-d", data])
    assert result.exit_code == 0, result.output
    read = sum(len(m) for m in months[:3])
    assert summary(result.stdout, "events read") == read
    assert summary(result.stdout, "events rejected") == 0
    assert summary(result.stdout, "files that cannot be read") == 2

    result = runner.invoke(app, ["inspect", str(app_file), "--format", "json", "-d", data])
    (info,) = json.loads(result.stdout)
    assert info["events_read"] == read
    assert dict(map(tuple, info["recorded_by_kind"]))["file"] == 2
    result = runner.invoke(app, ["query", str(app_file), DAY, "--format", "json", "-d", data])
    assert {r["k"]: [r["total"], r["events"]] for r in json.loads(result.stdout)} == by_key(months[:3])

    # The folder moved, the next month's export beside the others: read alone.
    moved = tmp_path / "landing2"
    landing.rename(moved)
    (moved / "2024-05.jsonl.gz").write_bytes(b"")  # another format: not this folder's, never read
    months[3].to_csv(moved / "2024-05.csv.gz", index=False, compression="gzip")
    result = runner.invoke(app, ["run", str(app_file), "-i", f"S={moved}", "--input-format", "S=csv", "-d", data])
    assert result.exit_code == 0, result.output
    assert summary(result.stdout, "events read") == len(months[3])
    result = runner.invoke(app, ["query", str(app_file), DAY, "--format", "json", "-d", data])
    assert {r["k"]: [r["total"], r["events"]] for r in json.loads(result.stdout)} == by_key(months)

    # Another folder whose file of a name read holds other rows: one line, exit 2, nothing read.
    other = tmp_path / "other"
    other.mkdir()
    month(77, 3).to_csv(other / "2024-03.csv", index=False)
    result = runner.invoke(app, ["run", str(app_file), "-i", f"S={other}", "-d", data])
    assert result.exit_code == 2, result.output
    line = result.output.strip()
    assert "\n" not in line and str(other) in line and str(moved) in line and "2024-03.csv" in line
    result = runner.invoke(app, ["query", str(app_file), DAY, "--format", "json", "-d", data])
    assert {r["k"]: [r["total"], r["events"]] for r in json.loads(result.stdout)} == by_key(months)


def test_bz2_json_lines_folder_tells_its_format(spark: object, tmp_path: Path) -> None:
    """A folder of .jsonl.bz2 files alone is read as JSON Lines without --input-format."""
    app_file = tmp_path / "app.siddhi"
    app_file.write_text(TOTALS_APP)
    inbox = tmp_path / "in"
    inbox.mkdir()
    df = month(5, 12)
    (inbox / "events.jsonl.bz2").write_bytes(bz2.compress(df.to_json(orient="records", lines=True).encode()))
    data = str(tmp_path / "data")
    result = runner.invoke(app, ["run", str(app_file), "-i", f"S={inbox}", "-d", data])
    assert result.exit_code == 0, result.output
    assert summary(result.stdout, "events read") == 12
