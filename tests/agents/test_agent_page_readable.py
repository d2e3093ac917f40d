"""What the page shows of an agent's run reads as prose: its answer form's help, its conversation.

One `treadle serve` on a SQLite file with the refund desk (an agent whose
refund needs approval), driven in Debian's Chromium by Playwright.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from browsers import needs_chromium
from server.page_server import Server, start_server

if TYPE_CHECKING:
    from collections.abc import Iterator

playwright_api = pytest.importorskip("playwright.sync_api")
expect = playwright_api.expect
HERE = Path(__file__).parent

pytestmark = [
    pytest.mark.integration,
    needs_chromium,
]

_REST = re.compile(r":\w+:`|``")  # a reST role, or reST's inline code


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    scratch = tmp_path_factory.mktemp("readable")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("REFUND_SIDE", str(scratch / "side.sqlite"))
        running = start_server(scratch / "runs.db", "refund_app", beside=HERE)
    yield running
    running.stop()


@pytest.fixture
def page(browser, server: Server) -> Iterator[object]:
    opened = browser.new_page()
    opened.set_default_timeout(10_000)
    opened.goto(server.page_url)
    yield opened
    opened.context.close()


def _awaiting(server: Server, run_id: str) -> dict:
    with server.api() as api:
        started = api.post(
            "/api/runs",
            json={"workflow": "desk", "input": "Refund order A1, please.", "run_id": run_id},
        )
        assert started.status_code == 201, started.text
        deadline = time.monotonic() + 20
        while (detail := api.get(f"/api/runs/{run_id}").json())["run"][
            "status"
        ] != "awaiting_input":
            assert time.monotonic() < deadline, "the refund was never asked"
            time.sleep(0.05)
    return detail


def test_the_answer_forms_help_shows_no_sphinx_markup(page, server: Server):
    detail = _awaiting(server, "help-1")
    schema = detail["pending_requests"][0]["answer_schema"]
    assert not _REST.search(json.dumps(schema)), schema["description"]  # the API's text is clean
    page.goto(f"{server.base}/#/runs/help-1")
    card = page.locator("#requests form.request")
    help_text = card.locator(".help").first
    expect(help_text).to_contain_text("The answer to a ToolApproval")
    expect(help_text).not_to_contain_text(":class:")
    expect(help_text).not_to_contain_text("``")
    expect(help_text.locator("code").first).to_have_text('{"action": "approve"}')


def test_an_agents_conversation_reads_as_a_conversation(page, server: Server):
    detail = _awaiting(server, "talk-1")
    with server.api() as api:
        request_id = detail["pending_requests"][0]["request_id"]
        sent = api.post(
            f"/api/runs/talk-1/requests/{request_id}", json={"answer": {"action": "approve"}}
        )
        assert sent.status_code == 202, sent.text
    page.goto(f"{server.base}/#/runs/talk-1")
    expect(page.locator(".run-header .badge")).to_have_text("completed")
    messages = page.locator("#conversation .message")
    expect(messages).to_have_count(4)
    expect(messages.nth(0)).to_contain_text("user")
    expect(messages.nth(0)).to_contain_text("Refund order A1, please.")
    expect(messages.nth(1)).to_contain_text("assistant")
    expect(messages.nth(1)).to_contain_text('refund({"order": "A1", "cents": 5000})')
    expect(messages.nth(2)).to_contain_text("refunded 5000 on A1")
    expect(messages.nth(3)).to_contain_text("Done: refunded 5000 on A1")
    expect(page.locator("#state")).not_to_contain_text("part_kind")  # no raw dump
