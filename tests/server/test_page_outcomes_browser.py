"""The page shows a run's outcome beside its status, and the run list filters on it (Chromium)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import pytest
from page_server import Server, start_server
from test_page_browser import expect, page, pytestmark  # noqa: F401 - fixtures

if TYPE_CHECKING:
    from collections.abc import Iterator


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    store = tmp_path_factory.mktemp("outcomes") / "runs.db"
    running = start_server(store, "outcome_app")
    yield running
    running.stop()


def test_the_page_shows_each_runs_outcome_beside_its_status_and_filters_on_it(
    page,  # noqa: F811 - the fixture imported above
    server,
):
    with server.api() as api:
        for run_id, euros in (("cheap", 30), ("dear", 1200)):
            claim = {"who": "ann", "euros": euros}
            body = {"workflow": "expense", "input": claim, "run_id": run_id}
            assert api.post("/api/runs", json=body).status_code == 201
    page.goto(f"{server.base}/#/runs")
    dear = page.locator('tr[data-run="dear"]')
    expect(dear.locator(".badge.status-completed")).to_be_visible()
    expect(dear.locator(".badge.outcome")).to_have_text("rejected")
    expect(dear.locator(".badge.outcome")).to_have_attribute(
        "title", "1200 EUR for ann is over the 1000 EUR limit"
    )
    expect(page.locator('tr[data-run="cheap"] .badge.outcome')).to_have_text("approved")

    page.get_by_label("Outcome").fill("rejected")
    page.get_by_label("Outcome").press("Enter")
    expect(page).to_have_url(re.compile(r"outcome=rejected"))
    expect(page.locator("tr[data-run]")).to_have_count(1)
    expect(page.locator('tr[data-run="dear"]')).to_be_visible()

    page.locator('tr[data-run="dear"] a').click()
    header = page.locator(".run-header")
    expect(header.locator(".badge.status-completed")).to_have_text("completed")
    expect(header.locator(".badge.outcome")).to_have_text("rejected")
    expect(header.locator(".outcome-summary")).to_have_text(
        "1200 EUR for ann is over the 1000 EUR limit"
    )
