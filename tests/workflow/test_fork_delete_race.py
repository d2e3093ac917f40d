"""A fork and a delete of the run it forks from, racing: one wins, never a fork of a deleted run.

A fork reads the run it branches from, then writes the new run. A delete
landing between the two used to leave a fork whose parent was gone, the
deleter told the run was deleted whole and the forker told it forked: the
fork's write now reads its parent again, locked, in its own transaction.
"""

from __future__ import annotations

import pytest

from treadle import Actor, WorkflowBuilder, WorkflowContext, executor
from treadle._workflow import _actions as door
from treadle._workflow import _history
from treadle.errors import RunNotFoundError


@executor(id="ask")
async def ask(topic: str, ctx: WorkflowContext) -> None:
    ctx.yield_output(await ctx.request({"topic": topic}, str))


asking = WorkflowBuilder(ask, name="asking").build()


async def test_a_delete_between_a_forks_read_and_its_write_refuses_the_fork(store, monkeypatch):
    await asking.run("tides", run_id="p1", store=store)
    (checkpoint, *_) = (await asking.history("p1", store=store)).checkpoints[::-1]
    read = _history.load_restored

    async def read_then_deleted(*args, **kwargs):
        restored = await read(*args, **kwargs)
        await door.delete(store, "p1", actor=Actor.python())  # lands before the fork writes
        return restored

    monkeypatch.setattr(_history, "load_restored", read_then_deleted)
    with pytest.raises(RunNotFoundError, match="'p1'"):
        await asking.fork("p1", checkpoint.checkpoint_id, store=store, new_run_id="child")
    assert await store.list_runs() == []
    assert [e.action for e in await store.read_audit()] == ["run_created", "run_deleted"]
