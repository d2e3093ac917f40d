"""Signed single-use answer links (issue 29, must show 5), on a real SQLite file and PostgreSQL.

A link answers one request once, as one principal, before its expiry: a
tampered token, an expired link, a second use and a use by someone signed
in as another principal are each refused, and the run is left as it was
(its request still pending, or the first answer the only one).
"""

from __future__ import annotations

import asyncio
import base64
import json
import sys
from pathlib import Path

import pytest

from postgres import drop_schemas, fresh_schema, postgres_dsn
from treadle._operations._links import (
    answer_by_link,
    create_link,
    link_actor,
    open_link,
)
from treadle._stores._answer_links import link_nonce
from treadle.errors import LinkRefusedError
from treadle.stores import PostgresStore, SqliteStore

sys.path.insert(0, str(Path(__file__).parents[1] / "server"))
from server_app import Brief, approval

from apps.approvals import Expense, expense
from treadle.errors import ActionRefusedError, RunNotFoundError, UnknownRequestError

YES = {"approved": True, "note": "fine"}
NO = {"approved": False, "note": "no"}


@pytest.fixture(params=["sqlite", "postgres"])
async def store(request, tmp_path):
    if request.param == "sqlite":
        chosen = SqliteStore(tmp_path / "links.sqlite")
        yield chosen
        await chosen.close()
        return
    schema = fresh_schema()
    chosen = PostgresStore(postgres_dsn(), schema=schema)
    try:
        yield chosen
    finally:
        await chosen.close()
        await drop_schemas([schema])


async def _asking(store, run_id: str) -> str:
    result = await approval.run(Brief("expenses", 3), store=store, run_id=run_id)
    (pending,) = result.pending_requests
    return pending.request_id


def _deliver(store):
    async def deliver(link, value):
        await approval.respond(
            link.run_id, {link.request_id: value}, store=store, actor=link_actor(link), wait=True
        )

    return deliver


async def test_a_link_answers_once_as_its_principal(store):
    request_id = await _asking(store, "r1")
    token, _ = await create_link(
        store, "r1", request_id, "maria", expires_in=3600, created_by="cli:test"
    )
    link = await answer_by_link(store, token, YES, _deliver(store))
    assert link.principal == "maria"
    record = await store.get_run("r1")
    assert record.status == "completed"
    with pytest.raises(LinkRefusedError, match="used already, by maria"):
        await answer_by_link(store, token, NO, _deliver(store))
    events = await store.read_events("r1")
    assert [e.data["value"] for e in events if e.kind == "output"] == [
        {"text": "3 words about expenses", "approved": True, "note": "fine"}
    ]


@pytest.mark.parametrize("how", ["tampered", "expired", "another principal"])
async def test_a_refused_link_changes_nothing(store, how):
    request_id = await _asking(store, "r2")
    lifetime = 0.01 if how == "expired" else 3600
    token, _ = await create_link(
        store, "r2", request_id, "maria", expires_in=lifetime, created_by="cli:test"
    )
    signed_in = None
    if how == "tampered":  # the payload names bob instead of maria; the signature is maria's
        payload, _, signature = token.partition(".")
        body = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        body["p"] = "bob"
        forged = base64.urlsafe_b64encode(json.dumps(body).encode()).decode().rstrip("=")
        token = f"{forged}.{signature}"
    elif how == "expired":
        await asyncio.sleep(0.05)
    else:
        signed_in = "bob"
    before = await store.read_events("r2")
    with pytest.raises(LinkRefusedError) as refused:
        await answer_by_link(store, token, YES, _deliver(store), signed_in=signed_in)
    expected = {
        "tampered": "not valid",
        "expired": "expired at",
        "another principal": "maria's; you are signed in as bob",
    }[how]
    assert expected in str(refused.value)
    assert (await store.get_run("r2")).status == "awaiting_input"
    assert await store.read_events("r2") == before
    if how != "tampered":  # the link itself is not spent by a refusal
        link = await store.outbox().link(await _nonce(store, token))
        assert link is not None
        assert link.used_at is None


async def _nonce(store, token):
    return link_nonce(token, await store.outbox().link_key())


async def test_an_answer_that_does_not_fit_gives_the_use_back(store):
    request_id = await _asking(store, "r3")
    token, _ = await create_link(
        store, "r3", request_id, "maria", expires_in=3600, created_by="cli:test"
    )
    with pytest.raises(Exception, match="approved"):
        await answer_by_link(store, token, {"note": "no verdict"}, _deliver(store))
    assert (await open_link(store, token)).used_at is None
    await answer_by_link(store, token, YES, _deliver(store))
    assert (await store.get_run("r3")).status == "completed"


async def test_a_link_answers_with_the_groups_it_was_made_with(store):
    """A request only finance may answer: a link for maria answers it only if made as finance's.

    The groups are signed into the link; a link made without them is
    refused by the door (naming who may) and left unused.
    """
    result = await expense.run(Expense(title="Desk", cents=9000), store=store, run_id="r4")
    (pending,) = result.pending_requests
    bare, _ = await create_link(
        store, "r4", pending.request_id, "maria", expires_in=3600, created_by="cli:test"
    )
    with pytest.raises(ActionRefusedError, match="group:finance"):
        await answer_by_link(store, bare, {"approved": True}, _deliver_expense(store))
    assert (await open_link(store, bare)).used_at is None  # not spent by the refusal
    assert (await store.get_run("r4")).status == "awaiting_input"
    token, _ = await create_link(
        store,
        "r4",
        pending.request_id,
        "maria",
        expires_in=3600,
        created_by="cli:test",
        groups=("finance",),
    )
    link = await answer_by_link(store, token, {"approved": True}, _deliver_expense(store))
    assert link.groups == ("finance",)
    assert (await store.get_run("r4")).status == "completed"


def _deliver_expense(store):
    async def deliver(link, value):
        await expense.respond(
            link.run_id, {link.request_id: value}, store=store, actor=link_actor(link), wait=True
        )

    return deliver


async def test_a_link_is_made_only_for_a_request_that_waits(store):
    request_id = await _asking(store, "r5")
    with pytest.raises(UnknownRequestError, match="never asked 'nope'"):
        await create_link(store, "r5", "nope", "maria", expires_in=60, created_by="cli:test")
    with pytest.raises(RunNotFoundError):
        await create_link(store, "gone", request_id, "maria", expires_in=60, created_by="cli:test")
    token, _ = await create_link(
        store, "r5", request_id, "maria", expires_in=60, created_by="cli:test"
    )
    await answer_by_link(store, token, YES, _deliver(store))
    with pytest.raises(UnknownRequestError, match="answered already: link:maria approved"):
        await create_link(store, "r5", request_id, "ann", expires_in=60, created_by="cli:test")
