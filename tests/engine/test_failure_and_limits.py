"""Failure atomicity, loop limits and stalled fan-ins."""

import asyncio

import pytest

from treadle import RunStatus, WorkflowBuilder, WorkflowContext, executor
from treadle.errors import ExecutorFailedError, IterationLimitExceeded


class Boom(Exception):
    pass


async def test_a_failing_executor_commits_nothing_of_its_superstep():
    @executor
    async def kick(msg: str, ctx: WorkflowContext[str]) -> None:
        ctx.state.set("step1", True)
        ctx.yield_output("from superstep 1")
        ctx.send_message(msg)

    @executor
    async def good(msg: str, ctx: WorkflowContext[str]) -> None:
        ctx.state.set("good", True)
        ctx.yield_output("from good")
        ctx.send_message("onward")

    @executor
    async def bad(msg: str, ctx: WorkflowContext) -> None:
        await asyncio.sleep(0.005)  # good has finished by now: its work is buffered
        ctx.state.set("bad", True)
        raise Boom("disk full")

    @executor
    async def after(msg: str, ctx: WorkflowContext) -> None:
        ctx.yield_output("never")

    wf = WorkflowBuilder(start=kick).add_fan_out(kick, [good, bad]).add_edge(good, after).build()
    with pytest.raises(ExecutorFailedError) as caught:
        await wf.run("go")
    error = caught.value
    assert error.executor_id == "bad"
    assert error.superstep == 2
    assert isinstance(error.__cause__, Boom)
    assert "executor 'bad' failed in superstep 2: Boom: disk full" in str(error)
    result = error.result
    assert result.status is RunStatus.FAILED
    assert result.superstep == 1
    assert result.state == {"step1": True}
    assert result.outputs == ["from superstep 1"]
    failed = [e for e in result.events if type(e).__name__ == "ExecutorFailed"]
    assert [e.executor_id for e in failed] == ["bad"]
    assert result.events[-1].status is RunStatus.FAILED


async def test_deterministic_mode_runs_in_rank_order_so_the_first_failure_is_reproducible():
    ran = []

    @executor
    async def kick(msg: str, ctx: WorkflowContext[str]) -> None:
        ctx.send_message(msg)

    @executor
    async def first(msg: str, ctx: WorkflowContext) -> None:
        ran.append("first")
        await asyncio.sleep(0.005)
        raise Boom("first")

    @executor
    async def second(msg: str, ctx: WorkflowContext) -> None:
        ran.append("second")
        raise Boom("second")

    wf = WorkflowBuilder(start=kick).add_fan_out(kick, [first, second]).build()
    for _ in range(3):
        ran.clear()
        with pytest.raises(ExecutorFailedError) as caught:
            await wf.run("go", deterministic=True)
        assert caught.value.executor_id == "first"
        assert ran == ["first"]  # one at a time, in rank order: second never started


async def test_a_loop_without_exit_stops_at_max_supersteps_naming_its_executors():
    @executor
    async def entry(msg: int, ctx: WorkflowContext[int]) -> None:
        ctx.send_message(msg)

    @executor
    async def ping(msg: int, ctx: WorkflowContext[int]) -> None:
        ctx.send_message(msg + 1)

    @executor
    async def pong(msg: int, ctx: WorkflowContext[int]) -> None:
        ctx.send_message(msg + 1)

    wf = (
        WorkflowBuilder(start=entry)
        .add_edge(entry, ping)
        .add_edge(ping, pong)
        .add_edge(pong, ping)
        .build()
    )
    with pytest.raises(IterationLimitExceeded) as caught:
        await wf.run(0, max_supersteps=50)
    assert caught.value.executor_ids == ("ping", "pong")
    assert "max_supersteps=50" in str(caught.value)
    assert caught.value.result.superstep == 50
    assert caught.value.result.status is RunStatus.FAILED


async def test_max_node_iterations_stops_before_the_sixth_invocation():
    calls = []

    @executor
    async def spin(msg: int, ctx: WorkflowContext[int]) -> None:
        calls.append(msg)
        ctx.send_message(msg + 1)

    wf = WorkflowBuilder(start=spin).add_edge(spin, spin).build()
    with pytest.raises(IterationLimitExceeded) as caught:
        await wf.run(1, max_node_iterations=5)
    assert calls == [1, 2, 3, 4, 5]
    assert caught.value.executor_ids == ("spin",)
    assert "max_node_iterations=5" in str(caught.value)


async def test_a_bounded_loop_completes():
    @executor
    async def step(msg: int, ctx: WorkflowContext[int]) -> None:
        if msg < 10:
            ctx.send_message(msg + 1)
        else:
            ctx.yield_output(msg)

    wf = WorkflowBuilder(start=step).add_edge(step, step).build()
    result = await wf.run(0)
    assert (result.status, result.outputs, result.superstep) == (RunStatus.COMPLETED, [10], 11)


async def test_a_fan_in_whose_source_never_sends_stalls_naming_what_it_waits_for():
    @executor
    async def kick(msg: str, ctx: WorkflowContext[str]) -> None:
        ctx.send_message(msg)

    @executor
    async def talker(msg: str, ctx: WorkflowContext[str]) -> None:
        ctx.send_message("hello")

    @executor
    async def silent(msg: str, ctx: WorkflowContext[str]) -> None:
        pass  # never sends: the fan-in can never fill

    @executor
    async def join(msg: list[str], ctx: WorkflowContext) -> None:
        ctx.yield_output(msg)

    wf = (
        WorkflowBuilder(start=kick)
        .add_fan_out(kick, [talker, silent])
        .add_fan_in([talker, silent], join)
        .build()
    )
    result = await wf.run("go")
    assert result.status is RunStatus.STALLED
    assert len(result.stalled) == 1
    stalled = result.stalled[0]
    assert (stalled.target, stalled.waiting_for, stalled.received_from) == (
        "join",
        ("silent",),
        ("talker",),
    )
    assert result.outputs == []
