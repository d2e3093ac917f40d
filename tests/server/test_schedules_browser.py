"""The schedules view in a real browser (Debian's Chromium, by Playwright) on `treadle serve`.

A person opens Schedules, sees each schedule's next time and state, pauses
and unpauses one, triggers a run now and follows it to its outcome, and
the record says it was them (the server's token). A server of its own, so
that the runs its schedules start stay out of the other page tests' lists.
"""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from page_server import Server, start_server

from browsers import needs_chromium

if TYPE_CHECKING:
    from collections.abc import Iterator

playwright_api = pytest.importorskip("playwright.sync_api")
expect = playwright_api.expect

APPS = Path(__file__).parents[1] / "apps"

pytestmark = [
    pytest.mark.integration,
    needs_chromium,
]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    running = start_server(tmp_path / "runs.db", "digest", beside=APPS)
    yield running
    running.stop()


def test_the_schedules_view_shows_next_times_pauses_and_triggers(server: Server, browser, tmp_path):
    with server.api() as api:
        made = api.post(
            "/api/schedules",
            json={"id": "weekday-digest", "workflow": "digest", "cron": "0 9 * * 1-5",
                  "tz": "Europe/Paris", "input": "digest of {date}"},
        )  # fmt: skip
        assert made.status_code == 201, made.text
        next_time = made.json()["schedule"]["next_times"][0]
    context = browser.new_context(viewport={"width": 1240, "height": 900})
    context.set_default_timeout(15_000)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(server.page_url)
    page.get_by_role("link", name="Schedules").click()
    row = page.locator('tr[data-schedule="weekday-digest"]')
    expect(row).to_contain_text("At 09:00 on Monday through Friday (Europe/Paris)")
    expect(row.locator('[data-cell="next"]')).to_have_text(next_time.replace("T", " "))
    expect(row.locator('[data-cell="state"]')).to_have_text("active")

    row.get_by_role("button", name="Pause").click()
    expect(row.locator('[data-cell="state"]')).to_have_text("paused")
    expect(row.locator('[data-cell="next"]')).to_have_text("—")
    row.get_by_role("button", name="Unpause").click()
    expect(row.locator('[data-cell="state"]')).to_have_text("active")

    row.get_by_role("link", name="weekday-digest").click()
    expect(page.get_by_role("heading", name="Schedule weekday-digest")).to_be_visible()
    expect(page.get_by_role("list", name="Next times").get_by_role("listitem")).to_have_count(5)
    page.get_by_role("button", name="Trigger now").click()
    tick = page.locator("tr[data-tick]").first
    expect(tick).to_contain_text("trigger")
    # The server's timer service starts the run; the view shows its outcome.
    expect(tick.locator('[data-cell="outcome"]')).to_have_text("completed", timeout=30_000)
    page.screenshot(path=str(tmp_path / "schedule.png"))
    tick.get_by_role("link").click()
    expect(page).to_have_url(re.compile(r"#/runs/weekday-digest(@|%40)"))
    context.close()
    assert errors == [], errors
    with sqlite3.connect(tmp_path / "runs.db") as db:
        rows = db.execute("SELECT action, actor FROM treadle_audit ORDER BY seq").fetchall()
    mine = [(a, json.loads(actor)["label"]) for a, actor in rows if a.startswith("schedule_")]
    assert mine == [
        ("schedule_created", "token:server"),
        ("schedule_paused", "token:server"),
        ("schedule_unpaused", "token:server"),
        ("schedule_triggered", "token:server"),
    ]
