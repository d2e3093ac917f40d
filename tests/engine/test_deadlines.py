"""Deadlines on waits: ``ctx.request(..., timeout=)`` and ``ctx.wait_for_input(timeout=)``.

One process, a fake clock, a store (the deadline is decided against answers
there); the same across processes is ``tests/engine/test_deadlines_restart.py``.
"""

import asyncio
import datetime as dt

import pytest

from treadle import Runtime, WorkflowBuilder, WorkflowContext, executor
from treadle._checkpoints._inbox import timeout_marker
from treadle.errors import (
    RequestAlreadyAnsweredError,
    RequestExpiredError,
    RequestTimeoutError,
    UnknownRequestError,
)
from treadle.stores import MemoryStore, SqliteStore
from treadle.testing import FakeClock

DAY = 24 * 3600.0


async def pending_ids(wf, store, run_id: str) -> list[str]:
    """The requests pending in the run's latest checkpoint (while it runs elsewhere)."""
    restored = wf.codec.decode(await store.load_checkpoint(run_id), run_id=run_id)
    return [request.request_id for request in restored.waits.pending_requests()]


def approvals(store, clock, effects: list):
    """Ask for a verdict within 24 hours; on a timeout, remind once and escalate."""

    @executor
    async def approve(doc: str, ctx: WorkflowContext) -> None:
        await ctx.step("ticket", lambda: effects.append(("ticket", doc)))
        try:
            verdict = await ctx.request({"doc": doc}, str, timeout=dt.timedelta(hours=24))
        except RequestTimeoutError as timeout:
            deadline = timeout.deadline_at
            await ctx.step("remind", lambda: effects.append(("timed out", deadline)))
            if doc == "escalate":
                boss = await ctx.request({"doc": doc, "to": "boss"}, str)
                ctx.yield_output(f"{doc}: {boss} (after the deadline)")
                return
            ctx.yield_output(f"{doc}: no answer by {timeout.deadline_at}")
            return
        await ctx.step("answered", lambda: effects.append(("answered", verdict)))
        ctx.yield_output(f"{doc}: {verdict}")

    return WorkflowBuilder(start=approve, store=store, clock=clock, name="approvals").build()


async def test_a_request_answered_before_its_deadline_returns_the_answer():
    clock, store, effects = FakeClock(start=0.0), MemoryStore(), []
    wf = approvals(store, clock, effects)
    runtime = Runtime(store, [wf], clock=clock)
    asked = await wf.run("contract", run_id="r1")
    assert (asked.status.value, asked.wake_at) == ("awaiting_input", DAY)
    [request] = asked.pending_requests
    assert request.deadline_at == DAY
    row = await store.get_run("r1")
    assert (row.status, row.wake_at) == ("awaiting_input", DAY)
    await clock.advance_to(23 * 3600)
    assert await runtime.wake_due() == []  # not due: nothing runs
    done = await wf.respond("r1", {request.request_id: "approved"})
    assert (done.status.value, done.outputs, done.wake_at) == (
        "completed",
        ["contract: approved"],
        None,
    )
    await clock.advance_to(2 * DAY)
    assert await runtime.wake_due() == []  # the deadline died with the request
    assert effects == [("ticket", "contract"), ("answered", "approved")]


async def test_an_unanswered_request_raises_the_timeout_in_the_handler_at_its_deadline():
    clock, store, effects = FakeClock(start=0.0), MemoryStore(), []
    wf = approvals(store, clock, effects)
    runtime = Runtime(store, [wf], clock=clock)
    [request] = (await wf.run("contract", run_id="r1")).pending_requests
    await clock.advance_to(DAY - 1)
    assert await runtime.wake_due() == []
    await clock.advance_to(DAY)
    [timed_out] = await runtime.wake_due()
    assert (timed_out.status.value, timed_out.outputs) == (
        "completed",
        [f"contract: no answer by {DAY}"],
    )
    assert effects == [("ticket", "contract"), ("timed out", DAY)]
    # An answer after the deadline is refused, naming it, and changes nothing.
    with pytest.raises(RequestExpiredError, match=request.request_id) as refused:
        await wf.respond("r1", {request.request_id: "approved"})
    assert refused.value.deadline_at == DAY
    assert isinstance(refused.value, UnknownRequestError)
    assert (await wf.resume("r1")).outputs == timed_out.outputs
    assert len(effects) == 2


async def test_an_answer_delivered_before_the_owner_processed_the_deadline_wins():
    # The deadline has passed, but no timer service has processed it yet: the
    # answer reaches the store first, so it is the request's answer.
    clock, store, effects = FakeClock(start=0.0), MemoryStore(), []
    wf = approvals(store, clock, effects)
    [request] = (await wf.run("contract", run_id="r1")).pending_requests
    await clock.advance_to(DAY + 3600)
    done = await wf.respond("r1", {request.request_id: "late but first"})
    assert done.outputs == ["contract: late but first"]
    assert await Runtime(store, [wf], clock=clock).wake_due() == []
    assert [kind for kind, _ in effects] == ["ticket", "answered"]


async def test_a_timeout_kept_by_the_store_refuses_an_answer_the_checkpoint_still_allowed():
    # An owner recorded the timeout at the store and died before committing it:
    # the checkpoint still shows the request pending, the store has decided.
    clock, store, effects = FakeClock(start=0.0), MemoryStore(), []
    wf = approvals(store, clock, effects)
    [request] = (await wf.run("contract", run_id="r1")).pending_requests
    await store.deliver("r1", [("answer", request.request_id, timeout_marker(DAY))])
    with pytest.raises(RequestExpiredError):
        await wf.respond("r1", {request.request_id: "approved"})
    # Whoever takes the run over next applies the store's decision.
    done = await wf.resume("r1")
    assert done.outputs == [f"contract: no answer by {DAY}"]
    assert [kind for kind, _ in effects] == ["ticket", "timed out"]


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
async def test_an_answer_kept_while_the_owner_runs_wins_over_the_deadline_it_finds(
    backend, tmp_path
):
    # The run is live, another branch still busy, when the request's deadline
    # passes; an answer reached the store meanwhile. The owner, processing the
    # deadline, finds the store kept the answer first: the answer is applied.
    clock = FakeClock(start=0.0)
    store = MemoryStore() if backend == "memory" else SqliteStore(tmp_path / "runs.sqlite")
    busy, resumed = asyncio.Event(), asyncio.Event()
    answers = []

    @executor(id="fork")
    async def fork(doc: str, ctx: WorkflowContext[str | int]) -> None:
        ctx.send_message(doc)
        ctx.send_message(0)

    @executor(id="ask")
    async def ask(doc: str, ctx: WorkflowContext) -> None:
        try:
            answers.append(await ctx.request(doc, str, timeout=60))
        except RequestTimeoutError:
            answers.append("timed out")

    @executor(id="work")
    async def work(n: int, ctx: WorkflowContext[int]) -> None:
        if n == 1:
            busy.set()
            await resumed.wait()
        if n < 2:
            ctx.send_message(n + 1)

    wf = (
        WorkflowBuilder(start=fork, store=store, clock=clock)
        .add_fan_out(fork, [ask, work])
        .add_edge(work, work)
        .build()
    )
    running = asyncio.ensure_future(wf.run("doc", run_id="r1"))
    await busy.wait()  # superstep 3: ask rests on its request, work is busy
    [request_id] = await pending_ids(wf, store, "r1")
    await store.deliver("r1", [("answer", request_id, wf.serializer.dumps("yes"))])
    await clock.advance_to(120)
    resumed.set()
    done = await running
    assert answers == ["yes"]
    assert done.status.value == "completed"
    with pytest.raises(RequestAlreadyAnsweredError):
        await store.deliver("r1", [("answer", request_id, wf.serializer.dumps("no"))])
    assert await store.inbox("r1") == []  # all applied
    await store.close()


async def test_a_deadline_the_owner_finds_mid_run_times_out_and_refuses_later_answers():
    clock, store = FakeClock(start=0.0), MemoryStore()
    busy, resumed, answers = asyncio.Event(), asyncio.Event(), []

    @executor(id="fork")
    async def fork(doc: str, ctx: WorkflowContext[str | int]) -> None:
        ctx.send_message(doc)
        ctx.send_message(0)

    @executor(id="ask")
    async def ask(doc: str, ctx: WorkflowContext) -> None:
        try:
            answers.append(await ctx.request(doc, str, timeout=60))
        except RequestTimeoutError as timeout:
            answers.append(f"timed out at {timeout.deadline_at}")

    @executor(id="work")
    async def work(n: int, ctx: WorkflowContext[int]) -> None:
        if n == 1:
            busy.set()
            await resumed.wait()
        if n < 2:
            ctx.send_message(n + 1)

    wf = (
        WorkflowBuilder(start=fork, store=store, clock=clock)
        .add_fan_out(fork, [ask, work])
        .add_edge(work, work)
        .build()
    )
    running = asyncio.ensure_future(wf.run("doc", run_id="r1"))
    await busy.wait()
    [request_id] = await pending_ids(wf, store, "r1")
    await clock.advance_to(61)
    resumed.set()
    done = await running
    assert answers == ["timed out at 60.0"]
    assert done.status.value == "completed"
    with pytest.raises(RequestExpiredError):
        await wf.respond("r1", {request_id: "too late"})


async def test_a_re_execution_after_the_timeout_replays_it_instead_of_waiting_again():
    clock, store, effects = FakeClock(start=0.0), MemoryStore(), []
    wf = approvals(store, clock, effects)
    runtime = Runtime(store, [wf], clock=clock)
    await wf.run("escalate", run_id="r1")
    await clock.advance_to(DAY)
    [escalated] = await runtime.wake_due()
    assert escalated.status.value == "awaiting_input"  # the handler asked the boss
    [boss] = escalated.pending_requests
    assert boss.payload == {"doc": "escalate", "to": "boss"}
    assert boss.deadline_at is None
    done = await wf.respond("r1", {boss.request_id: "approved"})
    assert done.outputs == ["escalate: approved (after the deadline)"]
    # The re-execution met the same timeout at the same point, and no new wait.
    assert effects == [("ticket", "escalate"), ("timed out", DAY)]


async def test_a_session_waiting_for_input_with_a_timeout_gets_the_message_or_the_timeout():
    clock, store = FakeClock(start=0.0), MemoryStore()

    @executor
    async def chat(greeting: str, ctx: WorkflowContext) -> None:
        try:
            text = await ctx.wait_for_input(timeout=dt.timedelta(minutes=5))
        except RequestTimeoutError:
            ctx.yield_output(f"{greeting}: nobody answered")
            return
        ctx.yield_output(f"{greeting}: {text}")

    wf = WorkflowBuilder(start=chat, store=store, clock=clock, name="chat").build()
    rested = await wf.run("hi", run_id="quick")
    assert (rested.status.value, rested.wake_at) == ("awaiting_input", 300.0)
    await clock.advance_to(299)
    assert (await wf.send_message("quick", "hello")).outputs == ["hi: hello"]
    await wf.run("hey", run_id="slow")
    await clock.advance_to(600)
    [timed_out] = await Runtime(store, [wf], clock=clock).wake_due()
    assert timed_out.outputs == ["hey: nobody answered"]


@pytest.mark.parametrize(
    ("bad", "error", "message"),
    [
        (0, ValueError, "timeout must be a positive duration"),
        (dt.timedelta(seconds=-1), ValueError, "timeout must be a positive duration"),
        ("1h", TypeError, "timeout must be seconds or a datetime.timedelta"),
    ],
)
async def test_a_bad_timeout_fails_the_handler_naming_it(bad, error, message):
    @executor
    async def ask(q: str, ctx: WorkflowContext) -> None:
        await ctx.request(q, str, timeout=bad)

    wf = WorkflowBuilder(start=ask, store=MemoryStore()).build()
    with pytest.raises(Exception) as caught:
        await wf.run("?")
    assert isinstance(caught.value.__cause__, error)
    assert message in str(caught.value.__cause__)
