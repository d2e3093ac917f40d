"""The page in a real browser (Debian's Chromium, driven by Playwright) against `treadle serve`.

One server (a subprocess on a SQLite file) serves the whole module, and the
worker's one browser (tests/browsers.py) every test of the suite; each test
opens its own browser context, signs in with the printed address, and works
the page as a person would: by labels and buttons. The screenshots in
docs/images/server-*.png are taken here: ``make screenshots``
(``TREADLE_SCREENSHOTS=1``) writes them there; an ordinary run writes them to
a scratch folder, so the suite leaves the checkout as it found it.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from page_server import Server, start_server

from browsers import needs_chromium

if TYPE_CHECKING:
    from collections.abc import Iterator

playwright_api = pytest.importorskip("playwright.sync_api")
expect = playwright_api.expect

IMAGES = (
    Path(__file__).parents[2] / "docs" / "images"
    if os.environ.get("TREADLE_SCREENSHOTS")
    else Path(tempfile.gettempdir()) / "treadle-screenshots"
)
IMAGES.mkdir(exist_ok=True)

pytestmark = [
    pytest.mark.integration,
    needs_chromium,
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    store = tmp_path_factory.mktemp("page") / "runs.db"
    running = start_server(store, "page_app")
    yield running
    running.stop()


@pytest.fixture
def page(browser, server: Server):
    context = browser.new_context(viewport={"width": 1240, "height": 900})
    context.set_default_timeout(10_000)
    opened = context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda error: errors.append(str(error)))
    opened.goto(server.page_url)  # sets the cookie, then redirects to / without the token
    expect(opened).to_have_url(re.compile(r"/(#/runs)?$"))
    yield opened
    context.close()
    assert errors == [], f"errors in the page: {errors}; server said:\n{''.join(server.output)}"


def send_confirmed(card) -> None:
    """Send an answer as a person does: "Send answer", then confirm what it shows."""
    card.get_by_role("button", name="Send answer").click()
    card.get_by_role("button", name="Confirm and send").click()


def run_id_of(page) -> str:
    match = re.search(r"#/runs/([^/?]+)$", page.url)
    assert match, page.url
    return match.group(1)


def start_from_page(page, workflow: str, fill) -> str:
    page.get_by_role("link", name="Start a run").click()
    expect(page.get_by_role("heading", name="Start a run")).to_be_visible()
    page.get_by_label("Workflow").select_option(workflow)
    fill(page)
    page.get_by_role("button", name="Start run").click()
    expect(page).to_have_url(re.compile(r"#/runs/\w+$"))
    return run_id_of(page)


def test_approval_started_watched_answered_and_completed_from_the_page(page, server: Server):
    def fill(p) -> None:
        p.get_by_label("Title").fill("New laptop")
        p.get_by_label("Amount").fill("900")

    run_id = start_from_page(page, "approval", fill)

    # Live: the event stream colours the graph and fills the timeline while the page stays put.
    expect(page.locator('svg .node[data-id="draft"]')).to_have_attribute("data-mark", "ran")
    expect(page.locator('svg .node[data-id="review"]')).to_have_attribute("data-mark", "waiting")
    expect(page.locator(".run-header .badge")).to_have_text("awaiting input")
    expect(page.locator("#timeline li.step").first).to_be_visible()

    # The inbox lists the request with a form generated from Approval's schema.
    page.get_by_role("link", name=re.compile("^Inbox")).click()
    expect(page.get_by_role("heading", name="Inbox")).to_be_visible()
    card = page.locator(f'form.request[data-run="{run_id}"]')
    # A decision with no default starts undecided: one button per value, none pressed.
    decision = card.get_by_role("group", name="Approved")
    for value in ("Yes", "No"):
        expect(decision.get_by_role("button", name=value)).to_have_attribute(
            "aria-pressed", "false"
        )
    expect(card.get_by_label("Note")).to_have_attribute("type", "text")

    # A wrong-shape answer: each field's error next to it, and nothing changes.
    with server.api() as api:
        before = api.get(f"/api/runs/{run_id}").json()
    card.get_by_text("Edit as JSON").click()
    card.locator(".json-editor textarea").fill(json.dumps({"approved": "yes", "note": 5}))
    send_confirmed(card)
    approved_error = card.locator('.field[data-path="approved"] .field-error')
    note_error = card.locator('.field[data-path="note"] .field-error')
    expect(approved_error).to_be_visible()
    expect(note_error).to_be_visible()
    expect(card.get_by_label("Approved")).to_have_attribute("aria-invalid", "true")
    card.scroll_into_view_if_needed()
    page.screenshot(path=str(IMAGES / "server-inbox-error.png"), full_page=True)
    with server.api() as api:
        after = api.get(f"/api/runs/{run_id}").json()
    assert after["run"]["status"] == "awaiting_input"
    assert after["run"]["checkpoint_id"] == before["run"]["checkpoint_id"]
    assert after["run"]["updated_at"] == before["run"]["updated_at"]
    assert [r["request_id"] for r in after["pending_requests"]] == [
        r["request_id"] for r in before["pending_requests"]
    ]

    # The right answer, through the form on the run's own page: it completes live.
    page.locator(f'form.request[data-run="{run_id}"] a').first.click()
    expect(page).to_have_url(re.compile(rf"#/runs/{run_id}$"))
    card = page.locator("#requests form.request")
    card.get_by_role("group", name="Approved").get_by_role("button", name="Yes").click()
    card.get_by_label("Note").fill("fine by me")
    send_confirmed(card)
    expect(page.locator(".run-header .badge")).to_have_text("completed")
    expect(page.locator("#requests")).to_be_hidden()  # an ended run waits for nothing
    expect(page.locator("#outputs")).to_contain_text('"note": "fine by me"')
    expect(page.locator("#outputs")).to_contain_text('"approved": true')
    expect(page.locator('svg .node[data-id="publish"]')).to_have_attribute("data-mark", "ran")
    expect(page.locator("#state")).to_contain_text('"title": "New laptop"')
    expect(page.locator("#checkpoints tbody tr").first).to_be_visible()
    page.screenshot(path=str(IMAGES / "server-run.png"), full_page=True)
    with server.api() as api:
        assert api.get(f"/api/runs/{run_id}").json()["run"]["status"] == "completed"


def test_a_failed_run_shows_its_traceback(page, server: Server):
    def fill(p) -> None:
        p.get_by_label("Input for validate").fill("500")

    run_id = start_from_page(page, "failing", fill)
    expect(page.locator(".run-header .badge")).to_have_text("failed")
    traceback = page.locator(".error-box pre.traceback")
    expect(traceback).to_contain_text("Traceback (most recent call last)")
    expect(traceback).to_contain_text("check_amount")
    expect(traceback).to_contain_text("ValueError: amount 500 is over the limit of 100")
    failure = page.locator("#failures .failure").first
    expect(failure).to_contain_text("validate")
    expect(failure.locator("pre.traceback")).to_contain_text("check_amount")
    expect(page.locator('svg .node[data-id="validate"]')).to_have_attribute("data-mark", "failed")
    page.screenshot(path=str(IMAGES / "server-failed.png"), full_page=True)
    with server.api() as api:
        assert api.get(f"/api/runs/{run_id}").json()["run"]["status"] == "failed"


def test_runs_list_filters_by_status_and_pages(page, server: Server):
    with server.api() as api:
        started = [
            api.post("/api/runs", json={"workflow": "failing", "input": n}).json()["run"]["run_id"]
            for n in (101, 102, 103)
        ]
        kept = api.post(
            "/api/runs", json={"workflow": "approval", "input": {"title": "Desk", "amount": 50}}
        ).json()["run"]["run_id"]
    page.get_by_role("link", name="Runs", exact=True).click()
    expect(page.get_by_role("heading", name="Runs")).to_be_visible()
    rows = page.locator("table.runs tbody tr[data-run]")
    expect(page.locator(f'tr[data-run="{kept}"] .badge')).to_have_text("awaiting input")
    page.screenshot(path=str(IMAGES / "server-runs.png"), full_page=True)

    page.get_by_label("Status").select_option("failed")
    expect(page.locator(f'tr[data-run="{started[-1]}"]')).to_be_visible()
    expect(page.locator(f'tr[data-run="{kept}"]')).to_have_count(0)
    for badge in page.locator("table.runs tbody .badge").all():
        expect(badge).to_have_text("failed")

    # Two to a page: the newest two, then older ones through next_cursor, and back.
    page.goto(f"{server.base}/#/runs?status=failed&limit=2")
    expect(rows).to_have_count(2)
    first_page = rows.evaluate_all("rows => rows.map(r => r.dataset.run)")
    assert first_page == [started[2], started[1]]
    page.get_by_role("button", name="Older →").click()
    expect(page.locator(f'tr[data-run="{started[0]}"]')).to_be_visible()
    page.get_by_role("button", name="← Newer").click()
    expect(page.locator(f'tr[data-run="{started[2]}"]')).to_be_visible()


def test_a_run_waiting_for_a_call_limit_says_so_in_the_list_and_on_its_page(
    page, server: Server, tmp_path: Path
):
    gate = tmp_path / "go"
    with server.api() as api:
        started = [
            api.post("/api/runs", json={"workflow": "limited", "input": str(gate)}).json()["run"]
            for _ in range(2)
        ]
        deadline = time.monotonic() + 20
        while True:  # one holds the slot of "api", the other waits in its line
            waits = {r["run_id"]: r["waiting_for"] for r in api.get("/api/runs").json()["runs"]}
            waiting = [run["run_id"] for run in started if waits[run["run_id"]]]
            if waiting:
                break
            assert time.monotonic() < deadline, waits
            time.sleep(0.05)
    [waiter] = waiting
    page.goto(f"{server.base}/#/runs")
    expect(page.locator(f'tr[data-run="{waiter}"] .waiting')).to_have_text(" waiting: api #1")
    page.goto(f"{server.base}/#/runs/{waiter}")
    waits = page.get_by_role("list", name="Waiting for call limits")
    expect(waits).to_have_text(
        "waiting for limit api: next in line · next slot when a call releases one"
    )
    gate.write_text("go")
    expect(page.locator(".run-header .badge")).to_have_text("completed")
    expect(waits).to_have_count(0)  # the page read it again: nothing waits


def test_pause_unpause_resume_fork_with_a_state_patch_and_cancel(page, server: Server):
    with server.api() as api:
        run_id = api.post(
            "/api/runs", json={"workflow": "approval", "input": {"title": "Chair", "amount": 80}}
        ).json()["run"]["run_id"]
    page.goto(f"{server.base}/#/runs/{run_id}")
    badge = page.locator(".run-header .badge")
    expect(badge).to_have_text("awaiting input")
    page.get_by_role("button", name="Pause", exact=True).click()
    expect(badge).to_have_text("paused")
    page.get_by_role("button", name="Unpause").click()
    expect(badge).to_have_text("awaiting input")

    # Paused again, then resumed from the checkpoint that asked for the answer: it asks again.
    page.get_by_role("button", name="Pause", exact=True).click()
    expect(badge).to_have_text("paused")
    asked = page.locator("#checkpoints tbody tr", has=page.get_by_text("awaiting input")).last
    asked.get_by_role("button", name="Resume from here").click()
    expect(badge).to_have_text("awaiting input")
    expect(page.locator("#requests form.request")).to_be_visible()
    # The run rests, asking: once the table shows every checkpoint it has, no row moves.
    with server.api() as api:
        stored = api.get(f"/api/runs/{run_id}/history").json()["checkpoints"]
    expect(page.locator("#checkpoints tbody tr")).to_have_count(len(stored))

    # Fork from the checkpoint that awaits the answer, with the title patched.
    row = page.locator("#checkpoints tbody tr").last
    row.get_by_role("button", name="Fork…").click()
    page.get_by_label("State patch").fill('{"title": "Patched chair"}')
    page.get_by_role("button", name="Fork run").click()
    expect(page).not_to_have_url(re.compile(rf"#/runs/{run_id}$"))
    forked = run_id_of(page)
    expect(page.locator("#state")).to_contain_text('"title": "Patched chair"')
    with server.api() as api:
        assert api.get(f"/api/runs/{forked}").json()["run"]["parent_run_id"] == run_id

    page.goto(f"{server.base}/#/runs/{run_id}")
    page.get_by_role("button", name="Cancel", exact=True).click()
    expect(badge).to_have_text("cancelled")
    with server.api() as api:
        assert api.get(f"/api/runs/{run_id}").json()["run"]["status"] == "cancelled"


def test_an_answer_someone_sent_first_shows_already_answered(page, server: Server):
    with server.api() as api:
        run_id = api.post(
            "/api/runs", json={"workflow": "approval", "input": {"title": "Lamp", "amount": 20}}
        ).json()["run"]["run_id"]
    # The inbox refreshes on a timer; stopped here, the card stays while the answer races it.
    page.clock.install()
    page.goto(f"{server.base}/#/inbox")
    page.reload()
    card = page.locator(f'form.request[data-run="{run_id}"]')
    expect(card).to_be_visible()
    page.clock.pause_at(page.evaluate("Date.now()") + 1000)
    with server.api() as api:
        request_id = card.get_attribute("data-request")
        sent = api.post(
            f"/api/runs/{run_id}/requests/{request_id}",
            json={"answer": {"approved": False, "note": "no lamps"}},
        )
        assert sent.status_code == 202, sent.text
    card.get_by_role("group", name="Approved").get_by_role("button", name="Yes").click()
    card.get_by_label("Note").fill("yes to lamps")
    send_confirmed(card)
    expect(card.locator(".form-message")).to_contain_text("Already answered")
    expect(card.get_by_role("button", name="Send answer")).to_be_disabled()


def test_the_generated_form_draws_enums_numbers_objects_lists_and_optionals(page, server: Server):
    with server.api() as api:
        run_id = api.post("/api/runs", json={"workflow": "survey", "input": "office"}).json()[
            "run"
        ]["run_id"]
    page.goto(f"{server.base}/#/runs/{run_id}")
    card = page.locator("#requests form.request")
    priority = card.get_by_role("group", name="Priority")  # a decision: a button per value
    priority.get_by_role("button", name="High").click()
    expect(card.get_by_label("Score")).to_have_attribute("type", "number")
    card.get_by_label("Score").fill("4.5")
    address = card.get_by_role("group", name="Address")
    address.get_by_label("City").fill("Lyon")
    address.get_by_label("Floor").fill("3")
    card.get_by_label("Tags").fill('["red", "blue"]')
    # A bool with a default is a decision all the same: buttons, none pressed.
    urgent = card.get_by_role("group", name="Urgent")
    expect(urgent.get_by_role("button", name="Yes")).to_have_attribute("aria-pressed", "false")
    expect(urgent.get_by_role("button", name="No")).to_have_attribute("aria-pressed", "false")
    urgent.get_by_role("button", name="Yes").click()
    send_confirmed(card)
    expect(page.locator(".run-header .badge")).to_have_text("completed")
    with server.api() as api:
        outputs = api.get(f"/api/runs/{run_id}").json()["outputs"]
    assert outputs == [
        {
            "priority": "high",
            "score": 4.5,
            "address": {"city": "Lyon", "floor": 3},
            "tags": ["red", "blue"],
            "urgent": True,
            "comment": None,  # left empty: not sent, so its default
        }
    ]


def _started(server: Server, workflow: str, value: object) -> str:
    with server.api() as api:
        started = api.post("/api/runs", json={"workflow": workflow, "input": value})
        assert started.status_code == 201, started.text
        return started.json()["run"]["run_id"]


def _wait(server: Server, run_id: str, status: str) -> dict:
    with server.api() as api:
        for _ in range(400):
            detail = api.get(f"/api/runs/{run_id}").json()
            if detail["run"]["status"] == status:
                return detail
            time.sleep(0.05)
    raise AssertionError(f"run {run_id} never reached {status}: {detail['run']}")


def _settled(server: Server) -> None:
    """Until no run of the module's server is pending or running (each may yet ask)."""
    with server.api() as api:
        for _ in range(400):
            runs = api.get("/api/runs").json()["runs"]
            moving = [r["run_id"] for r in runs if r["status"] in ("pending", "running")]
            if not moving:
                return
            time.sleep(0.05)
    raise AssertionError(f"runs never settled: {moving}")


def test_times_are_shown_in_the_viewers_zone_and_say_which(browser, server: Server):
    context = browser.new_context(timezone_id="Asia/Kolkata")  # +05:30 all year
    try:
        page = context.new_page()
        page.goto(server.page_url)
        run_id = _started(server, "failing", 150)
        with server.api() as api:
            created = api.get(f"/api/runs/{run_id}").json()["run"]["created_at"]
        local = datetime.fromtimestamp(_epoch(created), timezone(timedelta(hours=5, minutes=30)))
        row = page.locator(f'tr[data-run="{run_id}"]')
        expect(row).to_be_visible()
        expected = local.strftime("%Y-%m-%d %H:%M:%S") + " UTC+05:30"
        expect(row.locator("td").nth(4)).to_have_text(expected)
    finally:
        context.close()


def _epoch(iso_or_number: str | float) -> float:
    if isinstance(iso_or_number, str):
        return datetime.fromisoformat(iso_or_number).timestamp()
    return float(iso_or_number)


def test_the_inbox_count_drops_as_soon_as_a_request_is_answered(page, server: Server):
    run_id = _started(server, "approval", {"title": "Stool", "amount": 15})
    _wait(server, run_id, "awaiting_input")
    _settled(server)  # no other test's run comes to ask meanwhile: the count is ours to move
    page.clock.install()  # the count's own timer is stopped: only the answer may update it
    page.goto(f"{server.base}/#/inbox")
    page.reload()
    card = page.locator(f'form.request[data-run="{run_id}"]')
    expect(card).to_be_visible()
    page.clock.pause_at(page.evaluate("Date.now()") + 1000)
    badge = page.locator("#inbox-count")
    with server.api() as api:
        waiting = len(api.get("/api/requests").json()["requests"])
    expect(badge).to_have_text(str(waiting))
    card.get_by_text("Edit as JSON").click()
    card.locator(".json-editor textarea").fill(json.dumps({"approved": True, "note": "fine"}))
    send_confirmed(card)
    expect(card.locator(".form-message")).to_contain_text("Answered")
    expect(badge).to_have_text(str(waiting - 1) if waiting > 1 else "")


def test_a_run_taken_up_again_shows_run_started_once_and_its_resumption(page, server: Server):
    run_id = _started(server, "approval", {"title": "Sofa", "amount": 60})
    detail = _wait(server, run_id, "awaiting_input")
    with server.api() as api:  # the answer takes the stored run up again
        request_id = detail["pending_requests"][0]["request_id"]
        answer = {"answer": {"approved": True, "note": "ok"}}
        sent = api.post(f"/api/runs/{run_id}/requests/{request_id}", json=answer)
        assert sent.status_code == 202, sent.text
    _wait(server, run_id, "completed")
    page.goto(f"{server.base}/#/runs/{run_id}")
    notes = page.locator("#timeline ul.notes li")
    expect(notes.filter(has_text="status: completed")).to_have_count(1)
    expect(notes.filter(has_text=re.compile(r"^run started$"))).to_have_count(1)
    resumed = notes.filter(has_text=re.compile("^resumed by "))
    expect(resumed).to_have_count(1)
    expect(resumed).to_contain_text("(was awaiting input)")


def test_each_checkpoint_is_told_apart_from_another_of_its_superstep(page, server: Server):
    run_id = _started(server, "charging", 30)
    _wait(server, run_id, "completed")
    with server.api() as api:
        history = api.get(f"/api/runs/{run_id}/history").json()["checkpoints"]
    supersteps = [c["superstep"] for c in history]
    assert supersteps == [0, 0, 1], supersteps  # the start, the saved step, the barrier
    page.goto(f"{server.base}/#/runs/{run_id}")
    rows = page.locator("#checkpoints tbody tr")
    expect(rows).to_have_count(3)
    shown = rows.evaluate_all(
        "rows => rows.map(r => [...r.cells].slice(0, 2).map(c => c.innerText.trim()).join(' | '))"
    )
    assert len(set(shown)) == 3, shown
    assert "start" in shown[0]
    assert "saved during superstep 1" in shown[1]
    assert "end of superstep 1" in shown[2]
