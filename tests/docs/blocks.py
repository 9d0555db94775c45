"""The fenced code blocks of the docs, with the ``docs-test`` directive written before each, and the pieces
the docs test takes them apart into: SiddhiQL statements and shell commands.

Plain text in, plain data out: no tiltframe, no Spark (``test_examples.py`` says how each block is run).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: Every page the docs test reads: the README, then docs/ by name.
DOCS = ("README.md", *sorted(f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md")))

_OPEN = re.compile(r"^(?P<indent> *)(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`\s]*)")
_DIRECTIVE = re.compile(r"^\s*<!--\s*docs-test:\s*(?P<text>.*?)\s*-->\s*$")
_ANY_DIRECTIVE = re.compile(r"<!--\s*docs-test:")
_KIND = re.compile(r"^(?P<kind>[a-z-]+)(?:\s+(?P<args>[^(]*?))?\s*(?:\((?P<reason>.*)\))?\s*$")


@dataclass(frozen=True)
class Directive:
    """``<!-- docs-test: KIND [ARGS] [(REASON)] -->`` on the line before a fence."""

    kind: str
    args: tuple[str, ...]
    reason: str

    @classmethod
    def parse(cls, text: str) -> Directive:
        m = _KIND.match(text)
        if not m:
            msg = f"a docs-test directive reads KIND [ARGS] [(REASON)], not {text!r}"
            raise ValueError(msg)
        return cls(m["kind"], tuple((m["args"] or "").split()), (m["reason"] or "").strip())


@dataclass(frozen=True)
class Block:
    """One fenced code block: where it is, its language (the info string's first word, lower case, '' for
    none), its text (the fence's indentation taken off every line) and the directive before it."""

    doc: str
    line: int
    lang: str
    text: str
    directive: Directive | None

    @property
    def id(self) -> str:
        return f"{self.doc}:{self.line}"

    @property
    def kind(self) -> str | None:
        return self.directive.kind if self.directive else None


def read_blocks(doc: str) -> list[Block]:
    """The fenced blocks of ``doc`` (a path under the repository) in order.

    Raises:
        ValueError: a fence that is never closed, or a directive that stands before no fence.
    """
    lines = (ROOT / doc).read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        m = _OPEN.match(lines[i])
        if not m:
            if _ANY_DIRECTIVE.search(lines[i]) and not (i + 1 < len(lines) and _OPEN.match(lines[i + 1])):
                msg = f"{doc}:{i + 1}: a docs-test directive must stand on the line just before a fence"
                raise ValueError(msg)
            i += 1
            continue
        indent, fence = len(m["indent"]), m["fence"]
        close = re.compile(rf"^ {{0,{indent + 3}}}{re.escape(fence[0])}{{{len(fence)},}}\s*$")
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not close.match(lines[j]):
            body.append(lines[j][indent:] if lines[j][:indent].strip() == "" else lines[j].lstrip())
            j += 1
        if j == len(lines):
            msg = f"{doc}:{i + 1}: a fence that is never closed"
            raise ValueError(msg)
        d = _DIRECTIVE.match(lines[i - 1]) if i > 0 else None
        blocks.append(Block(doc, i + 1, m["info"].lower(), "\n".join(body) + "\n",
                            Directive.parse(d["text"]) if d else None))
        i = j + 1
    return blocks


def all_blocks() -> list[Block]:
    return [b for doc in DOCS for b in read_blocks(doc)]


# --- SiddhiQL -----------------------------------------------------------------------------------------


def statements(text: str) -> list[str]:
    """``text`` cut at each ``;`` outside quotes and comments, the ``;`` dropped, empty pieces left out."""
    out: list[str] = []
    start, i, quote = 0, 0, ""
    while i < len(text):
        c = text[i]
        if quote:
            if c == quote:
                quote = ""
        elif c in "'\"":
            quote = c
        elif text.startswith("--", i):
            i = text.find("\n", i) if "\n" in text[i:] else len(text)
            continue
        elif text.startswith("/*", i):
            i = text.index("*/", i) + 2
            continue
        elif c == ";":
            out.append(text[start:i])
            start = i + 1
        i += 1
    out.append(text[start:])
    return [s.strip() for s in out if without_comments(s).strip()]


def without_comments(text: str) -> str:
    """``text`` without its ``-- ...`` lines and ``/* ... */`` comments (quotes are not looked into: for
    telling statements apart, not for running them)."""
    return re.sub(r"/\*.*?\*/", " ", re.sub(r"--[^\n]*", " ", text), flags=re.S)


def defines(text: str) -> bool:
    """Whether SiddhiQL ``text`` defines something (a stream, an aggregation, a table...)."""
    return re.search(r"(^|\s|;)define\s", without_comments(text), re.I) is not None


def head_word(statement: str) -> str:
    """The first word of a statement after its comments and annotations (``from``, ``select``, ``with``)."""
    text = without_comments(statement)
    while True:
        text = text.lstrip()
        m = re.match(r"@[\w:]+\s*", text)
        if not m:
            break
        text = text[m.end():]
        if text.startswith("("):  # skip the annotation's parenthesised elements
            depth, end = 0, len(text)
            for k, c in enumerate(text):
                depth += (c == "(") - (c == ")")
                if depth == 0:
                    end = k + 1
                    break
            text = text[end:]
    word = re.match(r"\w+", text)
    return word.group(0).lower() if word else ""


# --- shell --------------------------------------------------------------------------------------------


def strip_comment(line: str) -> str:
    """``line`` without a shell comment (a ``#`` at the start of a word, outside quotes)."""
    quote = ""
    for i, c in enumerate(line):
        if quote:
            if c == quote:
                quote = ""
        elif c in "'\"":
            quote = c
        elif c == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip()
    return line.rstrip()


def commands(block: Block) -> list[str]:
    """The commands of a shell block, in order: continuation lines joined (with one space), comments and
    blank lines left out (the form ``SKIPPED`` lists them in).  In a ``console`` block, only the lines
    after a ``$ `` prompt."""
    text = re.sub(r"\s*\\\n\s*", " ", block.text)
    out = []
    for line in text.splitlines():
        if block.lang == "console":
            if not line.startswith("$ "):
                continue
            line = line[2:]
        command = strip_comment(line).strip()
        if command:
            out.append(command)
    return out
