"""A stored run's log stamps each event with when it was raised, not when its superstep committed.

A run nobody streams keeps its superstep's events until the barrier (a
``treadle worker``'s runs, ``record_events=False``): they were all logged
with the barrier's time, so an invocation's start, its progress and its end
read as one instant, whatever the handler took.
"""

from __future__ import annotations

import asyncio

import pytest

from treadle import WorkflowBuilder, WorkflowContext, executor
from treadle.stores import SqliteStore


@executor(id="slow")
async def slow(pages: int, ctx: WorkflowContext) -> None:
    for page in range(pages):
        await asyncio.sleep(0.05)
        ctx.report_progress(page + 1, pages)
    ctx.yield_output(pages)


slow_workflow = WorkflowBuilder(slow, name="slow").build()


@pytest.mark.parametrize("record_events", [False, True])
async def test_a_logged_event_is_stamped_when_it_was_raised(tmp_path, record_events):
    store = SqliteStore(tmp_path / "runs.sqlite")
    try:
        await slow_workflow.run(4, store=store, run_id="r", record_events=record_events)
        logged = [e for e in await store.read_events("r") if e.superstep == 1]
    finally:
        await store.close()
    kinds = [e.kind for e in logged]
    invoked = logged[kinds.index("executor_invoked")].at
    progress = [e.at for e in logged if e.kind == "progress"]
    completed = logged[kinds.index("executor_completed")].at
    assert len(progress) == 4
    assert invoked < progress[0] < progress[-1] <= completed
    assert completed - invoked >= 0.15  # four 50 ms pages: not one instant
    assert progress == sorted(progress)


@executor(id="chatty")
async def chatty(n: int, ctx: WorkflowContext) -> None:
    for i in range(n):
        ctx.add_event({"i": i})
    ctx.yield_output(n)


chatty_workflow = WorkflowBuilder(chatty, name="chatty").build()


async def test_a_long_log_is_read_in_pages_that_grow_not_a_thousand_at_a_time(tmp_path):
    # A superstep's events are one row, read whole: 1,000 a page, a superstep of 80,000
    # events was read whole eighty times (28 s; 0.07 s in one read), so `treadle logs`,
    # export, watch and the event stream took half a minute and held the server.
    from treadle._workflow._following import logged_after  # noqa: PLC0415

    store = SqliteStore(tmp_path / "runs.sqlite")
    reads: list[int | None] = []
    read = store.read_events

    async def counted(run_id: str, *, after: int = 0, limit: int | None = None):  # type: ignore[no-untyped-def]
        reads.append(limit)
        return await read(run_id, after=after, limit=limit)

    try:
        await chatty_workflow.run(20_000, store=store, run_id="c", record_events=False)
        store.read_events = counted  # type: ignore[method-assign]
        seqs = [event.seq async for event in logged_after(store, "c", 0)]
    finally:
        await store.close()
    assert seqs == list(range(1, len(seqs) + 1))
    assert len(seqs) > 20_000
    assert reads == [1000, 2000, 4000, 8000, 16000]  # not 21 reads of the same row
