"""Answer links over HTTP against a real ``treadle serve`` (issue 29, must show 5).

A link made by ``treadle links create RUN REQUEST --for maria`` is its own
credential: ``GET /answer/<token>`` shows the question (the page's
document, or asked for JSON the request with its answer's schema) and
``POST`` answers it once, as ``maria`` through the door ``link``, without
the server's token. Refused, each with nothing changed (the run still
waits, or keeps the one answer; the link still usable where it was
unused): a second use, an expired link, a tampered link, and a link
opened by someone signed in as another person (here a named token of
``bob``).
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from typing import TYPE_CHECKING

import pytest

from cli.treadle_cli import Cli
from server.conftest import ServeProcess
from treadle._operations._webhooks import outbox_of
from treadle._stores._answer_links import AnswerLink, link_token, new_nonce
from treadle.stores import SqliteStore

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.integration

YES = {"approved": True, "note": "fine"}
JSON = {"Accept": "application/json"}


def treadle(serve: ServeProcess, *args: str) -> str:
    return serve.cli(*args)


@pytest.fixture
def serve(tmp_path):
    serve = ServeProcess(tmp_path, str(tmp_path / "runs.sqlite")).start()
    serve.ready()
    yield serve
    serve.stop()


def asking(serve: ServeProcess, run_id: str) -> str:
    """Start an approval run through the API; the id of the request it waits on."""
    with serve.client(headers=serve.auth) as client:
        started = client.post(
            "/api/runs",
            json={
                "workflow": "approval",
                "input": {"topic": "links", "words": 3},
                "run_id": run_id,
            },
        )
        assert started.status_code == 201, started.text
        for _ in range(500):
            detail = client.get(f"/api/runs/{run_id}").json()
            if detail["pending_requests"]:
                return str(detail["pending_requests"][0]["request_id"])
            time.sleep(0.02)
    raise AssertionError("the run never asked")


def link(serve: ServeProcess, run_id: str, request_id: str, who: str, expires: str = "2h") -> str:
    shown = treadle(
        serve,
        "links",
        "create",
        run_id,
        request_id,
        "--for",
        who,
        "--expires",
        expires,
        "--base-url",
        serve.base,
    )
    address = shown.strip().splitlines()[-1]
    assert address.startswith(f"{serve.base}/answer/"), shown
    return address.removeprefix(serve.base)


def state(serve: ServeProcess, run_id: str) -> tuple[str, list[dict]]:
    """The run's status and its log's answers: what a refused link must leave as it was."""
    return asyncio.run(_state(serve.cwd / "runs.sqlite", run_id))


async def _state(path: Path, run_id: str) -> tuple[str, list[dict]]:
    store = SqliteStore(path)
    try:
        status = (await store.get_run(run_id)).status
        events = await store.read_events(run_id)
    finally:
        await store.close()
    return status, [e.data for e in events if e.kind == "request_answered"]


def wait_for_status(serve: ServeProcess, run_id: str, status: str) -> None:
    for _ in range(500):
        if state(serve, run_id)[0] == status:
            return
        time.sleep(0.02)
    raise AssertionError(f"{run_id} never became {status}: {state(serve, run_id)}")


def test_a_link_shows_its_question_and_answers_once_as_its_principal(serve):
    request_id = asking(serve, "r1")
    path = link(serve, "r1", request_id, "maria")
    with serve.client() as client:  # no token: the link is the credential
        page = client.get(path)
        assert page.status_code == 200, page.text
        assert "/answer/static/answer.js" in page.text
        script = client.get("/answer/static/answer.js")  # its files too: no token needed
        assert script.status_code == 200, script.text
        shown = client.get(path, headers=JSON)
        assert shown.status_code == 200, shown.text
        question = shown.json()
        assert question["link"]["principal"] == "maria"
        assert question["request"]["request_id"] == request_id
        assert question["request"]["payload"] == {"text": "3 words about links"}
        assert "approved" in question["request"]["answer_schema"]["properties"]
        answered = client.post(path, json={"answer": YES})
        assert answered.status_code == 202, answered.text
        assert answered.json()["answered_as"] == "maria"
    wait_for_status(serve, "r1", "completed")
    status, answers = state(serve, "r1")
    (data,) = answers
    assert (data["actor"]["kind"], data["actor"]["name"], data["actor"]["door"]) == (
        "link",
        "maria",
        "link",
    )
    with serve.client() as client:  # a second use: refused, naming the first
        again = client.post(path, json={"answer": {"approved": False, "note": "no"}})
        assert again.status_code == 409, again.text
        assert "used already, by maria" in again.json()["error"]["message"]
        assert client.get(path, headers=JSON).status_code == 409
    assert state(serve, "r1") == (status, answers)


def test_tampered_expired_and_another_persons_links_are_refused_changing_nothing(serve):
    request_id = asking(serve, "r2")
    before = state(serve, "r2")
    assert before == ("awaiting_input", [])
    path = link(serve, "r2", request_id, "maria")
    payload, _, signature = path.removeprefix("/answer/").partition(".")
    forged = json.loads(_unb64(payload)) | {"p": "mallory"}
    tampered = f"/answer/{_b64(json.dumps(forged).encode())}.{signature}"
    expired = link(serve, "r2", request_id, "maria", expires="1s")
    bob = treadle(serve, "tokens", "create", "bob", "--role", "approver").strip().splitlines()[-1]
    time.sleep(1.2)  # the 1 s link runs out
    # Characters base64 skips, put into the signature: still the signature decoded, but
    # not the link made (it was taken as one).
    padded = f"/answer/{payload}.{signature[:5]}!!{signature[5:]}"
    with serve.client() as client:
        for changed in (tampered, padded):
            refused = client.post(changed, json={"answer": YES})
            assert refused.status_code == 404, refused.text
            assert "not valid" in refused.json()["error"]["message"]
        refused = client.post(expired, json={"answer": YES})
        assert refused.status_code == 410, refused.text
        assert "expired" in refused.json()["error"]["message"]
        refused = client.post(
            path, json={"answer": YES}, headers={"Authorization": f"Bearer {bob}"}
        )
        assert refused.status_code == 403, refused.text
        assert refused.json()["error"]["message"] == (
            "this answer link is maria's; you are signed in as bob"
        )
        assert (
            client.get(path, headers={**JSON, "Authorization": f"Bearer {bob}"}).status_code == 403
        )
    assert state(serve, "r2") == before  # nothing changed
    with serve.client() as client:  # and maria's link is still hers to use
        assert client.post(path, json={"answer": YES}).status_code == 202


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def test_an_admin_makes_a_link_through_the_api(serve):
    request_id = asking(serve, "r3")
    with serve.client(headers=serve.auth) as client:
        made = client.post(
            f"/api/runs/r3/requests/{request_id}/links",
            json={"for": "maria", "expires_in": 3600, "groups": ["finance"]},
        )
        assert made.status_code == 201, made.text
        shown = made.json()
        assert shown["link"]["principal"] == "maria"
        assert shown["link"]["groups"] == ["finance"]
        assert shown["url"].startswith(f"{serve.base}/answer/")
        unknown = client.post("/api/runs/r3/requests/no-such-request/links", json={"for": "maria"})
        assert unknown.status_code == 404, unknown.text
    with serve.client() as client:
        answered = client.post(shown["url"], json={"answer": YES})
        assert answered.status_code == 202, answered.text
    wait_for_status(serve, "r3", "completed")


def test_a_link_for_no_one_is_refused_where_it_is_made(serve):
    # A link for " \t " answered (202) and recorded the decision by a blank actor; one for
    # "" (a webhook's --for '') was made, and its answer was a 500.
    request_id = asking(serve, "r5")
    mine = {k: v for k, v in serve.env.items() if k.startswith("TREADLE_") or k == "PYTHONPATH"}
    cli = Cli(serve.cwd, **mine)
    with serve.client(headers=serve.auth) as client:
        for body, problem in (
            ({"for": " \t "}, "for: a name, not ' \\t '"),
            ({"for": " maria"}, "for: ' maria' starts or ends with a space"),
            ({"for": "ma\x07ria"}, "for: 'ma\\x07ria' holds a control character"),
            ({"for": "maria", "groups": [" "]}, "groups: a name, not ' '"),
            ({"for": "maria", "groups": ["g" * 100_000]}, "groups: a name of at most 200"),
        ):
            made = client.post(f"/api/runs/r5/requests/{request_id}/links", json=body)
            assert made.status_code == 400, made.text
            assert made.json()["error"]["message"].startswith(problem), made.text
    for who in ("", "   "):
        made = cli("links", "create", "r5", request_id, "--for", who)
        assert made.returncode == 2, made.stdout
        assert made.stderr.strip() == f"error: --for: a name, not {who!r}"
    hook = cli("webhooks", "add", "http://127.0.0.1:9/x", "--for", "", "--base-url", serve.base)
    assert hook.returncode == 2, hook.stdout
    assert hook.stderr.strip() == "error: --for: a name, not ''"
    grouped = cli("links", "create", "r5", request_id, "--for", "maria", "--group", "")
    assert grouped.returncode == 2, grouped.stdout
    assert grouped.stderr.strip() == "error: --group: a name, not ''"
    # A link for no one made before the rule (a webhook's --for '' made them) is refused when
    # used, nothing changed: its use was a 500.
    blank = asyncio.run(_blank_link(serve.cwd / "runs.sqlite", "r5", request_id))
    with serve.client() as client:
        used = client.post(f"/answer/{blank}", json={"answer": YES})
        assert used.status_code == 404, used.text
        assert "names no one" in used.json()["error"]["message"]
    assert state(serve, "r5") == ("awaiting_input", [])
    assert "Traceback" not in "".join(d.stderr for d in (hook, grouped))


async def _blank_link(path: Path, run_id: str, request_id: str) -> str:
    store = SqliteStore(path)
    try:
        outbox = outbox_of(store)
        now = time.time()
        made = AnswerLink(new_nonce(), run_id, request_id, "", now + 600, now, "admin")
        await outbox.add_link(made)
        return link_token(made, await outbox.link_key())
    finally:
        await store.close()
