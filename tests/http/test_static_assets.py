"""The dashboard page's files: the vendored uPlot is the one web/package-lock.json pins (version, integrity,
sha256 of every copied file, its license kept), and the page loads nothing from another host.
No network and no node: this reads the committed files only."""

from __future__ import annotations

import hashlib
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STATIC = ROOT / "tiltframe" / "http" / "static"
VENDOR = STATIC / "vendor"
WEB = ROOT / "web"

# The ids the browser tests and the docs rely on.
PAGE_IDS = ["aggregation", "measure", "per", "start", "end", "keys", "draw", "auto-refresh",
            "chart", "table", "status", "rejected", "error"]


def manifest() -> dict:
    return json.loads((VENDOR / "MANIFEST.json").read_text(encoding="utf-8"))


def locked_uplot() -> dict:
    lock = json.loads((WEB / "package-lock.json").read_text(encoding="utf-8"))
    return lock["packages"]["node_modules/uplot"]


def test_every_vendored_file_has_its_recorded_sha256() -> None:
    files = manifest()["files"]
    assert files, "MANIFEST.json lists no file"
    for name, digest in files.items():
        path = VENDOR / name
        assert path.is_file(), f"{name} is in MANIFEST.json but not in {VENDOR}"
        assert hashlib.sha256(path.read_bytes()).hexdigest() == digest, f"{name} differs from MANIFEST.json"


def test_vendor_holds_only_the_manifest_and_its_files() -> None:
    present = {p.name for p in VENDOR.iterdir()}
    assert present == {"MANIFEST.json", *manifest()["files"]}


def test_manifest_is_the_locked_uplot() -> None:
    m = manifest()
    locked = locked_uplot()
    assert m["package"] == "uplot"
    assert m["version"] == locked["version"]
    assert m["integrity"] == locked["integrity"]
    assert m["integrity"].startswith("sha512-")


def test_package_json_pins_the_exact_locked_version() -> None:
    package = json.loads((WEB / "package.json").read_text(encoding="utf-8"))
    assert package["dependencies"]["uplot"] == locked_uplot()["version"]
    assert re.fullmatch(r"\d+\.\d+\.\d+", package["dependencies"]["uplot"])


def test_uplot_license_is_kept() -> None:
    names = [n for n in manifest()["files"] if "LICENSE" in n]
    assert names, "no LICENSE in MANIFEST.json"
    text = (VENDOR / names[0]).read_text(encoding="utf-8")
    assert "MIT License" in text
    assert "Leon Sorokin" in text


@pytest.mark.parametrize("name", ["index.html", "app.js", "style.css"])
def test_the_page_names_no_other_host(name: str) -> None:
    text = (STATIC / name).read_text(encoding="utf-8")
    assert not re.search(r"https?://", text, re.IGNORECASE), f"{name} names a URL on another host"
    assert not re.search(r"""(src|href)\s*=\s*["']//""", text, re.IGNORECASE), f"{name} has a protocol-relative URL"


class _Refs(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.refs: list[str] = []
        self.ids: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if a.get("id"):
            self.ids.append(a["id"])
        for key in ("src", "href"):
            if a.get(key) and tag in ("script", "link"):
                self.refs.append(a[key])


def test_the_page_loads_files_that_exist_and_has_its_ids() -> None:
    parser = _Refs()
    parser.feed((STATIC / "index.html").read_text(encoding="utf-8"))
    local = [r for r in parser.refs if not r.startswith("data:")]
    assert "vendor/uPlot.iife.min.js" in local
    assert "vendor/uPlot.min.css" in local
    for ref in local:
        assert (STATIC / ref).is_file(), f"index.html loads {ref}, which is not in {STATIC}"
    missing = [i for i in PAGE_IDS if i not in parser.ids]
    assert not missing, f"index.html lacks the ids {missing}"
    assert len(parser.ids) == len(set(parser.ids)), "an id is used twice"
