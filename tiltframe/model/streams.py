"""Streams: their attributes and types, annotations, and finding a definition by name."""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from tiltframe.errors import DefinitionError, unknown
from tiltframe.model.expressions import Pos


class _Named(Protocol):
    @property
    def name(self) -> str: ...


_N = TypeVar("_N", bound=_Named)


def find_named(kind: str, name: str, items: Iterable[_N], pos: Pos | None = None) -> _N:
    """The item called ``name``; else an error at ``pos`` with the closest name and every valid one."""
    candidates = tuple(items)
    for item in candidates:
        if item.name == name:
            return item
    raise DefinitionError.at(unknown(kind, name, [c.name for c in candidates]), pos)


class AttrType(enum.Enum):
    """Attribute types of SiddhiQL stream definitions."""

    STRING = "string"
    INT = "int"
    LONG = "long"
    FLOAT = "float"
    DOUBLE = "double"
    BOOL = "bool"
    #: Sketch states only; streams cannot declare it.
    BINARY = "binary"
    #: A list of values (``group_array``); streams cannot declare it.
    ARRAY = "array"

    @property
    def is_numeric(self) -> bool:
        return self in (AttrType.INT, AttrType.LONG, AttrType.FLOAT, AttrType.DOUBLE)

    @property
    def is_integral(self) -> bool:
        return self in (AttrType.INT, AttrType.LONG)

    @classmethod
    def named(cls, word: str, pos: Pos | None = None) -> AttrType:
        aliases = {"boolean": "bool", "integer": "int"}
        key = aliases.get(word.lower(), word.lower())
        declarable = [m for m in cls if m not in (cls.BINARY, cls.ARRAY)]
        for member in declarable:
            if member.value == key:
                return member
        raise DefinitionError.at(unknown("attribute type", word, [m.value for m in declarable]), pos)


@dataclass(frozen=True, slots=True)
class Annotation:
    """An annotation as written: ``@name(key='value', 'positional', ...)``.

    Kept on definitions for ``explain`` and for annotations tiltframe does not interpret itself.
    """

    name: str
    elements: tuple[tuple[str | None, str], ...] = ()
    pos: Pos | None = field(default=None, compare=False, repr=False)

    def get(self, key: str | None, default: str | None = None) -> str | None:
        for k, v in self.elements:
            if (k is None and key is None) or (k is not None and key is not None and k.lower() == key.lower()):
                return v
        return default


@dataclass(frozen=True, slots=True)
class Attribute:
    name: str
    type: AttrType
    pos: Pos | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class StreamDef:
    """``define stream Name (attr type, ...)``; ``event_time`` from ``@eventTime('ts')`` is the attribute
    continuous queries window by when their window call names none."""

    name: str
    attributes: tuple[Attribute, ...]
    annotations: tuple[Annotation, ...] = field(default=(), compare=False)
    event_time: str | None = None
    pos: Pos | None = field(default=None, compare=False, repr=False)

    def attribute(self, name: str, pos: Pos | None = None) -> Attribute:
        return find_named(f"attribute of stream {self.name}", name, self.attributes, pos)

    def has(self, name: str) -> bool:
        return any(a.name == name for a in self.attributes)


