"""Bad input, kind by kind: misuse of the command line.

Each kind is one command as a new user might type it; the outcome is a usage error: exit code 2 and ONE
line on stderr, ``error (usage error): ...`` (or ``error (invalid definition): ...`` for a wrong query,
followed by the line it points into) that says what is wrong and where, never a Python traceback.  A
runtime failure (exit 1) is said in one line too (tests/cli/test_failures_said_once.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tiltframe import api
from tiltframe.aggregates.layout import AggregationLayout
from tiltframe.cli.commands import app
from tiltframe.store import connect_store

runner = CliRunner()

APP = """\
define stream TradeStream (symbol string, price double, quantity long, timestamp long);

define aggregation TradeAggregation
from TradeStream
select symbol, sum(quantity) as total
group by symbol
aggregate by timestamp every sec ... year;
"""

DAYS = 'from TradeAggregation within "2024-01-** **:**:**" per "days" select symbol, total'


@dataclass
class Files:
    """A workspace: the app, an input folder, a data directory holding an (empty) store, and odd files."""

    root: Path

    @property
    def app(self) -> str:
        return str(self.root / "app.siddhi")

    @property
    def inbox(self) -> str:
        return str(self.root / "in")

    @property
    def data(self) -> str:
        return str(self.root / "data")

    def path(self, name: str) -> str:
        return str(self.root / name)


@pytest.fixture
def files(tmp_path: Path) -> Files:
    (tmp_path / "app.siddhi").write_text(APP, encoding="utf-8")
    (tmp_path / "in").mkdir()
    (tmp_path / "a-folder.siddhi").mkdir()
    (tmp_path / "empty.siddhi").write_text("-- nothing yet\n", encoding="utf-8")
    (tmp_path / "latin1.siddhi").write_bytes(APP.replace("TradeStream (", "TradeStream /* prix \xe9 */ (", 1)
                                             .encode("latin-1"))
    (tmp_path / "plain-file").write_text("not a directory\n", encoding="utf-8")
    (tmp_path / "latin1.toml").write_bytes('shard_id = "m\xfcnchen"\n'.encode("latin-1"))
    spec = api.load_app(tmp_path / "app.siddhi")
    with connect_store(None, tmp_path / "data") as store:  # the tables, without a run: queries answer []
        store.ensure_schema(AggregationLayout.of(spec, "TradeAggregation"))
    return Files(tmp_path)


def within(bounds: str) -> str:
    return f'from TradeAggregation within {bounds} per "days" select symbol, total'


#: kind -> (the command, the exit code, what the first line of stderr says).
KINDS: dict[str, tuple[Callable[[Files], list[str]], int, str]] = {
    "app file missing": (
        lambda f: ["validate", f.path("nope.siddhi")], 2, "app file '{root}/nope.siddhi' does not exist"),
    "app file is a directory": (
        lambda f: ["run", f.path("a-folder.siddhi")], 2, "app file '{root}/a-folder.siddhi' is a directory"),
    "app file not UTF-8": (
        lambda f: ["query", f.path("latin1.siddhi"), DAYS, "-d", f.data], 2,
        "app file '{root}/latin1.siddhi' is not UTF-8 text (byte 0xe9 at offset 34, line 1)"),
    "app file defines nothing": (
        lambda f: ["validate", f.path("empty.siddhi")], 2, "app file '{root}/empty.siddhi' defines nothing"),
    "unknown command": (lambda f: ["querry", f.app, DAYS], 2, "No such command 'querry'"),
    "unknown option": (lambda f: ["run", f.app, "--inputs", "x"], 2, "No such option: --inputs"),
    "missing argument": (lambda f: ["query", f.app], 2, "Missing argument 'QUERY'"),
    "option value not a number": (
        lambda f: ["run", f.app, "--max-files-per-trigger", "ten"], 2, "Invalid value for '--max-files-per-trigger'"),
    "unknown --format": (
        lambda f: ["query", f.app, DAYS, "--format", "xml", "-d", f.data], 2,
        "--format: unknown format 'xml' (expected one of: csv, json, jsonl, parquet, table)"),
    "--input without =": (
        lambda f: ["run", f.app, "--input", f.inbox], 2, "--input '{root}/in': expected STREAM=VALUE"),
    "--input names an unknown stream": (
        lambda f: ["run", f.app, "--input", f"TradeStrem={f.inbox}", "-d", f.data], 2,
        "--input: unknown stream 'TradeStrem' — did you mean 'TradeStream'?"),
    "--input folder missing": (
        lambda f: ["run", f.app, "--input", f"TradeStream={f.path('no-such-dir')}", "-d", f.data], 2,
        "'{root}/no-such-dir' does not exist"),
    "--input is a file": (
        lambda f: ["run", f.app, "--input", f"TradeStream={f.path('plain-file')}", "-d", f.data], 2,
        "'{root}/plain-file' is not a directory"),
    "--input-format unknown": (
        lambda f: ["run", f.app, "--input", f"TradeStream={f.inbox}", "--input-format", "TradeStream=xml"], 2,
        "--input-format TradeStream: unknown format 'xml'"),
    "--output for an app without outputs": (
        lambda f: ["run", f.app, "--output", "Alerts=out"], 2, "--output Alerts: the app has no retrieval join"),
    "--data-dir is a file (query)": (
        lambda f: ["query", f.app, DAYS, "--data-dir", f.path("plain-file")], 2,
        "--data-dir '{root}/plain-file' is a file, not a directory"),
    "--data-dir is a file (purge)": (
        lambda f: ["purge", f.app, "--data-dir", f.path("plain-file")], 2,
        "--data-dir '{root}/plain-file' is a file, not a directory"),
    "--data-dir inside a file (run)": (
        lambda f: ["run", f.app, "--data-dir", f.path("plain-file/data")], 2,
        "--data-dir '{root}/plain-file/data' cannot be made: '{root}/plain-file' is a file, not a directory"),
    "--config missing": (
        lambda f: ["run", f.app, "--config", f.path("nope.toml")], 2, "config file {root}/nope.toml does not exist"),
    "--config not UTF-8": (
        lambda f: ["migrate", f.app, "--config", f.path("latin1.toml"), "-d", f.data], 2,
        "config file {root}/latin1.toml is not UTF-8 text (byte 0xfc at offset 13)"),
    "unknown aggregation": (
        lambda f: ["purge", f.app, "-a", "TradeAgg", "-d", f.data], 2, "unknown aggregation 'TradeAgg'"),
    "unknown table in an app without tables": (
        lambda f: ["compact", f.app, "--table", "Trades", "-d", f.data], 2,
        "unknown table 'Trades' (there is no table to choose from)"),
    "query syntax error": (
        lambda f: ["query", f.app, DAYS.replace("from", "form"), "-d", f.data], 2,
        "query: unexpected name 'form' at line 1, column 1"),
    "within beyond year 9999": (
        lambda f: ["query", f.app, within('"2024-01-01 00:00:00", "10000-01-01 00:00:00"'), "-d", f.data], 2,
        "got '10000-01-01 00:00:00' at line 1, column 53"),
    "within year 0": (
        lambda f: ["query", f.app, within('"0000-01-01 00:00:00", "2024-01-01 00:00:00"'), "-d", f.data], 2,
        "invalid timestamp '0000-01-01 00:00:00': year 0 is out of range at line 1, column 30"),
    "within month 13": (
        lambda f: ["query", f.app, within('"2024-13-** **:**:**"'), "-d", f.data], 2,
        "invalid within pattern '2024-13-** **:**:**': month must be in 1..12 at line 1, column 30"),
    "within February 30 (the end)": (
        lambda f: ["query", f.app, within('"2024-02-01 00:00:00", "2024-02-30 00:00:00"'), "-d", f.data], 2,
        "invalid timestamp '2024-02-30 00:00:00': day is out of range for month at line 1, column 53"),
    "within an offset past 24 hours": (
        lambda f: ["query", f.app, within('"2024-02-** **:**:** +99:00"'), "-d", f.data], 2,
        "the offset +99:00 is not one of -18:00 ... +18:00 at line 1, column 30"),
    "within an offset of 99 minutes": (
        lambda f: ["query", f.app, within('"2024-02-01 00:00:00 +05:99", "2024-03-01 00:00:00"'), "-d", f.data], 2,
        "invalid timestamp '2024-02-01 00:00:00 +05:99': the offset +05:99 is not one of -18:00 ... +18:00"),
}


@pytest.mark.parametrize("kind", list(KINDS))
def test_cli_misuse_is_one_clear_line(files: Files, kind: str) -> None:
    command, code, first_line = KINDS[kind]
    result = runner.invoke(app, command(files))
    assert result.exit_code == code, (kind, result.output)
    lines = result.stderr.splitlines()
    assert lines, kind
    assert lines[0].startswith(("error (usage error): ", "error (invalid definition): ")), lines[0]
    assert first_line.format(root=files.root) in lines[0], lines[0]
    assert "Traceback" not in result.output
    if not lines[0].startswith("error (invalid definition): "):  # a definition error shows its line after
        assert len(lines) == 1, result.stderr
    assert result.stdout == ""


def test_within_the_year_9999_is_answered(files: Files) -> None:
    """The last year of the calendar is a range like any other (it ends at 10000-01-01, in milliseconds)."""
    for pattern in ('"9999-**-** **:**:**"', '"9999-12-31 23:59:**"'):
        result = runner.invoke(app, ["query", files.app, within(pattern), "--format", "json", "-d", files.data])
        assert result.exit_code == 0, result.output
        assert result.stdout.strip() == "[]"


def test_verbose_after_the_command(files: Files) -> None:
    """``-v`` / ``--verbose`` / ``--debug`` work after the command too."""
    for flag in ("-v", "--verbose", "--debug"):
        result = runner.invoke(app, ["query", files.app, DAYS, "--format", "json", "-d", files.data, flag])
        assert result.exit_code == 0, (flag, result.output)
        assert result.stdout.strip() == "[]"
