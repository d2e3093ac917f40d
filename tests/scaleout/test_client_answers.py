"""What a client is told when it answers a request of a run that workers serve."""

from __future__ import annotations

import asyncio

import psycopg
import pytest
import scale_app

import treadle
from apps.asking import asking_session
from treadle import InputPolicy
from treadle.errors import (
    InvalidResponseError,
    RequestAlreadyAnsweredError,
    UnknownRequestError,
)
from treadle.workers import Client, Worker

pytestmark = pytest.mark.integration

WORKFLOWS = [scale_app.counter, scale_app.asker, scale_app.napper]


async def asked(store) -> tuple[Client, str]:
    client = Client(store, WORKFLOWS)
    await client.start("asker", "colour?", run_id="q")
    await Worker(store, WORKFLOWS, lease=2, poll_interval=0.05).run_until_idle()
    (request,) = (await client.result("q")).pending_requests
    return client, request.request_id


async def test_a_client_that_has_the_workflow_is_refused_what_no_worker_could_apply(store):
    client, request_id = await asked(store)
    with pytest.raises(UnknownRequestError, match="req-nope"):
        await client.respond("q", {"req-nope": "blue"})
    with pytest.raises(InvalidResponseError, match=request_id):
        await client.respond("q", {request_id: 42})  # asks for a str
    assert await client.store.inbox("q") == []  # nothing was delivered
    await client.respond("q", {request_id: "blue"})
    with pytest.raises(RequestAlreadyAnsweredError, match="blue"):
        await client.respond("q", {request_id: "red"})  # not applied yet, but decided
    await Worker(store, WORKFLOWS, lease=2, poll_interval=0.05).run_until_idle()
    assert (await client.result("q")).outputs == ["colour? -> blue"]
    with pytest.raises(RequestAlreadyAnsweredError, match="blue"):
        await client.respond("q", {request_id: "red"})  # applied, and still decided


async def test_a_client_without_the_workflow_still_gets_one_answer_per_request(store):
    # A copy of the app's workflow that records no import path: as on a machine without it.
    private = treadle.WorkflowBuilder(scale_app.ask, name="asker").build()
    await Client(store).start("asker", "colour?", run_id="q")
    await Worker(store, [private], lease=2, poll_interval=0.05).run_until_idle()
    request_id = (await Client(store, [private]).result("q")).pending_requests[0].request_id
    plain = Client(store)  # no workflows given: plain JSON, checked by the worker
    # It reads what the run asks from the run's event log: no code needed.
    waiting = await plain.result("q")
    assert [(r.request_id, r.payload) for r in waiting.pending_requests] == [
        (request_id, "colour?")
    ]
    assert (waiting.status, waiting.state) == (treadle.RunStatus.AWAITING_INPUT, {})
    await plain.respond("q", {request_id: "blue"})
    with pytest.raises(RequestAlreadyAnsweredError, match="blue"):
        await plain.respond("q", {request_id: "red"})
    await Worker(store, [private], lease=2, poll_interval=0.05).run_until_idle()
    done = await plain.result("q")
    assert (done.status, done.outputs, done.pending_requests) == (
        treadle.RunStatus.COMPLETED,
        ["colour? -> blue"],
        [],
    )


async def test_an_answer_no_worker_can_apply_is_refused_on_the_record_and_answerable_again(store):
    private = treadle.WorkflowBuilder(scale_app.ask, name="asker").build()
    await Client(store).start("asker", "colour?", run_id="q")
    await Worker(store, [private], lease=2, poll_interval=0.05).run_until_idle()
    request_id = (await Client(store, [private]).result("q")).pending_requests[0].request_id
    plain = Client(store)  # no code here: delivered unchecked
    await plain.respond("q", {request_id: 42})  # the request asks for a str
    await Worker(store, [private], lease=2, poll_interval=0.05).run_until_idle()
    (refused,) = [e for e in await store.read_audit("q") if e.action == "inbox_refused"]
    assert (refused.door, refused.detail["target"]) == ("worker", request_id)
    assert "expects str" in refused.detail["reason"]
    waiting = await plain.result("q")
    assert [r.request_id for r in waiting.pending_requests] == [request_id]
    await plain.respond("q", {request_id: "blue"})  # answerable again
    await Worker(store, [private], lease=2, poll_interval=0.05).run_until_idle()
    assert (await plain.result("q")).outputs == ["colour? -> blue"]


@treadle.executor(id="listen")
async def listen(greeting: str, ctx: treadle.WorkflowContext) -> None:
    heard = await ctx.wait_for_input()
    ctx.yield_output(f"{greeting} {heard}")


async def test_of_two_messages_a_client_without_code_sends_one_wait_takes_the_first(store):
    # Both reach the inbox unchecked. The worker applies the first and refuses the
    # second alone, on the record: not both, and not the run left holding them.
    listener = treadle.WorkflowBuilder(listen, name="listener").build()
    await Client(store).start("listener", "hi", run_id="s")
    await Worker(store, [listener], lease=2, poll_interval=0.05).run_until_idle()
    plain = Client(store)
    await plain.send_message("s", "first")
    await plain.send_message("s", "second")
    await Worker(store, [listener], lease=2, poll_interval=0.05).run_until_idle()
    assert (await plain.result("s")).outputs == ["hi first"]
    (refused,) = [e for e in await store.read_audit("s") if e.action == "inbox_refused"]
    assert refused.door == "worker"
    assert "an earlier message takes its wait" in refused.detail["reason"]


async def test_a_message_a_session_ends_without_taking_is_refused_by_the_worker_ending_it(store):
    queued = treadle.WorkflowBuilder(
        listen, name="queued-listener", input_policy=treadle.InputPolicy.ENQUEUE
    ).build()
    await Client(store).start("queued-listener", "hi", run_id="e")
    await Worker(store, [queued], lease=2, poll_interval=0.05).run_until_idle()
    plain = Client(store)
    await plain.send_message("e", "first", policy=treadle.InputPolicy.ENQUEUE)
    await plain.send_message("e", "second", policy=treadle.InputPolicy.ENQUEUE)
    await Worker(store, [queued], lease=2, poll_interval=0.05).run_until_idle()
    assert (await plain.result("e")).outputs == ["hi first"]
    (refused,) = [e for e in await store.read_audit("e") if e.action == "inbox_refused"]
    assert (refused.door, refused.detail["reason"]) == (
        "worker",
        "the run completed before taking it",
    )


async def test_a_client_that_has_the_workflow_refuses_an_input_that_does_not_fit(store):
    # It stored the run, and the worker failed it at once: the input was checked only there.
    client = Client(store, WORKFLOWS)
    with pytest.raises(TypeError, match="the input does not fit the start executor 'begin'"):
        await client.start("counter", {"total": "3"}, run_id="bad")
    with pytest.raises(TypeError, match="tota: no such field"):
        await client.start("counter", {"tota": 3}, run_id="bad")
    assert [run.run_id for run in await store.list_runs()] == []  # nothing stored
    run_id = await client.start("counter", {"total": 3}, run_id="good")  # JSON data that fits
    await Worker(store, WORKFLOWS, lease=2, poll_interval=0.05).run_until_idle()
    assert (await client.result(run_id)).status is treadle.RunStatus.COMPLETED


chat = asking_session(InputPolicy.ROLLBACK, name="chat")


async def claims_of(dsn: str, schema: str, run_id: str) -> int:
    """How many times the run was claimed: its lease epoch."""
    async with await psycopg.AsyncConnection.connect(dsn) as db:
        query = f'SELECT lease_epoch FROM "{schema}".treadle_runs WHERE run_id = %s'  # noqa: S608
        row = await (await db.execute(query, (run_id,))).fetchone()
    assert row is not None
    return int(row[0])


async def test_a_message_a_turn_cannot_take_yet_waits_and_no_worker_spins_on_it(store, dsn, schema):
    # m2 comes from a client holding no code while m1's turn rests on its request: it
    # waits for the session's next rest. Before, every worker claimed the run, left the
    # message, gave the run back ready and claimed it again, at full CPU, for ever
    # (run_until_idle never returned); now the claim count stays where it was.
    client = Client(store, [chat])

    async def served() -> None:
        worker = Worker(store, [chat], lease=2, poll_interval=0.05)
        await asyncio.wait_for(worker.run_until_idle(), timeout=30)

    async def asked() -> str:
        (request,) = (await client.result("s1")).pending_requests
        return request.request_id

    await client.start("chat", "m0", run_id="s1")
    await served()
    await client.respond("s1", {await asked(): True})
    await served()
    await client.send_message("s1", "m1")
    await served()
    m1_request = await asked()
    await Client(store).send_message("s1", "m2")
    await served()
    claims = await claims_of(dsn, schema, "s1")
    await served()
    assert await claims_of(dsn, schema, "s1") == claims  # left alone: nothing new came
    await client.respond("s1", {m1_request: False})
    await served()
    done = await client.result("s1")
    assert done.outputs == ["m0 approved", "m1 refused"]
    (m2_request,) = done.pending_requests  # m2's turn, from the rest m1's left
    assert m2_request.payload == {"text": "m2"}
