"""The worker's one browser (tests/browsers.py) leaves the worker's other tests an event loop."""

from __future__ import annotations

import asyncio

from browsers import _driving, needs_chromium

pytestmark = [needs_chromium]


def test_an_event_loop_runs_once_the_workers_browser_is_up(chromium):
    """The tests after the one that launched it run theirs, Chromium still up."""
    assert asyncio.run(asyncio.sleep(0, result="ran")) == "ran"


def test_an_event_loop_runs_after_a_test_drove_the_browser(chromium):
    """As after a test that held ``browser``: Playwright's loop is marked running only then."""
    with _driving(chromium):
        context = chromium.new_context()
        page = context.new_page()
        page.set_content("<title>here</title>")
        assert page.title() == "here"
        context.close()
    assert asyncio.run(asyncio.sleep(0, result="ran")) == "ran"
