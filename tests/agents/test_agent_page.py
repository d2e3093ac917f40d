"""A refund an agent asks approval for, approved by a person on the page, runs once."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from scripted import counted

from browsers import needs_chromium
from server.page_server import start_server

playwright_api = pytest.importorskip("playwright.sync_api")
expect = playwright_api.expect
HERE = Path(__file__).parent

pytestmark = [
    pytest.mark.integration,
    needs_chromium,
]


def test_a_refund_is_approved_on_the_page_and_the_tool_runs_once(tmp_path, monkeypatch, browser):
    side = tmp_path / "side.sqlite"
    monkeypatch.setenv("REFUND_SIDE", str(side))
    server = start_server(tmp_path / "runs.db", "refund_app", beside=HERE)
    try:
        with server.api() as api:
            started = api.post(
                "/api/runs",
                json={"workflow": "desk", "input": "Refund order A1, please.", "run_id": "pg-1"},
            )
            assert started.status_code == 201, started.text
            deadline = time.monotonic() + 20
            while api.get("/api/runs/pg-1").json()["run"]["status"] != "awaiting_input":
                assert time.monotonic() < deadline, "the refund was never asked"
                time.sleep(0.05)
        assert counted(side) == {}
        page = browser.new_page()
        page.set_default_timeout(10_000)
        page.goto(server.page_url)
        page.get_by_role("link", name=re.compile("^Inbox")).click()
        card = page.locator('form.request[data-run="pg-1"]')
        expect(card).to_contain_text("refund")
        action = card.get_by_role("group", name="Action")
        for choice in ("Approve", "Edit", "Refuse"):  # nothing is decided for the person
            expect(action.get_by_role("button", name=choice)).to_have_attribute(
                "aria-pressed", "false"
            )
        card.get_by_role("button", name="Send answer").click()  # undecided: refused
        expect(card.locator('.field[data-path="action"] .field-error')).to_contain_text(
            "choose one: Approve or Edit or Refuse"
        )
        assert counted(side) == {}
        action.get_by_role("button", name="Approve").click()
        card.get_by_role("button", name="Send answer").click()
        expect(card.locator(".confirmation")).to_contain_text("You decide Action: Approve.")
        assert counted(side) == {}  # not before it is confirmed
        card.get_by_role("button", name="Confirm and send").click()
        expect(card).to_have_class(re.compile(r"\banswered\b"))  # the server took it
        page.evaluate("location.hash = '#/runs/pg-1'")
        expect(page.locator(".run-header .badge")).to_have_text("completed")
        expect(page.locator("#outputs")).to_contain_text("refunded 5000 on A1")
        page.context.close()
        assert counted(side) == {"refund": 1}
    finally:
        server.stop()
