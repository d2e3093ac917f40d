"""Accountable approvals, attacked through the server's doors (in process, SQLite).

A fork inherits the requests its checkpoint waits on: an admin can make an
answer link for one, and it answers once as its person; an answer of
someone the request does not name is refused through every door.
"""

from __future__ import annotations

import pytest

from server.conftest import serving
from server.inbox_app import inbox
from treadle import RunStatus
from treadle._stores._tokens import token_hash
from treadle._values._actors import Actor, Role
from treadle.errors import ActionRefusedError
from treadle.stores import SqliteStore

MARIA = {"Authorization": "Bearer tdl_maria-secret-0123456789"}
BOB = {"Authorization": "Bearer tdl_bob-secret-0123456789"}


async def _tokens(api) -> None:
    for name, header in (("maria", MARIA), ("bob", BOB)):
        secret = header["Authorization"].removeprefix("Bearer ")
        await api.store.add_token(name, "approver", token_hash(secret), created_by="test")


async def _fork_asking_maria(api) -> tuple[str, str]:
    """A run asking maria, forked at its resting checkpoint: (the fork's id, its request)."""
    body = {"workflow": "inbox", "input": {"approvers": ["maria"]}, "run_id": "parent"}
    assert (await api.post("/api/runs", json=body)).status_code == 201
    detail = await api.wait_for("parent", {"awaiting_input"})
    (request,) = detail["pending_requests"]
    forked = await api.post(
        "/api/runs/parent/fork", json={"checkpoint_id": detail["run"]["checkpoint_id"]}
    )
    assert forked.status_code == 201, forked.text
    return forked.json()["run"]["run_id"], request["request_id"]


async def test_a_link_is_made_for_a_forks_request_and_answers_it_once_as_its_person(sqlite_url):
    async with serving(sqlite_url, apps=("inbox_app",)) as api:
        await _tokens(api)
        fork_id, request_id = await _fork_asking_maria(api)
        listed = await api.get("/api/requests", headers=MARIA)
        assert {r["run_id"] for r in listed.json()["requests"]} == {"parent", fork_id}
        made = await api.post(
            f"/api/runs/{fork_id}/requests/{request_id}/links", json={"for": "maria"}
        )
        assert made.status_code == 201, made.text
        path = made.json()["url"].removeprefix("http://testserver")
        answered = await api.post(path, json={"answer": {"approve": True}}, headers={})
        assert answered.status_code == 202, answered.text
        done = await api.wait_for(fork_id, {"completed"})
        assert done["outputs"] == [True]
        again = await api.post(path, json={"answer": {"approve": False}}, headers={})
        assert again.status_code == 409, again.text


async def test_a_non_approver_is_refused_a_forks_request_by_the_api(sqlite_url):
    async with serving(sqlite_url, apps=("inbox_app",)) as api:
        await _tokens(api)
        fork_id, request_id = await _fork_asking_maria(api)
        path = f"/api/runs/{fork_id}/requests/{request_id}"
        refused = await api.post(path, json={"answer": {"approve": True}}, headers=BOB)
        assert refused.status_code == 403, refused.text
        assert "only maria may" in refused.text
        assert [e.action for e in await api.store.read_audit(fork_id)] == ["run_forked"]
        assert (
            await api.post(path, json={"answer": {"approve": True}}, headers=MARIA)
        ).status_code == 202


async def test_a_link_of_a_deleted_run_does_not_answer_a_new_run_of_the_same_id(sqlite_url):
    # Request ids are unique within a run only: a new run under a deleted run's id asks the
    # same request id again. The link was made for the deleted run's question.
    async with serving(sqlite_url, apps=("inbox_app",)) as api:
        body = {"workflow": "inbox", "input": {"approvers": ["maria"]}, "run_id": "invoice-1"}
        assert (await api.post("/api/runs", json=body)).status_code == 201
        (request,) = (await api.wait_for("invoice-1", {"awaiting_input"}))["pending_requests"]
        made = await api.post(
            f"/api/runs/invoice-1/requests/{request['request_id']}/links", json={"for": "maria"}
        )
        assert made.status_code == 201, made.text
        path = made.json()["url"].removeprefix("http://testserver")
        assert (await api.post("/api/runs/invoice-1/cancel")).status_code == 200
        assert (await api.delete("/api/runs/invoice-1")).status_code == 204
        body["input"] = {"approvers": ["maria"], "four_eyes": False, "amount": 100_000}
        assert (await api.post("/api/runs", json=body)).status_code == 201
        (again,) = (await api.wait_for("invoice-1", {"awaiting_input"}))["pending_requests"]
        assert again["request_id"] == request["request_id"]  # the same id, another question
        shown = await api.get(path, headers={"Accept": "application/json"})
        used = await api.post(path, json={"answer": {"approve": True}}, headers={})
        assert (shown.status_code, used.status_code) == (404, 404), (shown.text, used.text)
        assert await api.store.answer_of("invoice-1", again["request_id"]) is None


@pytest.mark.parametrize(
    ("starter", "answerer", "refused"),
    [
        (("user", "ann@example.com"), "ann@partner.org", False),  # two people, one mailbox name
        (("user", "ann@example.com"), "ann@example.com", True),
        (("user", "ann"), "ann", True),
        (("cli", "ann@box"), "ann", True),  # the OS user ann on box
        (("cli", "ann@box"), "ann@example.com", True),  # all the CLI says is "ann": refused
        (("cli", "ann@box"), "bob@example.com", False),
    ],
)
async def test_four_eyes_tells_people_named_by_mail_address_apart(
    tmp_path, starter, answerer, refused
):
    # username_claim = "email" is what docs/server.md advises where people choose their
    # preferred_username: the name is the whole address, not a user at a host. Four eyes
    # refused ann@partner.org's answer to a run ann@example.com started.
    kind, name = starter
    door = "page" if kind == "user" else kind
    store = SqliteStore(tmp_path / "runs.sqlite")
    try:
        asked = await inbox.run(
            {"four_eyes": True},
            store=store,
            run_id="r",
            actor=Actor(kind, name, door, Role.OPERATOR),
        )
        (request,) = asked.pending_requests
        who = Actor("user", answerer, "page", Role.APPROVER)
        answer = {request.request_id: {"approve": True}}
        if refused:
            with pytest.raises(ActionRefusedError, match="need four eyes"):
                await inbox.respond("r", answer, store=store, actor=who)
        else:
            done = await inbox.respond("r", answer, store=store, actor=who)
            assert done.status is RunStatus.COMPLETED
    finally:
        await store.close()


async def test_a_link_for_the_runs_starter_is_refused_four_eyes_and_stays_unused(sqlite_url):
    async with serving(sqlite_url, apps=("inbox_app",)) as api:
        ann = {"Authorization": "Bearer tdl_ann-secret-0123456789"}
        secret = ann["Authorization"].removeprefix("Bearer ")
        await api.store.add_token("ann", "operator", token_hash(secret), created_by="test")
        body = {"workflow": "inbox", "input": {"four_eyes": True}, "run_id": "r"}
        assert (await api.post("/api/runs", json=body, headers=ann)).status_code == 201
        (request,) = (await api.wait_for("r", {"awaiting_input"}))["pending_requests"]
        links = f"/api/runs/r/requests/{request['request_id']}/links"
        made = (await api.post(links, json={"for": "ann"})).json()["url"]
        path = made.removeprefix("http://testserver")
        before = [e.action for e in await api.store.read_audit("r")]
        refused = await api.post(path, json={"answer": {"approve": True}}, headers={})
        assert refused.status_code == 403, refused.text
        assert "four eyes" in refused.text
        assert [e.action for e in await api.store.read_audit("r")] == before
        shown = await api.get(path, headers={"Accept": "application/json"})
        assert shown.status_code == 200, shown.text  # unused: still ann's to open
        # An approver answers through the API meanwhile: the link is told who won.
        await _tokens(api)
        answer = f"/api/runs/r/requests/{request['request_id']}"
        won = await api.post(answer, json={"answer": {"approve": False}}, headers=MARIA)
        assert won.status_code == 202, won.text
        lost = await api.post(path, json={"answer": {"approve": True}}, headers={})
        assert lost.status_code == 409, lost.text
        assert "token:maria (api)" in lost.text
        answered = [e for e in await api.store.read_audit("r") if e.action == "request_answered"]
        assert [(e.actor["label"], e.door) for e in answered] == [("token:maria", "api")]
        done = await api.wait_for("r", {"completed"})
        assert done["outputs"] == [False]


async def test_an_answer_after_a_cancel_is_refused_and_a_links_use_is_given_back(sqlite_url):
    async with serving(sqlite_url, apps=("inbox_app",)) as api:
        await _tokens(api)
        body = {"workflow": "inbox", "input": {"approvers": ["maria"]}, "run_id": "r"}
        assert (await api.post("/api/runs", json=body)).status_code == 201
        (request,) = (await api.wait_for("r", {"awaiting_input"}))["pending_requests"]
        links = f"/api/runs/r/requests/{request['request_id']}/links"
        path = (await api.post(links, json={"for": "maria"})).json()["url"][
            len("http://testserver") :
        ]
        assert (await api.post("/api/runs/r/cancel")).status_code == 200
        before = [e.action for e in await api.store.read_audit("r")]
        answer = f"/api/runs/r/requests/{request['request_id']}"
        by_api = await api.post(answer, json={"answer": {"approve": True}}, headers=MARIA)
        by_link = await api.post(path, json={"answer": {"approve": True}}, headers={})
        assert (by_api.status_code, by_link.status_code) == (409, 409), (by_api.text, by_link.text)
        assert [e.action for e in await api.store.read_audit("r")] == before
        assert (await api.store.answer_of("r", request["request_id"])) is None
