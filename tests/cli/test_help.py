"""Every command's help, at a fixed width of 100 columns: flags without a value column (no ``<bool>``), help
texts reflowed from their docstrings (no line broken where the next word would have fit), paragraphs kept,
every option listed, and the global options in each command's help.  Assertions are on content, not on a
snapshot, so that they hold across rich's and typer's minor versions."""

from __future__ import annotations

import itertools
import re

import pytest
import typer
from typer.testing import CliRunner

from tiltframe.cli import logs
from tiltframe.cli.commands import app
from tiltframe.cli.group import GLOBAL_PANEL, reflow

runner = CliRunner()
WIDTH = 100
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
GROUP = typer.main.get_command(app)
COMMANDS = sorted(GROUP.commands)  # type: ignore[attr-defined]


def help_of(*command: str) -> str:
    result = runner.invoke(app, [*command, "--help"], env={"COLUMNS": str(WIDTH), "TERMINAL_WIDTH": None})
    assert result.exit_code == 0, result.output
    return ANSI.sub("", result.stdout)


def words(text: str) -> str:
    """The help without its panels' borders, whitespace collapsed: what a reader reads."""
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", text).split())


def description(text: str) -> list[list[str]]:
    """The paragraphs between the usage line and the first panel, each as its lines."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith("Usage:")) + 1
    end = next(i for i, line in enumerate(lines) if line.lstrip().startswith("╭"))
    paragraphs: list[list[str]] = [[]]
    for line in lines[start:end]:
        if line.strip():
            paragraphs[-1].append(line.strip())
        elif paragraphs[-1]:
            paragraphs.append([])
    return [p for p in paragraphs if p]


def early_breaks(lines: list[str], width: int) -> list[tuple[str, str]]:
    """Consecutive lines of one paragraph where the second's first word would have fit on the first: a line
    break that came from the docstring, not from wrapping."""
    return [(a, b) for a, b in itertools.pairwise(lines) if len(a) + 1 + len(b.split()[0]) <= width]


def commands_panel(text: str) -> dict[str, list[str]]:
    """The group's Commands panel: each command's help as the lines of its cell."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if "Commands" in line and line.lstrip().startswith("╭"))
    rows: dict[str, list[str]] = {}
    column = None
    for line in lines[start + 1:]:
        if line.lstrip().startswith("╰"):
            break
        inner = line.strip().strip("│")
        if column is None:
            column = len(re.match(r"\s*\S+\s+", inner).group(0))  # type: ignore[union-attr]
        name, cell = inner[:column].strip(), inner[column:].strip()
        if name:
            rows[name] = [cell]
        else:
            rows[list(rows)[-1]].append(cell)
    return rows


@pytest.mark.parametrize("command", [[], *([c] for c in COMMANDS)], ids=["tiltframe", *COMMANDS])
def test_help_lists_every_option_and_no_bool(command: list[str]) -> None:
    text = help_of(*command)
    assert "<bool>" not in text
    assert "Usage:" in text
    read = words(text)
    cmd = GROUP.commands[command[0]] if command else GROUP  # type: ignore[attr-defined]
    ctx = cmd.make_context("tiltframe", ["--help"], resilient_parsing=True)
    for param in cmd.get_params(ctx):
        if param.param_type_name != "option" or param.hidden:
            continue
        long = [o for o in param.opts if o.startswith("--")]
        short = [o for o in param.opts if not o.startswith("--")]
        assert long[0] in read, (command, param.name)
        if param.is_flag:  # the option's names, then its help at once: no value column between them
            first = " ".join((param.help or "").split()[:3])
            assert " ".join([*long, *short, first]) in read, (command, param.name)
        elif param.metavar:
            assert f"{long[0]} {' '.join(short)} {param.metavar}".replace("  ", " ") in read, (command, param.name)


@pytest.mark.parametrize("command", COMMANDS)
def test_each_command_lists_the_global_options(command: str) -> None:
    text = help_of(command)
    assert GLOBAL_PANEL in text
    read = words(text[text.index(GLOBAL_PANEL):])
    assert "--debug Log tiltframe's DEBUG lines" in read
    assert "--verbose -v Log what tiltframe does" in read
    assert "--log-format text|json" in read


@pytest.mark.parametrize("command", [[], *([c] for c in COMMANDS)], ids=["tiltframe", *COMMANDS])
def test_help_text_is_reflowed_in_paragraphs(command: list[str]) -> None:
    text = help_of(*command)
    paragraphs = description(text)
    cmd = GROUP.commands[command[0]] if command else GROUP  # type: ignore[attr-defined]
    expected = (reflow(cmd.help) or "").split("\n\n")
    assert len(paragraphs) == len(expected), paragraphs
    for lines, want in zip(paragraphs, expected, strict=True):
        assert " ".join(lines) == " ".join(want.split())  # the whole paragraph, nothing lost or added
        assert not early_breaks(lines, WIDTH - 2), lines


def test_the_commands_panel_reflows_each_first_paragraph() -> None:
    rows = commands_panel(help_of())
    assert sorted(rows) == COMMANDS
    width = max(len(cell) for cells in rows.values() for cell in cells)
    for name, cells in rows.items():
        assert not early_breaks(cells, width), (name, cells)
    assert " ".join(rows["run"]).endswith("(everything available, or --follow until Ctrl-C).")


def test_reflow() -> None:
    assert reflow("One line\n    and its rest.\n\n    A second\n    paragraph.\n") == (
        "One line and its rest.\n\nA second paragraph.")
    kept = "First.\n\n\b\nkept  as\nwritten"
    assert reflow(kept) == kept
    assert reflow("Shown\n  text.\fhidden\n  text") == "Shown text.\fhidden\n  text"
    assert reflow(None) is None


@pytest.mark.parametrize("where", ["before", "after"])
def test_global_options_before_or_after_the_command(where: str, tmp_path: object) -> None:
    from pathlib import Path

    app_file = Path(str(tmp_path)) / "a.siddhi"
    app_file.write_text("define stream S (x long);\n", encoding="utf-8")
    options = ["-v", "--log-format", "json"]
    args = [*options, "validate", str(app_file)] if where == "before" else ["validate", str(app_file), *options]
    try:
        result = runner.invoke(app, args)
        assert result.exit_code == 0, result.output
        assert (logs.settings.verbose, logs.settings.json, logs.settings.debug) == (True, True, False)
        result = runner.invoke(app, ["--debug", "validate", str(app_file), "--verbose"])
        assert result.exit_code == 0, result.output
        assert (logs.settings.verbose, logs.settings.json, logs.settings.debug) == (True, False, True)
    finally:
        logs.configure(debug=False, verbose=False)


def test_an_unknown_log_format_after_the_command() -> None:
    result = runner.invoke(app, ["validate", "x.siddhi", "--log-format", "xml"])
    assert result.exit_code == 2
    assert "unknown log format 'xml' (expected one of: json, text)" in result.stderr
    assert "--log-format" in result.stderr
