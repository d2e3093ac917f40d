"""The one browser plugin of the tests: Debian's Chromium, started once per pytest worker.

Starting Playwright's driver and a Chromium costs some 3-4 CPU-seconds;
the page's browser tests (tests/server/*_browser.py, test_page_decisions.py,
tests/agents/test_agent_page*.py) used to pay that once per module, some
once per test. ``browser`` is the worker's one Chromium, launched on the
first test that asks for it (a run without browser tests starts none) and
closed at the end of the session; every context a test opens on it is
closed after that test, so no cookies, storage or page outlives its test.
Registered for every folder by ``tests/conftest.py``.

Without the browser a module marked ``needs_chromium`` is skipped; a test
asking for ``browser`` without the mark fails, saying to run
``make renderers`` (the sign-in tests do: a checkout that ``make test``
set up has it).
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from collections.abc import Iterator

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_MISSING = "run `make renderers`: it installs Debian's chromium"

needs_chromium = pytest.mark.skipif(
    not Path(CHROMIUM).exists(), reason=f"needs Debian's chromium ({CHROMIUM_MISSING})"
)


@pytest.fixture(scope="session")
def chromium() -> Iterator[Any]:
    """Playwright's driver and one Chromium for the worker, stopped when its session ends."""
    assert Path(CHROMIUM).exists(), CHROMIUM_MISSING
    playwright_api = pytest.importorskip("playwright.sync_api")
    with playwright_api.sync_playwright() as p:
        launched = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        asyncio._set_running_loop(None)  # not between tests: see _driving
        yield launched
        asyncio._set_running_loop(launched._loop)  # as Playwright left it, to stop it
        launched.close()


@pytest.fixture
def browser(chromium: Any) -> Iterator[Any]:
    """The worker's Chromium, for one test: every context it opens is closed after it."""
    with _driving(chromium):
        assert chromium.contexts == [], "a context outlived the test that opened it"
        yield chromium
        for context in chromium.contexts:
            context.close()


@contextlib.contextmanager
def _driving(browser: Any) -> Iterator[None]:
    """Playwright's event loop marked running in this thread while a test drives the browser.

    Playwright's sync API leaves its loop marked as the thread's running
    loop between calls, so that its dispatcher can go on. Left so for the
    rest of the session, the worker's later tests could run no event loop
    (``asyncio.run() cannot be called from a running event loop``), so it is
    marked only while a test holds ``browser``, as Playwright marks it.
    """
    asyncio._set_running_loop(browser._loop)  # Playwright's own hand-off, private
    try:
        yield
    finally:
        asyncio._set_running_loop(None)
