"""The built LALR tables are kept in a cache file, so a command does not build them again on every start."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tiltframe.lang.syntax import build_lark, parser_cache

TEXT = "define stream S (symbol string, price double);"


def test_the_tables_are_built_once_and_read_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TILTFRAME_CACHE_DIR", str(tmp_path / "cache"))
    first = build_lark("siddhiql/grammar.lark", ["app"])
    (kept,) = (tmp_path / "cache").iterdir()
    assert kept.stat().st_size > 0
    assert (tmp_path / "cache").stat().st_mode & 0o777 == 0o700
    again = build_lark("siddhiql/grammar.lark", ["app"])
    assert again.parse(TEXT) == first.parse(TEXT)


def test_a_damaged_cache_file_is_built_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TILTFRAME_CACHE_DIR", str(tmp_path))
    path = Path(parser_cache("grammar.lark-app") or "")
    path.write_bytes(b"not a pickle")
    assert build_lark("siddhiql/grammar.lark", ["app"]).parse(TEXT).data == "app"


def test_no_cache_where_none_can_be_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TILTFRAME_CACHE_DIR", "")
    assert parser_cache("x") is None
    blocked = tmp_path / "file"
    blocked.write_text("")
    monkeypatch.setenv("TILTFRAME_CACHE_DIR", str(blocked / "cache"))  # under a file: cannot be made
    assert parser_cache("x") is None
    monkeypatch.delenv("TILTFRAME_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert parser_cache("x") == os.path.join(tmp_path, "xdg", "tiltframe", "lark-x.pickle")
