"""Numbers and sizes read from ``TILTFRAME_*`` environment variables.

A value that is not what the variable takes is a :class:`UsageError` naming the variable, its value and
what it expects, raised where the value is first needed; never Python's bare ``ValueError``, nor a value
handed on to Spark or a JVM that fails later with a message naming neither. An unset or blank variable
means its default.
"""

from __future__ import annotations

import math
import os
import re

from tiltframe.errors import UsageError

#: What Spark takes as a JVM memory size (``JavaUtils.byteStringAsBytes``): whole numbers, an optional unit.
_MEMORY = re.compile(r"\d+(?:b|k|kb|m|mb|g|gb|t|tb|p|pb)?", re.IGNORECASE)


def _text(name: str) -> str | None:
    text = os.environ.get(name, "").strip()
    return text or None


def _refused(name: str, text: str, expected: str) -> UsageError:
    return UsageError(f"{name}={text!r}: expected {expected}")


def env_int(name: str, default: int, *, least: int = 0, expected: str) -> int:
    """``$name`` as a whole number of at least ``least``; ``expected`` says what it counts, for the error."""
    text = _text(name)
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        raise _refused(name, text, expected) from None
    if value < least:
        raise _refused(name, text, expected)
    return value


def env_seconds(name: str, default: float) -> float:
    """``$name`` as a duration in seconds: a finite number, zero or more."""
    text = _text(name)
    if text is None:
        return default
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not math.isfinite(value) or value < 0:
        raise _refused(name, text, "a number of seconds (0 or more)")
    return value


def env_memory(name: str, default: str) -> str:
    """``$name`` as a JVM memory size for Spark (``4g``, ``512m``, ``2048``: MiB without a unit)."""
    text = _text(name)
    if text is None:
        return default
    if not _MEMORY.fullmatch(text):
        raise _refused(name, text, "a memory size such as 4g or 512m (whole numbers; k, m, g, t or p)")
    return text
