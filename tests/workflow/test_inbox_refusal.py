"""An answer or message in a run's inbox that its owner cannot apply is refused on the record.

Every door checks an answer against the workflow's code before it is
delivered; an item can still reach the inbox without that check (a client
holding no code, ``Store.deliver``) or stop fitting once the code changed.
Its owner refuses it where it reads the inbox: kept as it was sent, no
longer an answer, recorded as ``inbox_refused`` with why, so the request can
be answered again and nothing takes the run over and over.
"""

from __future__ import annotations

import pytest

from treadle import (
    Actor,
    InputPolicy,
    Role,
    RunStatus,
    Runtime,
    WorkflowBuilder,
    WorkflowContext,
    executor,
)
from treadle.errors import RequestAlreadyAnsweredError, RequestError, RunCancelledError


@executor(id="ask")
async def ask(x: int, ctx: WorkflowContext) -> None:
    n = await ctx.request("how many?", int)
    ctx.yield_output(x + n)


asker = WorkflowBuilder(ask, name="asker").build()


async def _asked_then_answered_unchecked(store, run_id: str, payload: bytes):
    """Start ``asker`` and answer its request with ``payload``, unchecked; the request."""
    asked = await asker.run(1, run_id=run_id, store=store)
    (request,) = asked.pending_requests
    row = await store.get_run(run_id)
    await store.deliver(run_id, [("answer", request.request_id, payload)], version=row.version)
    return request


async def test_an_answer_that_does_not_fit_is_refused_on_the_record_and_can_be_answered_again(
    store,  # every backend: memory, SQLite, PostgreSQL
):
    # As a client without the workflow's code delivers it: not checked.
    request = await _asked_then_answered_unchecked(store, "a1", b'"seven"')

    runtime = Runtime(store, [asker])
    (taken,) = await runtime.wake_due()  # taken once: the answer refused, nothing to run
    assert (taken.status, taken.superstep) == (RunStatus.AWAITING_INPUT, 1)
    row = await store.get_run("a1")
    assert (row.status, row.superstep, row.owner) == ("awaiting_input", 1, None)
    assert await store.inbox("a1") == []
    assert await runtime.wake_due() == []  # and not ready again: no takeover loop
    assert len((await asker.history("a1", store=store)).checkpoints) == 2  # none written

    (refused,) = [e for e in await store.read_audit("a1") if e.action == "inbox_refused"]
    assert (refused.actor["kind"], refused.door) == ("service", "worker")
    detail = refused.detail
    assert (detail["kind"], detail["target"]) == ("answer", request.request_id)
    assert "expects int" in detail["reason"]
    assert "seven" in detail["reason"]

    logged = [e for e in await store.read_events("a1") if e.kind == "inbox_refused"]
    assert [e.data["target"] for e in logged] == [request.request_id]

    done = await asker.respond("a1", {request.request_id: 6}, store=store)  # answerable again
    assert (done.status, done.outputs) == (RunStatus.COMPLETED, [7])


async def test_a_checked_answer_is_not_refused_for_an_unfit_one_that_came_first(store):
    # The store keeps the first answer to a request, checked or not. A door that checks
    # its own answer takes the free run over, refuses the unfit one on the record, and
    # then delivers: the caller is not told "already answered" by an answer that never
    # could be applied.
    request = await _asked_then_answered_unchecked(store, "a2", b'"seven"')

    answerer = Actor("user", "ada", "api", Role.APPROVER)
    done = await asker.respond("a2", {request.request_id: 6}, store=store, actor=answerer)
    assert (done.status, done.outputs) == (RunStatus.COMPLETED, [7])
    actions = [e.action for e in await store.read_audit("a2")]
    assert actions.index("inbox_refused") < actions.index("request_answered")
    (refused,) = [e for e in await store.read_audit("a2") if e.action == "inbox_refused"]
    assert "expects int" in refused.detail["reason"]
    # Refused in the name of the answerer whose answer set the takeover going, at their
    # door: not of a nameless service.
    assert (refused.actor["name"], refused.actor["kind"], refused.door) == ("ada", "user", "api")
    (logged,) = [e for e in await store.read_events("a2") if e.kind == "inbox_refused"]
    assert logged.data["actor"]["name"] == "ada"
    assert await store.inbox("a2") == []


async def test_an_unfit_answer_a_resume_finds_is_refused_in_the_resumers_name(store):
    await _asked_then_answered_unchecked(store, "a4", b'"seven"')

    operator = Actor("user", "grace", "api", Role.OPERATOR)
    resumed = await asker.resume("a4", store=store, actor=operator)
    assert resumed.status is RunStatus.AWAITING_INPUT
    (refused,) = [e for e in await store.read_audit("a4") if e.action == "inbox_refused"]
    assert (refused.actor["name"], refused.door) == ("grace", "api")


async def test_an_unchecked_answer_that_fits_still_wins(store):
    request = await _asked_then_answered_unchecked(store, "a3", b"5")

    with pytest.raises(RequestAlreadyAnsweredError, match="5"):  # the first answer wins
        await asker.respond("a3", {request.request_id: 6}, store=store)
    assert [e.action for e in await store.read_audit("a3")].count("inbox_refused") == 0
    done = await asker.resume("a3", store=store)
    assert (done.status, done.outputs) == (RunStatus.COMPLETED, [6])


@executor(id="listen")
async def listen(greeting: str, ctx: WorkflowContext) -> None:
    heard = await ctx.wait_for_input()
    ctx.yield_output(f"{greeting} {heard}")


listener = WorkflowBuilder(listen, name="listener").build()


async def _two_messages_then_wake(store, workflow, run_id: str, kind: str):
    """Start ``workflow`` on "hi", deliver two messages of ``kind`` unchecked, wake it.

    The run takes the first and completes; returns the one refusal on the record.
    """
    await workflow.run("hi", run_id=run_id, store=store)
    row = await store.get_run(run_id)
    twice = [(kind, None, b'"first"'), (kind, None, b'"second"')]
    await store.deliver(run_id, twice, version=row.version)
    (done,) = await Runtime(store, [workflow]).wake_due()
    assert (done.status, done.outputs) == (RunStatus.COMPLETED, ["hi first"])
    (refused,) = [e for e in await store.read_audit(run_id) if e.action == "inbox_refused"]
    return refused


async def test_of_two_unchecked_messages_to_one_wait_the_first_is_applied_the_second_refused(
    store,
):
    # A client holding no code delivers two messages; one wait takes one. The first is
    # applied, the second alone refused on the record: not both, for what only the
    # second did.
    refused = await _two_messages_then_wake(store, listener, "m1", "message")
    assert "not waiting for input" in refused.detail["reason"]
    assert await store.inbox("m1") == []


queued_listener = WorkflowBuilder(
    listen, name="queued-listener", input_policy=InputPolicy.ENQUEUE
).build()


async def test_what_a_run_ends_with_unapplied_in_its_inbox_is_refused_on_the_record(store):
    # Under enqueue each message gets a turn of its own, when the session next waits for
    # input; this session ends after its first. The second, accepted, would wait in the
    # inbox of an ended run for ever, applied by nobody and refused to nobody: the commit
    # that ends the run refuses it, on the record, as deliveries after it are refused.
    refused = await _two_messages_then_wake(store, queued_listener, "e1", "message:enqueue")
    assert (refused.actor["kind"], refused.door) == ("service", "worker")
    assert refused.detail["kind"] == "message:enqueue"
    assert refused.detail["reason"] == "the run completed before taking it"
    (logged,) = [e for e in await store.read_events("e1") if e.kind == "inbox_refused"]
    assert logged.data["reason"] == "the run completed before taking it"
    assert await store.inbox("e1") == []
    row = await store.get_run("e1")
    with pytest.raises(RequestError, match="has ended"):  # and later ones, as before
        await store.deliver("e1", [("message:enqueue", None, b'"late"')], version=row.version)


async def test_a_message_a_run_is_cancelled_with_unapplied_is_refused_in_the_cancellers_name(
    store,
):
    # A session sent a message (queued for its next turn) is cancelled before any owner
    # takes it: the message is refused on the record, in the name of who cancelled, in
    # the cancel's own transaction; it used to be marked taken, with nothing saying so.
    # An answer delivered likewise stays: it decides its request.
    await queued_listener.run("hi", run_id="c1", store=store)
    row = await store.get_run("c1")
    await store.deliver("c1", [("message:enqueue", None, b'"never"')], version=row.version)
    operator = Actor("user", "olga", "api", Role.OPERATOR)
    await queued_listener.cancel("c1", store=store, actor=operator)

    audit = await store.read_audit("c1")
    assert [e.action for e in audit][-2:] == ["run_cancelled", "inbox_refused"]
    refused = audit[-1]
    assert (refused.actor["name"], refused.door) == ("olga", "api")
    assert refused.detail["kind"] == "message:enqueue"
    assert refused.detail["reason"] == "the run was cancelled before taking it"
    (logged,) = [e for e in await store.read_events("c1") if e.kind == "inbox_refused"]
    assert (logged.data["actor"]["name"], logged.data["reason"]) == (
        "olga",
        "the run was cancelled before taking it",
    )
    assert await store.inbox("c1") == []
    assert (await store.get_run("c1")).status == "cancelled"


async def test_an_answer_a_run_is_cancelled_with_is_kept_not_refused(store):
    request = await _asked_then_answered_unchecked(store, "c2", b"5")
    await asker.cancel("c2", store=store, actor=Actor("user", "olga", "api", Role.OPERATOR))

    assert "inbox_refused" not in [e.action for e in await store.read_audit("c2")]
    with pytest.raises(RunCancelledError):  # nobody answers it again
        await asker.respond("c2", {request.request_id: 6}, store=store)
