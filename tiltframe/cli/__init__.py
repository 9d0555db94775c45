"""The ``tiltframe`` command line (Typer); see :mod:`tiltframe.cli.app`."""

from __future__ import annotations

from tiltframe.cli.app import app, main

__all__ = ["app", "main"]
