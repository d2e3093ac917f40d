"""People sign in with a real OpenID Connect provider and the record says who approved.

A real provider (panva's certified ``oidc-provider`` from the npm registry,
installed into ``.tools`` by ``make renderers``; nothing is downloaded at run
time) and a real ``treadle serve`` on 127.0.0.1, driven by Chromium through
Playwright (issue 29, must show 1). The provider's users: ann (groups
finance and ops: an operator here), maria (finance: an approver), bob
(staff: a viewer). Everything is done through the page, as a person would:
ann files an expense that only finance may approve, four eyes on, and a
purchase only ops may approve; her own expense's decision button, once
confirmed, is refused naming four eyes; bob sees the run and is refused
answering, the page saying who may; maria's inbox shows the expense and not
the purchase; she presses Yes, confirms, and the run's timeline then says
"maria approved at HH:MM (page)", as its log records it.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import subprocess
import sys
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

import pytest

from browsers import CHROMIUM, CHROMIUM_MISSING

if TYPE_CHECKING:
    from collections.abc import Iterator

playwright_api = pytest.importorskip("playwright.sync_api")
expect = playwright_api.expect

HERE = Path(__file__).parent
ROOT = HERE.parents[1]
PROVIDER = ROOT / ".tools" / "node_modules" / "oidc-provider" / "lib" / "index.js"
TREADLE = str(Path(sys.executable).parent / "treadle")
# The workflows signed-in people answer (tests/apps/approvals.py): finance's, four eyes, and ops'.
SIGNED = ("approvals:expense", "approvals:ops_purchase")
# The browser's clock: the timeline's "at HH:MM" is in it, not in the machine's zone.
ZONE = "America/New_York"

pytestmark = [pytest.mark.integration]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _started(command: list[str], ready: str, env: dict[str, str] | None = None):
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    )
    lines: list[str] = []
    seen = threading.Event()

    def drain() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line)
            if ready in line:
                seen.set()
        seen.set()

    threading.Thread(target=drain, daemon=True).start()
    assert seen.wait(30), "".join(lines)
    assert process.poll() is None, "".join(lines)
    return process, lines


def _stop(process: subprocess.Popen[str]) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)
    if process.stdout is not None:
        process.stdout.close()


@contextlib.contextmanager
def signing_in(store: Path, *apps: str) -> Iterator[tuple[str, list[str]]]:
    """The provider and a ``treadle serve`` of ``apps`` on ``store`` that people sign in to.

    Yields the server's base URL and the lines it printed; checks on the way
    out that neither process printed the client's secret.
    """
    assert PROVIDER.exists(), "run `make renderers`: it installs oidc-provider into .tools"
    assert Path(CHROMIUM).exists(), CHROMIUM_MISSING
    issuer_port, page_port = _free_port(), _free_port()
    base = f"http://127.0.0.1:{page_port}"
    provider, provider_lines = _started(
        [
            "node",
            str(HERE / "oidc_provider.mjs"),
            str(issuer_port),
            f"{base}/auth/callback",
            PROVIDER.as_uri(),
        ],
        "oidc-provider ready",
    )
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("TREADLE_")}
    command = [
        TREADLE, "serve", "--store", f"sqlite:///{store}", "--port", str(page_port),
        *(option for app in apps for option in ("--app", app)),
        "--oidc-issuer", f"http://127.0.0.1:{issuer_port}",
        "--oidc-client-id", "treadle",
        "--oidc-role", "approver=group:finance",
        "--oidc-role", "operator=ann",
        "--oidc-scopes", "openid profile groups",
    ]  # fmt: skip
    env = {
        **inherited,
        "PYTHONPATH": os.pathsep.join([str(HERE), str(HERE.parent / "apps")]),
        "TREADLE_OIDC_CLIENT_SECRET": "treadle-test-secret",
    }
    page_server, page_lines = _started(command, "people sign in with", env)
    try:
        yield base, page_lines
    finally:
        _stop(page_server)
        _stop(provider)
    assert "treadle-test-secret" not in "".join(page_lines + provider_lines)


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, list[str]]]:
    with signing_in(tmp_path_factory.mktemp("signin") / "runs.db", *SIGNED) as served:
        yield served


def _signed_in(browser, base: str, user: str):
    """A fresh browser context, signed in as ``user`` through the provider's own forms."""
    context = browser.new_context(timezone_id=ZONE)
    context.set_default_timeout(15_000)
    page = context.new_page()
    page.goto(base + "/")  # no session: the page sends the browser to the provider
    page.locator("input[name=login]").fill(user)
    page.locator("input[name=password]").fill("any password")
    page.locator("button[type=submit]").click()
    page.get_by_role("button", name=re.compile("Continue", re.IGNORECASE)).click()  # consent
    expect(page).to_have_url(re.compile(re.escape(base) + r"/(#/runs)?$"))
    expect(page.locator("#who")).to_contain_text(user)
    return context, page


def _call(page, method: str, path: str, body: object = None) -> tuple[int, dict]:
    """Read the API from the page with the page's own credential, as its scripts do."""
    return tuple(
        page.evaluate(
            """async ([method, path, body]) => {
                const token = document.querySelector('meta[name="treadle-token"]').content;
                const init = {method, headers: {Authorization: `Bearer ${token}`,
                              "Content-Type": "application/json"}};
                if (body !== null) init.body = JSON.stringify(body);
                const response = await fetch(path, init);
                const text = await response.text();
                return [response.status, text ? JSON.parse(text) : {}];
            }""",
            [method, path, body],
        )
    )


def _start(page, base: str, workflow: str, run_id: str) -> None:
    """Start a run with the page's Start form, and wait on its page until it asks."""
    page.goto(f"{base}/#/start?workflow={workflow}")
    page.get_by_label("Title", exact=True).fill("Laptop")
    page.get_by_label("Cents", exact=True).fill("120000")
    page.get_by_label("Run id (optional)").fill(run_id)
    page.get_by_role("button", name="Start run").click()
    expect(page).to_have_url(re.compile(re.escape(f"#/runs/{run_id}") + "$"))
    expect(_card(page, run_id)).to_be_visible()


def _card(page, run_id: str):
    return page.locator(f"form.request[data-run='{run_id}']")


def _decide(card, choice: str):
    """Press the decision's button, "Send answer", then the confirmation's "Confirm and send"."""
    card.get_by_role("button", name=choice, exact=True).click()
    card.get_by_role("button", name="Send answer").click()
    confirmation = card.get_by_role("group", name="Confirm the answer")
    expect(confirmation).to_contain_text(f"You decide Approved: {choice}.")
    confirmation.get_by_role("button", name="Confirm and send").click()
    return card.locator(".form-message")


def _inbox(page, base: str):
    """The page's inbox once loaded: its cards."""
    page.goto(f"{base}/#/inbox")
    expect(page.get_by_role("heading", name="Inbox")).to_be_visible()
    cards = page.locator("form.request")
    page.wait_for_function(
        """() => document.querySelector("form.request")
                 || !document.querySelector("main p.muted[hidden]")"""
    )  # a card, or "Nothing is waiting" shown: the list has loaded
    return cards


def _answered_events(page, run_id: str) -> list[dict]:
    log = page.evaluate(
        """async (path) => {
            const token = document.querySelector('meta[name="treadle-token"]').content;
            const response = await fetch(path, {headers: {Authorization: `Bearer ${token}`}});
            return await response.text();  // the run has ended: the stream ends with it
        }""",
        f"/api/runs/{run_id}/events",
    )
    return [
        json.loads(line.removeprefix("data: "))
        for line in log.splitlines()
        if line.startswith("data: ") and "request_answered" in line
    ]


def _clock(at: str | float) -> str:
    """An event's time as the page's timeline says it (HH:MM in the browser's zone)."""
    moment = (
        datetime.fromtimestamp(at, UTC)
        if isinstance(at, int | float)
        else datetime.fromisoformat(at)
    )
    return moment.astimezone(ZoneInfo(ZONE)).strftime("%H:%M")


def test_people_sign_in_and_the_record_says_who_approved(servers, browser):
    base, _ = servers
    ann, ann_page = _signed_in(browser, base, "ann")
    status, me = _call(ann_page, "GET", "/api/me")
    assert status == 200
    assert me["actor"] | {"groups": sorted(me["actor"]["groups"])} == {
        "kind": "user", "name": "ann", "label": "ann", "door": "page",
        "role": "operator", "groups": ["finance", "ops"],
    }  # fmt: skip
    _start(ann_page, base, "ops_purchase", "purchase-1")  # addressed to ops, not to maria
    _start(ann_page, base, "signed_expense", "expense-1")  # to finance, four eyes

    # ann filed it: four eyes refuse her, through the page, and the run still waits.
    refused = _decide(_card(ann_page, "expense-1"), "Yes")
    expect(refused).to_contain_text("ann started this run, and its requests need four eyes")
    expect(refused).to_contain_text("someone else")
    expect(_card(ann_page, "expense-1")).not_to_have_class(re.compile("answered"))
    # Her inbox: the purchase (she is in ops), not her own expense.
    cards = _inbox(ann_page, base)
    expect(cards).to_have_count(1)
    expect(cards).to_have_attribute("data-run", "purchase-1")

    # bob, a viewer, sees the run and its question; his answer is refused naming who may.
    bob, bob_page = _signed_in(browser, base, "bob")
    bob_page.goto(f"{base}/#/runs/expense-1")
    expect(bob_page.get_by_role("heading", name=re.compile("expense-1"))).to_be_visible()
    refused = _decide(_card(bob_page, "expense-1"), "Yes")
    expect(refused).to_contain_text("bob is a viewer")
    expect(refused).to_contain_text("approver")
    expect(_inbox(bob_page, base)).to_have_count(0)  # nothing is his to answer
    bob.close()

    # maria (finance): her inbox holds the expense, not the purchase addressed to ops.
    maria, maria_page = _signed_in(browser, base, "maria")
    cards = _inbox(maria_page, base)
    expect(cards).to_have_count(1)
    expect(cards).to_have_attribute("data-run", "expense-1")
    done = _decide(cards, "Yes")
    expect(done).to_contain_text("Answered. The run goes on.")

    # The run's page says who approved, when and through which door.
    maria_page.goto(f"{base}/#/runs/expense-1")
    expect(maria_page.locator("main")).to_contain_text("completed")
    status, detail = _call(maria_page, "GET", "/api/runs/expense-1")
    assert detail["run"]["status"] == "completed", detail
    assert detail["run"]["started_by"]["label"] == "ann"
    (answered,) = _answered_events(maria_page, "expense-1")
    data = answered["data"]
    assert data["actor"]["label"] == "maria", data
    assert data["actor"]["door"] == "page", data
    assert data["answer"] == {"approved": True}, data
    said = f"maria approved at {_clock(answered['at'])} (page)"
    timeline = maria_page.locator(".timeline")
    expect(timeline).to_contain_text(said)
    expect(timeline).to_contain_text(re.compile(r"ann started the run at \d\d:\d\d \(page\)"))
    # The purchase still waits for ops: maria's answer went to her request only.
    status, purchase = _call(maria_page, "GET", "/api/runs/purchase-1")
    assert purchase["run"]["status"] == "awaiting_input", purchase
    ann.close()
    maria.close()
