"""A cancelled run can be forked: the fork is a new run, the cancelled one stays as it was.

Cancelling the wrong runs (a bulk cancel with too wide a filter) could not
be undone: a fork from any of their checkpoints was refused like a resume
(``RunCancelledError``). A fork never moves its parent, so it is allowed:
the new run goes on from the checkpoint, and the cancelled run is neither
resumed nor changed. Resuming a cancelled run is still refused.
"""

from __future__ import annotations

import pytest

from treadle import RunStatus, WorkflowBuilder, WorkflowContext, executor
from treadle.errors import RunCancelledError
from treadle.stores import SqliteStore


@executor(id="ask")
async def ask(amount: int, ctx: WorkflowContext[int]) -> None:
    approved = await ctx.request({"amount": amount}, bool)
    ctx.yield_output(amount if approved else 0)


REFUND = WorkflowBuilder(start=ask, name="refund").build()


async def test_a_cancelled_runs_checkpoint_forks_into_a_new_run_and_the_run_stays_cancelled(
    tmp_path,
):
    store = SqliteStore(tmp_path / "runs.sqlite")
    try:
        asked = await REFUND.run(40, store=store)
        await REFUND.cancel(asked.run_id, store=store)
        before = (await store.read_events(asked.run_id), await store.read_audit(asked.run_id))
        *_, last = await store.list_checkpoints(asked.run_id)
        forked = await REFUND.fork(asked.run_id, last.checkpoint_id, store=store)
        waiting = await REFUND.resume(forked, store=store)
        (request,) = waiting.pending_requests
        done = await REFUND.respond(forked, {request.request_id: True}, store=store)
        with pytest.raises(RunCancelledError):
            await REFUND.resume(asked.run_id, store=store)
        row = await store.get_run(asked.run_id)
        after = (await store.read_events(asked.run_id), await store.read_audit(asked.run_id))
        forks = await store.list_runs(parent_run_id=asked.run_id)
    finally:
        await store.close()
    assert (done.status, done.outputs) == (RunStatus.COMPLETED, [40])
    assert row.status == "cancelled"
    assert [e.kind for e in after[0]] == [e.kind for e in before[0]]
    assert [a.action for a in after[1]] == [a.action for a in before[1]]
    assert [run.run_id for run in forks] == [forked]
