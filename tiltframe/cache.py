"""tiltframe's cache folder: what is costly to build and can be built again (the parsers' tables, the class
archive of Spark's JVM), kept between processes."""

from __future__ import annotations

import os


def cache_dir() -> str | None:
    """``$TILTFRAME_CACHE_DIR``, else ``$XDG_CACHE_HOME/tiltframe`` or ``~/.cache/tiltframe``, made for the
    current user only; ``None`` (no cache) where that folder cannot be made or written, or when
    ``TILTFRAME_CACHE_DIR`` is empty."""
    where = os.environ.get("TILTFRAME_CACHE_DIR")
    if where is None:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        where = os.path.join(base, "tiltframe")
    if not where:
        return None
    try:
        os.makedirs(where, mode=0o700, exist_ok=True)
    except OSError:
        return None
    if not os.access(where, os.W_OK | os.X_OK):
        return None
    return where
