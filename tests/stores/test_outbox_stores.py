"""The webhooks' outbox behaves alike on every store: memory, SQLite and PostgreSQL (issue 29).

A request asked by a run becomes a ``request.created`` message in the
transaction of its event (the memory store's feed, the SQL stores'
trigger); a claim leases it; a failed delivery past the endpoint's
attempts leaves a dead letter, which ``resend`` makes due again; an
endpoint made for a person keeps its link offer, and the link a message
carries is kept once however often it is offered.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from treadle import WorkflowBuilder, WorkflowContext, executor
from treadle._stores._answer_links import LinkOffer
from treadle._stores._outbox import new_endpoint, offered_link

sys.path.insert(0, str(Path(__file__).parents[1] / "server"))
from server_app import Brief, approval


async def test_a_request_is_a_message_claimed_dead_and_resent_on_every_store(store):
    outbox = store.outbox()
    offer = LinkOffer("maria", ("finance",), 3600.0, "https://treadle.example.com")
    endpoint = new_endpoint(
        "http://127.0.0.1:9/hook", now=time.time(), attempts=1, backoff=0.1, links=offer
    )
    await outbox.add_endpoint(endpoint)
    assert [e.links for e in await outbox.endpoints()] == [offer]
    await approval.run(Brief("hooks", 3), store=store, run_id="r1")
    (message,) = await outbox.claim_messages("sender-a", time.time(), 30.0, 10)
    assert (message.run_id, message.event_type) == ("r1", "request.created")
    assert await outbox.claim_messages("sender-b", time.time(), 30.0, 10) == []  # leased
    link = offered_link(message, endpoint)
    assert link is not None
    assert (link.principal, link.groups) == ("maria", ("finance",))
    assert link.request_id == message.event[4]["request_id"]
    await outbox.add_link(link)
    await outbox.use_link(link.nonce, time.time(), "maria")
    await outbox.add_link(offered_link(message, endpoint))  # offered again: kept as it was
    kept = await outbox.link(link.nonce)
    assert kept is not None
    assert kept.used_by == "maria"
    await outbox.message_failed(message.message_id, "sender-a", "HTTP 500", None)
    (dead,) = await outbox.messages("dead")
    assert (dead.message_id, dead.attempts, dead.last_error) == (message.message_id, 1, "HTTP 500")
    assert await outbox.resend(None, time.time()) == 1
    (again,) = await outbox.claim_messages("sender-b", time.time(), 30.0, 10)
    assert again.webhook_id == message.webhook_id
    await outbox.message_sent(again.message_id, "sender-b")
    assert await outbox.messages("pending") == []
    assert await outbox.messages("dead") == []


async def test_a_number_json_cannot_write_in_a_runs_events_fails_no_commit_the_feed_reads(store):
    # The feed reads each event row as JSON (SQLite's json_each, PostgreSQL's jsonb):
    # an output of infinity once went into the log as the bare word Infinity, which
    # is not JSON, and failed the run's commits once any endpoint existed.
    @executor(id="measure")
    async def measure(n: int, ctx: WorkflowContext) -> None:
        ctx.yield_output(float("inf"))

    outbox = store.outbox()
    await outbox.add_endpoint(new_endpoint("http://127.0.0.1:9/hook", now=time.time()))
    result = await WorkflowBuilder(start=measure).build().run(1, store=store, run_id="r1")
    assert result.status.value == "completed"
    assert result.outputs == [float("inf")]
    (output,) = [e for e in await store.read_events("r1") if e.kind == "output"]
    assert output.data == {"value": "Infinity"}
    claimed = await outbox.claim_messages("sender", time.time(), 30.0, 10)
    assert [m.event_type for m in claimed] == ["run.completed"]
