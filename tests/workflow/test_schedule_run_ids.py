"""A run id of a schedule's form is the schedule's alone.

A schedule's tick starts its run with the id ``SCHEDULE@TIME``, and a tick
whose id is taken starts nothing: the run is taken for the tick's (that is
how two processes serving one schedule start one run per tick). Anyone who
could choose that id first (a run, a fork, the command line, a client)
could take a tick's run away from its schedule. Now only the schedule gives
a run such an id; everyone else is refused, and the tick starts its run.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from treadle import Runtime, Schedule, WorkflowBuilder, WorkflowContext, executor
from treadle.stores import MemoryStore, SqliteStore
from treadle.testing import FakeClock

TICK = "report@20260501T000200Z"  # the tick two minutes after the schedule begins


@executor(id="start", accepts=str)
async def start(value: str, ctx: WorkflowContext) -> None:
    ctx.yield_output(value)


REPORT = WorkflowBuilder(start=start, name="report").build()


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_nobody_but_the_schedule_gives_a_run_its_ticks_id(tmp_path, kind):
    clock = FakeClock(datetime(2026, 5, 1, tzinfo=UTC).timestamp())
    store = MemoryStore() if kind == "memory" else SqliteStore(tmp_path / "runs.db")
    try:
        runtime = Runtime(store, [REPORT], clock=clock)
        every = timedelta(minutes=2)
        await runtime.schedules.create(Schedule(REPORT, id="report", every=every, input="tick"))
        for run_id in (TICK, "report@20260501T000200.250Z", "other@20991231T235959Z"):
            with pytest.raises(ValueError, match="has the form SCHEDULE@TIME"):
                await REPORT.run("mine", run_id=run_id, store=store)
        first = await REPORT.run("a", store=store)
        (checkpoint, *_) = await store.list_checkpoints(first.run_id)
        with pytest.raises(ValueError, match="schedule 'report'"):
            await REPORT.fork(first.run_id, checkpoint.checkpoint_id, new_run_id=TICK, store=store)
        # Ids that only look alike stay anyone's.
        for run_id in ("report@tomorrow", "report@20260501T000200", "a@b@20260501T000200Z"):
            assert (await REPORT.run("x", run_id=run_id, store=store)).run_id == run_id
        await clock.advance(120)
        (ticked,) = await runtime.wake_due()
        assert (ticked.run_id, ticked.outputs) == (TICK, ["tick"])
        (row,) = [run for run in await store.list_runs() if run.run_id == TICK]
        assert "schedule:report" in (row.started_by or "")
    finally:
        await store.close()
