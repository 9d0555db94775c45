"""How the CLI fails: one line that says what went wrong, then the exit code.

Exit codes: 0 success, 1 runtime or data error, 2 usage error or invalid definition (click's own usage
errors included).  The first line on stderr is the cause (and where, when known); details follow it:
where Spark's log is, and the traceback with ``--debug`` only.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import typer
from typer.core import TyperGroup

try:  # typer vendors click since 0.20; before, it used the click package
    from typer import _click as click
except ImportError:  # pragma: no cover - older typer
    import click  # type: ignore[no-redef]

from tiltframe.cli.logs import settings
from tiltframe.cli.output import stderr_console
from tiltframe.errors import DefinitionError, TiltframeError, UsageError

EXIT_OK, EXIT_RUNTIME, EXIT_USAGE = 0, 1, 2

#: Global flags that may also come after the command (``tiltframe run app.siddhi -v``).
GLOBAL_FLAGS = ("-v", "--verbose", "--debug")


def _say(kind: str | None, message: str) -> None:
    err = stderr_console()
    err.print(f"[bold red]error[/]{f' ({kind})' if kind else ''}: ", end="")
    err.print(message, markup=False)


def _details(hint: str) -> None:
    if settings.debug:
        traceback.print_exc()
        return
    err = stderr_console()
    if settings.spark_log is not None:
        err.print(f"Spark's log: {settings.spark_log} ({hint})", style="dim", markup=False)
    else:
        err.print(f"({hint})", style="dim", markup=False)


def failure_line(exc: BaseException) -> str:
    """The one line a runtime failure is said in: a tiltframe error's first line, a Spark failure's root
    cause with the query and batch, or an unexpected exception's type and message."""
    from tiltframe.engine.failures import describe_failure

    return describe_failure(exc)


def _prefix(context: str | None, exc: BaseException) -> str:
    """``context: `` before a message, unless the message already names it."""
    return f"{context}: " if context and f"'{context}'" not in str(exc) else ""


@contextmanager
def handle_errors(context: str | None = None) -> Iterator[None]:
    """Turn exceptions into one line on stderr and the documented exit code (tracebacks with --debug)."""
    try:
        yield
    except typer.Exit:
        raise
    except KeyboardInterrupt:
        stderr_console().print("interrupted")
        raise typer.Exit(130) from None
    except (DefinitionError, UsageError) as exc:
        kind = "invalid definition" if isinstance(exc, DefinitionError) else "usage error"
        _say(kind, f"{_prefix(context, exc)}{exc}")  # a definition error's snippet follows its line on purpose
        if settings.debug:
            traceback.print_exc()
        raise typer.Exit(EXIT_USAGE) from None
    except Exception as exc:
        _say(None, f"{_prefix(context, exc)}{failure_line(exc)}")
        if isinstance(exc, TiltframeError) and "\n" in str(exc):  # the rest of a longer message, after it
            stderr_console().print(str(exc).split("\n", 1)[1], markup=False)
        if isinstance(exc, TiltframeError) and settings.spark_log is None:
            if settings.debug:
                traceback.print_exc()
        else:
            _details("--verbose shows Spark's log on the terminal, --debug the traceback")
        raise typer.Exit(EXIT_RUNTIME) from None


def hoist_global_flags(args: Sequence[str]) -> list[str]:
    """``-v`` / ``--verbose`` / ``--debug`` anywhere before ``--`` move in front of the command, where
    the group's options are parsed."""
    args = list(args)
    end = args.index("--") if "--" in args else len(args)
    flags = [a for a in args[:end] if a in GLOBAL_FLAGS]
    rest = [a for a in args[:end] if a not in GLOBAL_FLAGS]
    return [*flags, *rest, *args[end:]]


class TiltframeGroup(TyperGroup):
    """The command group: global flags after the command too, and click's usage errors in one line."""

    def main(  # type: ignore[override]
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        args = hoist_global_flags(sys.argv[1:] if args is None else args)
        try:
            code = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click.exceptions.ClickException as exc:
            if not standalone_mode:
                raise
            if type(exc).__name__ == "NoArgsIsHelpError":  # the help was printed already
                sys.exit(exc.exit_code)
            ctx = getattr(exc, "ctx", None)
            where = f" (see: {ctx.command_path} --help)" if ctx is not None else ""
            _say("usage error", f"{exc.format_message()}{where}")
            sys.exit(exc.exit_code)
        except typer.Abort:
            if not standalone_mode:
                raise
            stderr_console().print("aborted")
            sys.exit(EXIT_RUNTIME)
        if not standalone_mode:
            return code
        sys.exit(code if isinstance(code, int) else EXIT_OK)
