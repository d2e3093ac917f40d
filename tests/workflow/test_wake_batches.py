"""``Runtime.wake_due`` reads the runs it claimed a chunk at a time, not one by one.

Waking many parked runs was a read of the store per run (its row, graph and
latest checkpoint) before anything else; it is now one read per chunk of up
to ``concurrency`` claimed runs, and every run still wakes once, in claim order.
"""

from __future__ import annotations

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
