"""A run with no store that comes to rest on what only a store lets anyone answer.

Requests, handoff approvals and session input are answered through the
store; without one the run fails with ``UnanswerableWaitError`` naming each
wait, unless the caller asked for the resting result (``rest_without_store``).
"""

import datetime as dt

import pytest

from treadle import (
    ExecutionMode,
    Executor,
    HandoffRefused,
    RunOptions,
    RunStatus,
    WorkflowBuilder,
    WorkflowContext,
    executor,
    handler,
)
from treadle.errors import UnanswerableWaitError, WorkflowRunError
from treadle.events import OutputEvent
from treadle.stores import MemoryStore
from treadle.testing import FakeClock


def asking(*, with_timer: bool = False):
    """Announce, then ask (in another branch), so the run has work to commit before it rests."""

    @executor(id="fork")
    async def fork(doc: str, ctx: WorkflowContext[str]) -> None:
        ctx.send_message(doc)

    @executor(id="ask")
    async def ask(doc: str, ctx: WorkflowContext) -> None:
        ctx.yield_output(await ctx.request({"approve": doc}, bool))

    @executor(id="note")
    async def note(doc: str, ctx: WorkflowContext) -> None:
        if with_timer:
            await ctx.sleep(dt.timedelta(hours=1))
        ctx.yield_output(f"noted {doc}")

    return WorkflowBuilder(start=fork).add_fan_out(fork, [ask, note]).build()


async def test_a_request_without_a_store_fails_the_run_naming_the_executor_and_the_request():
    with pytest.raises(UnanswerableWaitError) as caught:
        await asking().run("contract", run_id="r1")
    error = caught.value
    result = error.result
    assert result.status is RunStatus.FAILED
    assert result.outputs == ["noted contract"]  # what committed before it came to rest
    [request] = result.pending_requests
    assert error.waiting == (("ask", request.request_id),)
    message = str(error)
    for part in ("'r1'", "no store", repr(request.request_id), "'ask'", "rest_without_store=True"):
        assert part in message
    assert isinstance(error, WorkflowRunError)


async def test_asking_for_the_resting_result_returns_awaiting_input_instead():
    result = await asking().run("contract", options=RunOptions(rest_without_store=True))
    assert result.status is RunStatus.AWAITING_INPUT
    assert result.outputs == ["noted contract"]
    assert [r.payload for r in result.pending_requests] == [{"approve": "contract"}]


async def test_with_a_store_the_same_run_rests_as_before():
    result = await asking().run("contract", store=MemoryStore())
    assert result.status is RunStatus.AWAITING_INPUT


async def test_it_fails_where_it_would_have_rested_without_sleeping_through_a_timer_beside():
    # Resting on a request and a timer, the run would have returned AWAITING_INPUT:
    # it fails right there, not an hour later when the timer would fire.
    clock = FakeClock(start=0)
    with pytest.raises(UnanswerableWaitError) as caught:
        await clock.run(asking(with_timer=True).run("contract", clock=clock))
    assert caught.value.result.outputs == []
    assert clock.now() == 0
    rested = await asking(with_timer=True).run("contract", clock=clock, rest_without_store=True)
    assert (rested.status, rested.wake_at) == (RunStatus.AWAITING_INPUT, 3600)


@pytest.mark.parametrize("mode", list(ExecutionMode))
async def test_a_stream_without_a_store_raises_it_after_the_events_it_saw(mode):
    seen = []
    with pytest.raises(UnanswerableWaitError):
        async with asking().stream("contract", mode=mode) as events:
            async for event in events:
                if isinstance(event, OutputEvent):
                    seen.append(event.value)
    assert seen == ["noted contract"]
    async with asking().stream("contract", mode=mode, rest_without_store=True) as events:
        [status] = [e.status async for e in events if type(e).__name__ == "StatusChanged"][-1:]
    assert status is RunStatus.AWAITING_INPUT


async def test_session_input_and_handoff_approvals_are_named_too():
    @executor(id="listen")
    async def listen(greeting: str, ctx: WorkflowContext) -> None:
        await ctx.wait_for_input()

    with pytest.raises(UnanswerableWaitError, match="of executor 'listen'") as caught:
        await WorkflowBuilder(start=listen).build().run("hi")
    [(executor_id, key)] = caught.value.waiting
    assert (executor_id, key[:4]) == ("listen", "inp-")

    class Triage(Executor):
        @handler
        async def route(self, ticket: str, ctx: WorkflowContext) -> None:
            ctx.handoff("refunds", ticket, reason="asks for money back")

        @handler
        async def refused(self, refusal: HandoffRefused, ctx: WorkflowContext) -> None:
            pass

    @executor(id="refunds")
    async def refunds(ticket: str, ctx: WorkflowContext) -> None:
        pass

    wf = WorkflowBuilder(start=Triage).add_handoff("Triage", [refunds], require_approval=True)
    with pytest.raises(UnanswerableWaitError) as caught:
        await wf.build().run("ticket-7")
    [(executor_id, key)] = caught.value.waiting
    assert (executor_id, key[:4]) == ("Triage", "han-")


def test_the_option_is_a_flag():
    with pytest.raises(TypeError, match="rest_without_store must be True or False"):
        RunOptions(rest_without_store="yes")  # type: ignore[arg-type]
