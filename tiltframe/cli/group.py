"""The command group: how the help reads, the global options after the command too, usage errors in one line.

- Help texts are docstrings: each paragraph is reflowed (its line breaks become spaces), paragraphs
  (blank lines) stay paragraphs, and a paragraph that starts with ``\\b`` is kept as written (click's mark).
- Flags take no value, so the help shows none beside them.  Typer's rich help prints every parameter's
  type in a column (``<bool>`` for a flag) unless it has a metavar; a flag gets an empty one.
- The group's options ``--debug``, ``-v/--verbose`` and ``--log-format`` may also follow the command
  (``tiltframe query APP -v ...``): each command gets a copy of the group's own option (one definition,
  in ``tiltframe.cli.commands``'s callback), listed under "Global options" in its help; given there, it applies
  on top of what came before the command.
"""

from __future__ import annotations

import copy
import inspect
import sys
from collections.abc import Iterable, Sequence
from typing import Any

import typer
from typer.core import TyperGroup, TyperOption

try:  # typer vendors click since 0.20; before, it used the click package
    from typer import _click as click
except ImportError:  # pragma: no cover - older typer
    import click  # type: ignore[no-redef]

from tiltframe.cli import logs
from tiltframe.cli.failing import EXIT_OK, EXIT_RUNTIME, say
from tiltframe.cli.output import stderr_console
from tiltframe.errors import unknown

#: The group's options that each command takes too (parameter names of the group's callback).
GLOBAL_OPTIONS = ("debug", "verbose", "log_format")
GLOBAL_PANEL = "Global options"


def reflow(text: str | None) -> str | None:
    """A docstring as help text: each paragraph on one line, blank lines between paragraphs kept; a
    paragraph starting with ``\\b`` as written; anything after ``\\f`` (click's cut) left as it is."""
    if not text:
        return text
    shown, cut, rest = text.partition("\f")
    paragraphs = inspect.cleandoc(shown).split("\n\n")
    flowed = [p if p.lstrip("\n").startswith("\b") else " ".join(p.split()) for p in paragraphs]
    return "\n\n".join(p for p in flowed if p) + cut + rest


def plain_flags(params: Iterable[click.Parameter]) -> None:
    """Flags shown without a value: an empty metavar (typer's rich help shows a type beside every
    parameter without one; a flag's would read ``<bool>``).  Error messages name options by their
    ``--name``, never by the metavar."""
    for param in params:
        if isinstance(param, TyperOption) and param.is_flag and param.metavar is None:
            param.metavar = ""


def configure_logging(debug: bool, verbose: bool, log_format: str) -> None:
    """Apply the global options (a usage error for an unknown log format)."""
    if log_format not in logs.FORMATS:
        raise typer.BadParameter(unknown("log format", log_format, logs.FORMATS), param_hint="'--log-format'")
    logs.configure(debug=debug, verbose=verbose, log_format=log_format)


def _after_command(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """A global option given after the command: on top of the options given before it."""
    if param.name is None or ctx.get_parameter_source(param.name) in (None, click.core.ParameterSource.DEFAULT):
        return value
    given: dict[str, Any] = {"debug": logs.settings.debug, "verbose": logs.settings.verbose,
                             "log_format": "json" if logs.settings.json else "text"}
    given[param.name] = value
    configure_logging(**given)
    return value


def _share(option: click.Parameter) -> click.Parameter:
    """A command's copy of a global option: not passed to the command's function, applied on parsing."""
    shared = copy.copy(option)
    shared.expose_value = False
    shared.callback = _after_command
    shared.rich_help_panel = GLOBAL_PANEL  # type: ignore[attr-defined]
    return shared


class TiltframeGroup(TyperGroup):
    """The command group: reflowed help, plain flags, global options after the command too, and click's
    usage errors in one line."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self.help = reflow(self.help)
        shared = [p for p in self.params if p.name in GLOBAL_OPTIONS]
        for command in self.commands.values():
            command.help = reflow(command.help)
            taken = {name for p in command.params for name in (p.name, *p.opts, *p.secondary_opts)}
            for option in shared:
                clash = taken & {option.name, *option.opts}
                if clash:
                    msg = f"command {command.name} has its own {', '.join(sorted(map(str, clash)))}"
                    raise RuntimeError(msg)
                command.params.append(_share(option))

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        params = super().get_params(ctx)
        plain_flags(params)
        return params

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        if command is not None:
            plain_flags(command.get_params(ctx))  # its help option included (made on first use)
        return command

    def main(  # type: ignore[override]
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        try:
            code = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click.exceptions.ClickException as exc:
            if not standalone_mode:
                raise
            if type(exc).__name__ == "NoArgsIsHelpError":  # the help was printed already
                sys.exit(exc.exit_code)
            ctx = getattr(exc, "ctx", None)
            where = f" (see: {ctx.command_path} --help)" if ctx is not None else ""
            say("usage error", f"{exc.format_message()}{where}")
            sys.exit(exc.exit_code)
        except typer.Abort:
            if not standalone_mode:
                raise
            stderr_console().print("aborted")
            sys.exit(EXIT_RUNTIME)
        if not standalone_mode:
            return code
        sys.exit(code if isinstance(code, int) else EXIT_OK)
