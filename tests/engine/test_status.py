"""RunStatus: final means ended for good; a resting or paused run is not final, it moves again."""

import pytest

from treadle import RunStatus, WorkflowBuilder, WorkflowContext, executor
from treadle.stores import MemoryStore
from treadle.testing import FakeClock

# Spelled out rather than imported, so the test states the rule instead of echoing the code.
ENDED = {RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.STALLED}
RESTING = {RunStatus.AWAITING_INPUT, RunStatus.WAITING}
MOVING = {RunStatus.QUEUED, RunStatus.PENDING, RunStatus.RUNNING}
PAUSED = {RunStatus.PAUSED}


def test_the_statuses_fall_into_moving_resting_paused_and_ended():
    assert set(RunStatus) == ENDED | RESTING | MOVING | PAUSED


@pytest.mark.parametrize("status", list(RunStatus))
def test_only_the_ended_statuses_are_final(status):
    assert status.is_final is (status in ENDED)


@pytest.mark.parametrize("status", list(RunStatus))
def test_only_awaiting_input_and_waiting_are_resting(status):
    assert status.is_resting is (status in RESTING)


@pytest.mark.parametrize("status", list(RunStatus))
def test_a_run_has_stopped_when_it_rests_is_paused_or_has_ended(status):
    assert status.is_stopped is (status in RESTING | PAUSED | ENDED)


async def test_a_run_awaiting_input_is_not_final_and_moves_on_when_answered():
    @executor(id="ask")
    async def ask(question: str, ctx: WorkflowContext) -> None:
        ctx.yield_output(await ctx.request(question, int))

    workflow = WorkflowBuilder(start=ask, store=MemoryStore()).build()
    asked = await workflow.run("how many?", run_id="q1")
    assert asked.status is RunStatus.AWAITING_INPUT
    assert (asked.status.is_final, asked.status.is_resting) == (False, True)

    answered = await workflow.respond("q1", {asked.pending_requests[0].request_id: 3})
    assert (answered.status, answered.outputs) == (RunStatus.COMPLETED, [3])
    assert answered.status.is_final


async def test_a_run_waiting_on_a_timer_is_not_final_and_moves_on_when_due():
    clock = FakeClock(start=100.0)

    @executor(id="nap")
    async def nap(seconds: int, ctx: WorkflowContext) -> None:
        await ctx.sleep(seconds)
        ctx.yield_output(clock.now())

    workflow = WorkflowBuilder(start=nap, clock=clock, store=MemoryStore()).build()
    resting = await workflow.run(50, run_id="t1")
    assert resting.status is RunStatus.WAITING
    assert (resting.status.is_final, resting.status.is_resting) == (False, True)

    await clock.advance(50)
    woken = await workflow.resume("t1")
    assert (woken.status, woken.outputs) == (RunStatus.COMPLETED, [150.0])
    assert woken.status.is_final
