"""The page's dead letters view in a real browser (Chromium, Playwright) against `treadle serve`.

An endpoint whose receiver refuses everything (one attempt) turns a failed
run's ``run.failed`` message into a dead letter; the page's "Dead letters"
view, reached from its navigation, lists it, and its Resend button sends it
again: the receiver, accepting now, gets it with the same ``webhook-id``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from page_server import Server, start_server

from browsers import needs_chromium
from cli.treadle_cli import Cli
from server import test_page_browser as shown
from webhook_receiver import Receiver, until, verified

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

expect = shown.expect
page = shown.page  # the page's fixture: a signed-in page on the worker's browser

pytestmark = [
    pytest.mark.integration,
    needs_chromium,
]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("hooks") / "runs.db"


@pytest.fixture(scope="module")
def server(store: Path) -> Iterator[Server]:
    running = start_server(store, "page_app")
    yield running
    running.stop()


def test_a_dead_letter_is_listed_and_resent_from_the_page(page, server: Server, store: Path):
    receiver = Receiver(failures=10**6)  # refuses every delivery, until told otherwise
    receiver.start()
    try:
        added = Cli(store.parent)(
            "webhooks",
            "add",
            f"http://127.0.0.1:{receiver.port}/hook",
            "--event",
            "run.failed",
            "--attempts",
            "1",
            "--store",
            f"sqlite:///{store}",
        )
        assert added.returncode == 0, added.stderr
        secret = added.stdout.split("signing secret: ", 1)[1].split()[0]
        with server.api() as api:
            started = api.post("/api/runs", json={"workflow": "failing", "input": 150})
            assert started.status_code == 201, started.text
            run_id = started.json()["run"]["run_id"]
        until(lambda: receiver.deliveries, 20)  # its one attempt, refused: a dead letter
        page.get_by_role("link", name="Dead letters").click()
        expect(page.get_by_role("heading", name="Webhooks: dead letters")).to_be_visible()
        row = page.get_by_role("table", name="Dead letters").locator("tbody tr")
        expect(row).to_have_count(1)
        expect(row).to_contain_text("run.failed")
        expect(row).to_contain_text("HTTP 500")
        receiver.failures = 0
        row.get_by_role("button", name="Resend").click()
        expect(page.get_by_role("alert")).to_contain_text("1 dead letter queued to send again")
        until(lambda: receiver.taken, 20)
        expect(row).to_have_count(0)
    finally:
        receiver.stop()
    (message,) = verified(secret, receiver.taken)
    assert (message["type"], message["data"]["run_id"]) == ("run.failed", run_id)
    assert message["id"] == receiver.deliveries[0][0]["webhook-id"]  # the same id, re-sent
