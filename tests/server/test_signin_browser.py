"""People sign in with a real OpenID Connect provider and the record says who approved.

A real provider (panva's certified ``oidc-provider`` from the npm registry,
installed into ``.tools`` by ``make renderers``; nothing is downloaded at run
time) and a real ``treadle serve`` on 127.0.0.1, driven by Chromium through
Playwright (issue 29, must show 1). The provider's users: ann (groups
finance and ops: an operator here), maria (finance: an approver), bob
(staff: a viewer). ann files an expense that only finance may approve, four
eyes on; she may not approve it herself; bob sees the run and is refused
answering; maria signs in, approves it, and the run's log says she did,
when and through which door.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from collections.abc import Iterator

playwright_api = pytest.importorskip("playwright.sync_api")
expect = playwright_api.expect

HERE = Path(__file__).parent
ROOT = HERE.parents[1]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
PROVIDER = ROOT / ".tools" / "node_modules" / "oidc-provider" / "lib" / "index.js"
TREADLE = str(Path(sys.executable).parent / "treadle")

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


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, list[str]]]:
    assert PROVIDER.exists(), "run `make renderers`: it installs oidc-provider into .tools"
    assert Path(CHROMIUM).exists(), "run `make renderers`: it installs Debian's chromium"
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
    store = tmp_path_factory.mktemp("signin") / "runs.db"
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("TREADLE_")}
    command = [
        TREADLE, "serve", "--store", f"sqlite:///{store}", "--port", str(page_port),
        "--app", "signin_app",
        "--oidc-issuer", f"http://127.0.0.1:{issuer_port}",
        "--oidc-client-id", "treadle",
        "--oidc-role", "approver=group:finance",
        "--oidc-role", "operator=ann",
        "--oidc-scopes", "openid profile groups",
    ]  # fmt: skip
    env = {
        **inherited,
        "PYTHONPATH": str(HERE),
        "TREADLE_OIDC_CLIENT_SECRET": "treadle-test-secret",
    }
    page_server, page_lines = _started(command, "people sign in with", env)
    yield base, page_lines
    _stop(page_server)
    _stop(provider)
    assert "treadle-test-secret" not in "".join(page_lines + provider_lines)


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    with playwright_api.sync_playwright() as p:
        launched = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield launched
        launched.close()


def _signed_in(browser, base: str, user: str):
    """A fresh browser context, signed in as ``user`` through the provider's own forms."""
    context = browser.new_context()
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
    """Call the API from the page with the page's own credential, as its scripts do."""
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


def _pending_request(page, run_id: str) -> str:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        status, detail = _call(page, "GET", f"/api/runs/{run_id}")
        assert status == 200, detail
        if detail.get("pending_requests") or detail.get("requests"):
            pending = detail.get("pending_requests") or detail.get("requests")
            return pending[0]["request_id"]
        time.sleep(0.1)
    raise AssertionError(f"run {run_id} asked nothing: {detail}")


def test_people_sign_in_and_the_record_says_who_approved(servers, browser):
    base, _ = servers
    ann, ann_page = _signed_in(browser, base, "ann")
    status, me = _call(ann_page, "GET", "/api/me")
    assert status == 200
    assert me["actor"] | {"groups": sorted(me["actor"]["groups"])} == {
        "kind": "user", "name": "ann", "label": "ann", "door": "page",
        "role": "operator", "groups": ["finance", "ops"],
    }  # fmt: skip
    status, started = _call(
        ann_page,
        "POST",
        "/api/runs",
        {"workflow": "signed_expense", "input": {"title": "Laptop", "cents": 120000}},
    )
    assert status == 201, started
    run_id = started["run"]["run_id"]
    request_id = _pending_request(ann_page, run_id)
    answer_path = f"/api/runs/{run_id}/requests/{request_id}"

    status, refused = _call(ann_page, "POST", answer_path, {"answer": {"approved": True}})
    assert status == 403, refused
    assert "four eyes" in refused["error"]["message"]

    bob, bob_page = _signed_in(browser, base, "bob")
    status, seen = _call(bob_page, "GET", f"/api/runs/{run_id}")
    assert status == 200, seen
    status, refused = _call(bob_page, "POST", answer_path, {"answer": {"approved": True}})
    assert status == 403, refused
    assert "bob is a viewer" in refused["error"]["message"]
    assert "approver" in refused["error"]["message"]
    bob.close()

    maria, maria_page = _signed_in(browser, base, "maria")
    status, answered = _call(maria_page, "POST", answer_path, {"answer": {"approved": True}})
    assert status == 202, answered
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        status, detail = _call(maria_page, "GET", f"/api/runs/{run_id}")
        if detail["run"]["status"] == "completed":
            break
        time.sleep(0.1)
    assert detail["run"]["status"] == "completed", detail
    assert json.loads(detail["run"]["started_by"])["label"] == "ann"
    log = maria_page.evaluate(
        """async (path) => {
            const token = document.querySelector('meta[name="treadle-token"]').content;
            const response = await fetch(path, {headers: {Authorization: `Bearer ${token}`}});
            return await response.text();  // the run has ended: the stream ends with it
        }""",
        f"/api/runs/{run_id}/events",
    )
    answered = [
        json.loads(line.removeprefix("data: "))
        for line in log.splitlines()
        if line.startswith("data: ") and "request_answered" in line
    ]
    assert len(answered) == 1, log
    data = answered[0]["data"]
    assert data["actor"]["label"] == "maria", data
    assert data["actor"]["door"] == "page", data
    assert data["answer"] == {"approved": True}, data
    ann.close()
    maria.close()
