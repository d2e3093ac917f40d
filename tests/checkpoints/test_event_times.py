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
