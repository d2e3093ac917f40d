"""Cancellable scheduled messages: a handle from `schedule_message`, to `cancel_scheduled`."""

import dataclasses
import datetime as dt
from dataclasses import dataclass

import pytest

from treadle import (
    ExponentialBackoff,
    RetryPolicy,
    Runtime,
    ScheduledHandle,
    WorkflowBuilder,
    WorkflowContext,
    executor,
)
from treadle._checkpoints._frame import waits_in as _waits_in
from treadle.stores import MemoryStore, SqliteStore
from treadle.testing import FakeClock

HOUR = 3600.0


@dataclass(frozen=True)
class Remind:
    doc: str


@dataclass(frozen=True)
class Ask:
    doc: str


def reminded_approval(store, clock, delivered: list):
    """Ask for an approval and schedule a reminder; the answer cancels the reminder.

    The handle travels in state from the invocation that scheduled it to the
    one that cancels it, which runs after a checkpoint (and maybe a restart).
    """

    @executor(id="start")
    async def start(doc: str, ctx: WorkflowContext[Ask | Remind]) -> None:
        handle = ctx.schedule_message(Remind(doc), after=dt.timedelta(hours=2), target="remind")
        ctx.state.set("reminder", handle)
        ctx.send_message(Ask(doc), target="ask")

    @executor(id="ask")
    async def ask(job: Ask, ctx: WorkflowContext) -> None:
        verdict = await ctx.request(job.doc, str)
        ctx.state.set("cancelled", ctx.cancel_scheduled(ctx.state.get("reminder")))
        ctx.yield_output(f"{job.doc}: {verdict}")

    @executor(id="remind")
    async def remind(reminder: Remind, ctx: WorkflowContext) -> None:
        delivered.append((reminder.doc, clock.now()))

    return (
        WorkflowBuilder(start=start, store=store, clock=clock, name="reminded")
        .add_edge(start, ask)
        .add_edge(start, remind)
        .build()
    )


async def test_an_answered_run_cancels_its_reminder_across_a_restart_and_completes(tmp_path):
    clock, delivered = FakeClock(start=0.0), []
    path = tmp_path / "runs.sqlite"
    store = SqliteStore(path)
    rested = await reminded_approval(store, clock, delivered).run("contract", run_id="r1")
    assert (rested.status.value, rested.wake_at) == ("awaiting_input", 2 * HOUR)
    handle = rested.state["reminder"]
    assert isinstance(handle, ScheduledHandle)
    assert (handle.due_at, handle.targets) == (2 * HOUR, ("remind",))
    assert handle.key.startswith("sch-")
    await store.close()

    store = SqliteStore(path)  # another process: the handle comes back from the checkpoint
    wf = reminded_approval(store, clock, delivered)
    await clock.advance_to(HOUR)
    [request] = (await wf.resume("r1")).pending_requests
    done = await wf.respond("r1", {request.request_id: "approved"})
    # Its only remaining wait was the cancelled reminder: it completes, it does not wait.
    assert (done.status.value, done.wake_at) == ("completed", None)
    assert done.state["cancelled"] is True
    assert (await store.get_run("r1")).wake_at is None
    await clock.advance_to(3 * HOUR)
    assert await Runtime(store, [wf], clock=clock).wake_due() == []
    assert delivered == []
    await store.close()


async def test_cancelling_a_reminder_delivered_already_is_a_no_op_returning_false():
    clock, store, delivered = FakeClock(start=0.0), MemoryStore(), []
    wf = reminded_approval(store, clock, delivered)
    runtime = Runtime(store, [wf], clock=clock)
    [request] = (await wf.run("contract", run_id="r1")).pending_requests
    await clock.advance_to(2 * HOUR)
    [reminded] = await runtime.wake_due()
    assert reminded.status.value == "awaiting_input"
    assert delivered == [("contract", 2 * HOUR)]
    done = await wf.respond("r1", {request.request_id: "approved"})
    assert (done.status.value, done.state["cancelled"]) == ("completed", False)
    assert delivered == [("contract", 2 * HOUR)]


async def test_a_handle_is_stable_across_retries_and_cancelled_in_the_same_invocation():
    clock, store = FakeClock(start=0.0), MemoryStore()
    handles, delivered = [], []
    instant = RetryPolicy(max_attempts=2, backoff=ExponentialBackoff(0, maximum=0, jitter=0))

    @executor(id="plan", retry=instant)
    async def plan(n: int, ctx: WorkflowContext[str]) -> None:
        first = ctx.schedule_message("first", after=60)
        second = ctx.schedule_message("second", after=120)
        handles.append((first, second))
        if len(handles) == 1:
            raise ConnectionError("the first attempt fails; the retry schedules the same keys")
        assert ctx.cancel_scheduled(first.key) is True  # never leaves this invocation
        assert ctx.cancel_scheduled("sch-000000000000") is False

    @executor(id="inbox")
    async def inbox(text: str, ctx: WorkflowContext) -> None:
        delivered.append(text)

    wf = WorkflowBuilder(start=plan, store=store, clock=clock).add_edge(plan, inbox).build()
    rested = await wf.run(1, run_id="p1")
    assert rested.wake_at == 120
    assert handles[0] == handles[1]
    assert handles[0][0].key != handles[0][1].key
    await clock.advance_to(200)
    assert (await wf.resume("p1")).status.value == "completed"
    assert delivered == ["second"]


async def test_a_cancel_commits_only_with_its_invocation_not_one_that_suspends():
    clock, store, delivered = FakeClock(start=0.0), MemoryStore(), []

    @executor(id="plan")
    async def plan(n: int, ctx: WorkflowContext[str | int]) -> None:
        if n == 0:
            ctx.state.set("reminder", ctx.schedule_message("reminder", after=60, target="inbox"))
            ctx.send_message(1, target="plan")
            return
        assert ctx.cancel_scheduled(ctx.state.get("reminder")) is True
        await ctx.request("cancel it?", bool)  # suspends: the cancel above is discarded

    @executor(id="inbox")
    async def inbox(text: str, ctx: WorkflowContext) -> None:
        delivered.append(text)

    wf = (
        WorkflowBuilder(start=plan, store=store, clock=clock)
        .add_edge(plan, inbox)
        .add_edge(plan, plan)
        .build()
    )
    rested = await wf.run(0, run_id="p1")
    assert (rested.status.value, rested.wake_at) == ("awaiting_input", 60)
    await clock.advance_to(60)
    await Runtime(store, [wf], clock=clock).wake_due()
    assert delivered == ["reminder"]


async def test_cancel_scheduled_refuses_what_is_not_a_handle_or_a_key():
    @executor
    async def plan(n: int, ctx: WorkflowContext) -> None:
        ctx.cancel_scheduled(42)  # type: ignore[arg-type]

    with pytest.raises(Exception) as caught:
        await WorkflowBuilder(start=plan).build().run(1)
    assert isinstance(caught.value.__cause__, TypeError)
    assert "ScheduledHandle or its key, got 42" in str(caught.value.__cause__)


def test_a_scheduled_message_from_a_checkpoint_written_before_keys_loads_uncancellable():
    envelope = [[1, 0, 0, 0], "plan", "hello", None, None]
    book = _waits_in(
        {"suspended": [], "scheduled": [[60.0, "inbox", envelope]], "answered": [], "approvals": []}
    )
    [message] = book.scheduled
    assert (message.due_at, message.target, message.key) == (60.0, "inbox", None)
    assert dataclasses.is_dataclass(ScheduledHandle)
