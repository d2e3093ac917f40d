"""``Runtime.wake_due`` reads the runs it claimed a chunk at a time, not one by one.

Waking many parked runs was a read of the store per run (its row, graph and
latest checkpoint) before anything else; it is now one read per chunk of up
to ``concurrency`` claimed runs, and every run still wakes once, in claim order.
"""

from __future__ import annotations

import asyncio

import pytest

from treadle import RunStatus, Runtime, WorkflowBuilder, WorkflowContext, executor
from treadle.stores import SqliteStore
from treadle.testing import FakeClock


@executor(id="nap")
async def nap(i: int, ctx: WorkflowContext[int]) -> None:
    await ctx.sleep(60 + i)  # due one after another: claim order is known
    ctx.yield_output(i)


async def test_forty_parked_runs_wake_with_three_batch_reads_and_no_read_each(tmp_path):
    store = SqliteStore(tmp_path / "runs.sqlite")
    clock = FakeClock(start=0.0)
    workflow = WorkflowBuilder(start=nap, name="naps").build()
    for i in range(40):
        parked = await workflow.run(i, store=store, clock=clock, run_id=f"r{i:02}")
        assert parked.status is RunStatus.WAITING
    batches: list[list[str]] = []
    alone: list[str] = []
    load_claimed, load_resumable = store.load_claimed, store.load_resumable

    async def counted_batch(run_ids):
        batches.append(list(run_ids))
        return await load_claimed(run_ids)

    async def counted_alone(run_id, checkpoint_id=None):
        alone.append(run_id)
        return await load_resumable(run_id, checkpoint_id)

    store.load_claimed = counted_batch  # type: ignore[method-assign]
    store.load_resumable = counted_alone  # type: ignore[method-assign]
    await clock.advance(200)
    woken = await Runtime(store, [workflow], clock=clock).wake_due(concurrency=16)
    assert [result.outputs for result in woken] == [[i] for i in range(40)]
    assert [len(batch) for batch in batches] == [16, 16, 8]
    assert [run_id for batch in batches for run_id in batch] == [f"r{i:02}" for i in range(40)]
    assert alone == []
    assert await Runtime(store, [workflow], clock=clock).wake_due() == []  # each woke once
    await store.close()


async def test_a_wake_runs_at_most_concurrency_runs_and_a_cancelled_one_lets_the_waiting_ones_go(
    tmp_path,
):
    # Claimed runs wait for a slot without a task each; cancelling the call gives up the
    # leases of those that never started, so another service takes them at once.
    store = SqliteStore(tmp_path / "runs.sqlite", lease=30)
    clock = FakeClock(start=0.0)
    gate, two_in = asyncio.Event(), asyncio.Event()
    running: list[int] = []
    most = 0

    @executor(id="held")
    async def held(i: int, ctx: WorkflowContext[int]) -> None:
        nonlocal most
        await ctx.sleep(60 + i)
        running.append(i)
        most = max(most, len(running))
        if len(running) == 2:
            two_in.set()
        try:
            await gate.wait()
        finally:
            running.remove(i)
        ctx.yield_output(i)

    workflow = WorkflowBuilder(start=held, name="held").build()
    for i in range(6):
        parked = await workflow.run(i, store=store, clock=clock, run_id=f"r{i}")
        assert parked.status is RunStatus.WAITING
    await clock.advance(100)
    waking = asyncio.create_task(Runtime(store, [workflow], clock=clock).wake_due(concurrency=2))
    await asyncio.wait_for(two_in.wait(), 10)
    await asyncio.sleep(0.2)  # room for a third to start, were there one
    assert sorted(running) == [0, 1]
    waking.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waking
    assert most == 2
    for i in range(2, 6):  # never started: let go, not held until the lease ran out
        lease = await store.acquire(f"r{i}", "another-service", 30)
        await store.release(lease)
    gate.set()
    woken = await Runtime(store, [workflow], clock=clock).wake_due(concurrency=2)
    assert [result.outputs for result in woken] == [[i] for i in range(2, 6)]
    await store.close()


async def test_by_default_a_wake_continues_sixty_four_runs_at_once(tmp_path):
    # Their commits then share a transaction and an fsync 64 at a time (group commit).
    # At 16 the first sixteen would wait at the gate for ever: the call is bounded.
    store = SqliteStore(tmp_path / "runs.sqlite")
    clock = FakeClock(start=0.0)
    gate = asyncio.Event()
    running: list[int] = []
    most = 0

    @executor(id="held")
    async def held(i: int, ctx: WorkflowContext[int]) -> None:
        nonlocal most
        await ctx.sleep(60)
        running.append(i)
        most = max(most, len(running))
        if len(running) == 64:
            gate.set()
        await gate.wait()
        running.remove(i)
        ctx.yield_output(i)

    workflow = WorkflowBuilder(start=held, name="held").build()
    parked = await asyncio.gather(
        *(workflow.run(i, store=store, clock=clock, run_id=f"r{i:02}") for i in range(70))
    )
    assert {result.status for result in parked} == {RunStatus.WAITING}
    await clock.advance(100)
    woken = await asyncio.wait_for(Runtime(store, [workflow], clock=clock).wake_due(), 60)
    assert sorted(output for result in woken for output in result.outputs) == list(range(70))
    assert most == 64
    await store.close()
