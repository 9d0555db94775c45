"""How the CLI fails: one line that says what went wrong, then the exit code.

Exit codes: 0 success, 1 runtime or data error, 2 usage error or invalid definition (click's own usage
errors included, said by :mod:`tiltframe.cli.group`).  The first line on stderr is the cause (and where,
when known); details follow it: where Spark's log is, and the traceback with ``--debug`` only.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Iterator
from contextlib import contextmanager

import typer

from tiltframe.cli.logs import settings
from tiltframe.cli.output import stderr_console
from tiltframe.errors import DefinitionError, TiltframeError, UsageError
from tiltframe.store.credentials import mask_credentials

EXIT_OK, EXIT_RUNTIME, EXIT_USAGE = 0, 1, 2


def say(kind: str | None, message: str) -> None:
    """The failure line: ``error (kind): message`` on stderr, any credential in it masked (a store URL that
    has a password and another mistake is shown as it was written)."""
    err = stderr_console()
    err.print(f"[bold red]error[/]{f' ({kind})' if kind else ''}: ", end="")
    err.print(mask_credentials(message), markup=False)


def _traceback() -> None:
    """The exception's traceback on stderr (``--debug``), its credentials masked too."""
    sys.stderr.write(mask_credentials(traceback.format_exc()))


def _details(hint: str) -> None:
    if settings.debug:
        _traceback()
        return
    err = stderr_console()
    if settings.spark_log is not None:
        err.print(f"Spark's log: {settings.spark_log} ({hint})", style="dim", markup=False)
    else:
        err.print(f"({hint})", style="dim", markup=False)


def failure_line(exc: BaseException) -> str:
    """The one line a runtime failure is said in: a tiltframe error's first line, a Spark failure's root
    cause with the query and batch, or an unexpected exception's type and message."""
    from tiltframe.engine.spark.failures import describe_failure

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
        say(kind, f"{_prefix(context, exc)}{exc}")  # a definition error's snippet follows its line on purpose
        if settings.debug:
            _traceback()
        raise typer.Exit(EXIT_USAGE) from None
    except Exception as exc:
        say(None, f"{_prefix(context, exc)}{failure_line(exc)}")
        if isinstance(exc, TiltframeError) and "\n" in str(exc):  # the rest of a longer message, after it
            stderr_console().print(mask_credentials(str(exc).split("\n", 1)[1]), markup=False)
        if isinstance(exc, TiltframeError) and settings.spark_log is None:
            if settings.debug:
                _traceback()
        else:
            _details("--verbose shows Spark's log on the terminal, --debug the traceback")
        raise typer.Exit(EXIT_RUNTIME) from None
