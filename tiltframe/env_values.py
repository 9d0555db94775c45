"""Numbers, sizes, switches and choices read from ``TILTFRAME_*`` environment variables.

A value that is not what the variable takes is a :class:`UsageError` naming the variable, its value and
what it expects, raised where the value is first needed; never Python's bare ``ValueError``, nor a value
handed on to Spark or a JVM that fails later with a message naming neither, nor a misspelt switch
taken for its default. An unset or blank variable means its default.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

from tiltframe.errors import UsageError

T = TypeVar("T")
#: What Spark takes as a JVM memory size (``JavaUtils.byteStringAsBytes``): whole numbers, an optional unit.
_MEMORY = re.compile(r"\d+(?:b|k|kb|m|mb|g|gb|t|tb|p|pb)?", re.IGNORECASE)


def _read(name: str, default: T, parse: Callable[[str], T], valid: Callable[[T], object], expected: str) -> T:
    """``$name`` parsed and checked, ``default`` when unset or blank, else a usage error saying ``expected``."""
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        value: T | None = parse(text)
    except ValueError:
        value = None
    if value is None or not valid(value):
        raise UsageError(f"{name}={text!r}: expected {expected}")
    return value


def env_int(name: str, default: int, *, least: int = 0, expected: str) -> int:
    """``$name`` as a whole number of at least ``least``; ``expected`` says what it counts, for the error."""
    return _read(name, default, int, lambda value: value >= least, expected)


def env_seconds(name: str, default: float) -> float:
    """``$name`` as a duration in seconds: a finite number, zero or more."""
    return _read(name, default, float, lambda value: math.isfinite(value) and value >= 0,
                 "a number of seconds (0 or more)")


def env_memory(name: str, default: str) -> str:
    """``$name`` as a JVM memory size for Spark (``4g``, ``512m``, ``2048``: MiB without a unit)."""
    return _read(name, default, str, _MEMORY.fullmatch,
                 "a memory size such as 4g or 512m (whole numbers; k, m, g, t or p)")


def _one_of(name: str, default: T, spellings: Mapping[str, T], expected: str) -> T:
    """``$name`` as the value of its spelling in ``spellings`` (lower case keys; the variable in any case)."""
    return _read(name, default, lambda text: spellings.get(text.lower()), lambda value: value is not None, expected)


_SWITCH = {"1": True, "true": True, "yes": True, "on": True, "0": False, "false": False, "no": False, "off": False}


def env_switch(name: str, default: T) -> bool | T:
    """``$name`` as on (1, true, yes, on) or off (0, false, no, off), in any case; ``default`` when unset."""
    return _one_of(name, default, _SWITCH, "on or off (1, true, yes or on; 0, false, no or off)")


def env_choice(name: str, default: str | None, choices: Sequence[str]) -> str | None:
    """``$name`` as one of ``choices``, in any case (given back as ``choices`` spells it)."""
    return _one_of(name, default, {choice.lower(): choice for choice in choices}, f"one of {', '.join(choices)}")
