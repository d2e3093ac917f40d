"""The page's search box lists the runs a filter keeps, and says why it cannot read one."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from page_server import Server, start_server
from test_page_browser import expect, page, pytestmark  # noqa: F401 - fixtures

if TYPE_CHECKING:
    from collections.abc import Iterator


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    store = tmp_path_factory.mktemp("search") / "runs.db"
    running = start_server(store, "search_app", beside=Path(__file__).parents[1])
    yield running
    running.stop()


def test_the_search_box_lists_the_runs_a_filter_keeps(
    page,  # noqa: F811 - the fixture imported above
    server,
):
    with server.api() as api:
        for run_id, customer, amount in (("t1", "c1", 10), ("t2", "c2", 2000), ("t3", "c1", 3000)):
            body = {"workflow": "tickets", "input": {"customer": customer, "amount": amount}}
            assert api.post("/api/runs", json={**body, "run_id": run_id}).status_code == 201
    page.goto(f"{server.base}/#/runs")
    expect(page.locator("tr[data-run]")).to_have_count(3)

    search = page.get_by_label("Search")
    search.fill('fields.customer == "c1" && fields.amount > 100')
    search.press("Enter")
    expect(page).to_have_url(re.compile(r"where="))
    expect(page.locator("tr[data-run]")).to_have_count(1)
    expect(page.locator('tr[data-run="t3"]')).to_be_visible()

    search = page.get_by_label("Search")
    search.fill('fields.customer = "c1"')
    search.press("Enter")
    expect(page.get_by_role("alert")).to_contain_text("column 17")
