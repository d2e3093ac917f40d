"""Shared state: atomic updates, conflicts, reducers, read-your-writes, visibility."""

import asyncio
import operator
import random

import pytest

from treadle import ExecutionMode, WorkflowBuilder, WorkflowContext, executor
from treadle.errors import StateConflictError

MODES = ["run", "off_thread", "lockstep", "deterministic", "run_sync"]


async def run_in_mode(wf, message, mode):
    """Run a workflow in one of the execution modes; return (state, outputs)."""
    if mode == "run":
        r = await wf.run(message)
    elif mode == "deterministic":
        r = await wf.run(message, deterministic=True)
    elif mode == "run_sync":
        r = await asyncio.to_thread(wf.run_sync, message)
    else:
        m = ExecutionMode.OFF_THREAD if mode == "off_thread" else ExecutionMode.LOCKSTEP
        async with wf.stream(message, mode=m) as events:
            async for _ in events:
                pass
        r = events.result
    return r.state, r.outputs


def counter_workflow(n_workers: int):
    @executor
    async def kick(msg: str, ctx: WorkflowContext[str]) -> None:
        ctx.send_message(msg)

    workers = []
    for i in range(n_workers):

        @executor(id=f"w{i}")
        async def work(msg: str, ctx: WorkflowContext) -> None:
            await asyncio.sleep(random.random() / 1000)  # interleave the read-modify-writes
            ctx.state.update("n", lambda v: v + 1)

        workers.append(work)
    return WorkflowBuilder(start=kick).add_fan_out(kick, workers).add_state("n", default=0).build()


@pytest.mark.parametrize("mode", MODES)
async def test_a_hundred_concurrent_increments_are_never_lost(mode):
    state, _ = await run_in_mode(counter_workflow(100), "go", mode)
    assert state["n"] == 100


async def test_two_executors_setting_one_key_is_a_conflict_naming_both():
    @executor
    async def kick(msg: str, ctx: WorkflowContext[str]) -> None:
        ctx.send_message(msg)

    @executor
    async def left(msg: str, ctx: WorkflowContext) -> None:
        ctx.state.set("winner", "left")

    @executor
    async def right(msg: str, ctx: WorkflowContext) -> None:
        ctx.state.set("winner", "right")

    wf = WorkflowBuilder(start=kick).add_fan_out(kick, [left, right]).build()
    with pytest.raises(StateConflictError) as caught:
        await wf.run("go")
    assert caught.value.executor_ids == ("left", "right")
    assert "'winner' was set by 'left' and 'right' in superstep 2" in str(caught.value)
    assert "winner" not in caught.value.result.state


async def test_a_reducer_merges_concurrent_sets_in_rank_order():
    @executor
    async def kick(msg: str, ctx: WorkflowContext[str]) -> None:
        ctx.send_message(msg)

    branches = []
    for name in ("a", "b", "c"):

        @executor(id=name)
        async def add(msg: str, ctx: WorkflowContext) -> None:
            await asyncio.sleep(random.random() / 1000)
            ctx.state.set("seen", [ctx.executor_id])

        branches.append(add)
    wf = (
        WorkflowBuilder(start=kick)
        .add_fan_out(kick, branches)
        .add_state("seen", default=[], reducer=operator.add)
        .build()
    )
    for _ in range(5):
        assert (await wf.run("go")).state["seen"] == ["a", "b", "c"]


async def test_reads_see_the_last_barrier_plus_own_writes_only():
    observed = {}

    @executor
    async def kick(msg: str, ctx: WorkflowContext[str]) -> None:
        ctx.state.set("base", 1)
        ctx.send_message(msg)

    @executor
    async def writer(msg: str, ctx: WorkflowContext) -> None:
        ctx.state.set("mine", "w")
        ctx.state.update("base", lambda v: v + 10)
        observed["writer"] = (ctx.state.get("mine"), ctx.state["base"])

    @executor
    async def reader(msg: str, ctx: WorkflowContext) -> None:
        await asyncio.sleep(0.01)  # writer has long finished, but not committed
        observed["reader"] = (ctx.state.get("mine"), ctx.state["base"], "mine" in ctx.state)

    wf = WorkflowBuilder(start=kick).add_fan_out(kick, [writer, reader]).build()
    result = await wf.run("go")
    assert observed["writer"] == ("w", 11)
    assert observed["reader"] == (None, 1, False)
    assert result.state == {"base": 11, "mine": "w"}


async def test_an_executor_sees_its_own_earlier_invocations_in_the_same_superstep():
    seen = []

    @executor
    async def kick(msg: int, ctx: WorkflowContext[int]) -> None:
        for i in range(3):
            ctx.send_message(i)

    @executor
    async def tally(msg: int, ctx: WorkflowContext) -> None:
        seen.append(ctx.state.get("total", 0))
        ctx.state.update("total", lambda v: v + msg)

    wf = WorkflowBuilder(start=kick).add_edge(kick, tally).add_state("total", default=0).build()
    result = await wf.run(0)
    assert seen == [0, 0, 1]
    assert result.state["total"] == 3


async def test_update_of_an_unknown_key_fails_naming_the_key_and_executor():
    @executor
    async def bump(msg: int, ctx: WorkflowContext) -> None:
        ctx.state.update("missing", lambda v: v + 1)

    with pytest.raises(Exception) as caught:
        await WorkflowBuilder(start=bump).build().run(0)
    assert "'bump'" in str(caught.value)
    assert "state.update('missing'" in str(caught.value.__cause__)


async def test_initial_state_and_delete():
    @executor
    async def tidy(msg: int, ctx: WorkflowContext) -> None:
        ctx.state.delete("tmp")
        ctx.state.set("kept", ctx.state.get("kept", 0) + msg)

    result = await WorkflowBuilder(start=tidy).build().run(5, state={"tmp": 1, "kept": 1})
    assert result.state == {"kept": 6}
