"""The browser the page's tests drive: Playwright with the machine's Chromium, headless; a page per test that
fails it on any script error."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from typing import Any

import pytest


def chromium() -> str:
    """Debian's Chromium (scripts/setup.sh installs it); a missing one fails under CI."""
    found = os.environ.get("TILTFRAME_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        message = "no chromium on PATH (scripts/setup.sh installs Debian's 'chromium' package)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return found


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium(), headless=True,
                              args=["--no-sandbox", "--disable-dev-shm-usage"])  # root, in a container
        yield b
        b.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    yield page
    context.close()
    assert errors == []  # no script error on the page
