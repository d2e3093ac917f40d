"""Two approvers on the page and a signed link race for one request (issue 29, must show 6).

A real OpenID Connect provider and a real ``treadle serve`` (as in
``test_signin_browser.py``, whose helpers this reuses), Chromium through
Playwright: maria and ann, both approvers (group finance), each have the
request's card open in their inbox and have pressed "Send answer"; a
link made for carol (``treadle links create``) is ready. All three send at
once. One answer wins (the run's log holds one ``request_answered``); the
others are each told the request was already answered, and by whom: the
page's card and the link's refusal name the winner as the record does.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest

from cli.treadle_cli import Cli
from server.test_signin_browser import (
    _call,
    _signed_in,
    signing_in,
)

if TYPE_CHECKING:
    from collections.abc import Iterator

playwright_api = pytest.importorskip("playwright.sync_api")
expect = playwright_api.expect

HERE = Path(__file__).parent
pytestmark = [pytest.mark.integration]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """The provider and ``treadle serve`` (race_app, people signing in); its base URL and store."""
    store = tmp_path_factory.mktemp("race") / "runs.db"
    with signing_in(store, "approvals:race") as (base, _):
        yield base, store


def _link(store: Path, run_id: str, request_id: str, who: str) -> str:
    done = Cli(store.parent)(
        "links", "create", run_id, request_id, "--for", who, "--store", str(store)
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


def _pending_request(page, run_id: str) -> str:
    """The id of the request the run waits on, read through the page's API."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        status, detail = _call(page, "GET", f"/api/runs/{run_id}")
        assert status == 200, detail
        if detail["pending_requests"]:
            return str(detail["pending_requests"][0]["request_id"])
        time.sleep(0.1)
    raise AssertionError(f"run {run_id} asked nothing")


def _log(page, run_id: str) -> list[dict]:
    text = page.evaluate(
        """async (path) => {
            const token = document.querySelector('meta[name="treadle-token"]').content;
            const response = await fetch(path, {headers: {Authorization: `Bearer ${token}`}});
            return await response.text();  // the run has ended: the stream ends with it
        }""",
        f"/api/runs/{run_id}/events",
    )
    return [
        json.loads(line.removeprefix("data: "))
        for line in text.splitlines()
        if line.startswith("data: ")
    ]


def test_two_approvers_and_a_link_race_one_wins_the_others_are_told_who(served, browser):
    base, store = served
    ann, ann_page = _signed_in(browser, base, "ann")
    maria, maria_page = _signed_in(browser, base, "maria")
    status, started = _call(
        ann_page,
        "POST",
        "/api/runs",
        {"workflow": "race", "input": {"title": "Desk", "cents": 9000}},
    )
    assert status == 201, started
    run_id = started["run"]["run_id"]
    cards = {}
    for name, page, verdict in (("ann", ann_page, "No"), ("maria", maria_page, "Yes")):
        # The inbox refreshes on a timer; stopped here, the cards stay while the answers race.
        page.clock.install()
        page.goto(f"{base}/#/inbox")
        page.reload()
        card = page.locator(f'form.request[data-run="{run_id}"]')
        expect(card).to_be_visible()
        page.clock.pause_at(page.evaluate("Date.now()") + 1000)
        card.get_by_role("group", name="Approved").get_by_role("button", name=verdict).click()
        card.get_by_role("button", name="Send answer").click()
        expect(card.get_by_role("button", name="Confirm and send")).to_be_visible()
        cards[name] = card
    request_id = cards["ann"].get_attribute("data-request")
    link = _link(store, run_id, request_id, "carol").removeprefix("/")

    go = threading.Event()
    by_link: list[httpx.Response] = []

    def use_link() -> None:
        go.wait()
        by_link.append(
            httpx.post(f"{base}/{link}", json={"answer": {"approved": True}}, timeout=20)
        )

    racer = threading.Thread(target=use_link)
    racer.start()
    go.set()  # all three at once
    cards["maria"].get_by_role("button", name="Confirm and send").click()
    cards["ann"].get_by_role("button", name="Confirm and send").click()
    racer.join(30)
    for card in cards.values():
        expect(card.locator(".form-message")).not_to_be_empty()

    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        status, detail = _call(maria_page, "GET", f"/api/runs/{run_id}")
        if detail["run"]["status"] == "completed":
            break
        time.sleep(0.1)
    answered = [e["data"] for e in _log(maria_page, run_id) if e.get("type") == "request_answered"]
    assert len(answered) == 1, answered  # one answer won
    winner, label = answered[0]["actor"]["name"], answered[0]["actor"]["label"]
    won = {
        name
        for name, card in cards.items()
        if "Answered." in card.locator(".form-message").inner_text()
    }
    if by_link[0].status_code == 202:
        won.add("carol")
    assert won == {winner}
    for name, card in cards.items():
        if name != winner:  # told it was answered already, and by whom
            told = card.locator(".form-message").inner_text()
            assert "Already answered" in told
            assert f"already answered by {label} (" in told, told
    if winner != "carol":
        assert by_link[0].status_code == 409, by_link[0].text
        assert f"already answered by {label} (" in by_link[0].json()["error"]["message"]
    ann.close()
    maria.close()


def test_a_link_opened_in_a_browser_answers_once_and_is_not_another_persons(served, browser):
    """The link's page: the question and the page's form, no sign-in needed; ann is refused it."""
    base, store = served
    ann, ann_page = _signed_in(browser, base, "ann")
    status, started = _call(
        ann_page,
        "POST",
        "/api/runs",
        {"workflow": "race", "input": {"title": "Lamp", "cents": 2000}},
    )
    assert status == 201, started
    run_id = started["run"]["run_id"]
    request_id = _pending_request(ann_page, run_id)
    link = _link(store, run_id, request_id, "carol")
    ann_page.goto(base + link)  # signed in as ann: carol's link is not hers
    expect(ann_page.get_by_role("heading", name="This link cannot be used")).to_be_visible()
    expect(ann_page.get_by_role("alert")).to_contain_text(
        "this answer link is carol's; you are signed in as ann"
    )
    context = browser.new_context()  # nobody signed in: the link is the credential
    page = context.new_page()
    page.goto(base + link)
    expect(page.get_by_role("heading", name="Answer a request")).to_be_visible()
    expect(page.get_by_text("You answer as carol")).to_be_visible()
    card = page.locator(f'form.request[data-run="{run_id}"]')
    expect(card).to_contain_text("Lamp")  # what the request asks
    card.get_by_role("group", name="Approved").get_by_role("button", name="Yes").click()
    card.get_by_role("button", name="Send answer").click()
    card.get_by_role("button", name="Confirm and send").click()
    expect(card.locator(".form-message")).to_contain_text("Answered. The run goes on.")
    page.reload()  # used: it says so, and by whom
    expect(page.get_by_role("alert")).to_contain_text("used already, by carol")
    ann_page.goto(base + "/")  # back on the page, whose token reads the log
    answered = [e["data"] for e in _log(ann_page, run_id) if e.get("type") == "request_answered"]
    assert [(a["actor"]["label"], a["actor"]["door"]) for a in answered] == [("link:carol", "link")]
    context.close()
    ann.close()
