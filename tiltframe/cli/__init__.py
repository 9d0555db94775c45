"""The ``tiltframe`` command line (Typer); see :mod:`tiltframe.cli.commands`."""

from __future__ import annotations

from tiltframe.cli.commands import app, main

__all__ = ["app", "main"]
