"""An answer to a request settled already is told so, even while the run is busy with it.

A second answer that arrives while the first one's process is still going on
with the run (it owns it) was refused as busy ("owned by ...; try again
later"): true, but trying again only ever gets "already answered". It is now
told at once that the request was answered, by whom; an answer to a request
nobody has answered yet is still refused as busy, as before.
"""

from __future__ import annotations

import asyncio

import pytest

from treadle import WorkflowBuilder, WorkflowContext, executor
from treadle.errors import RequestAlreadyAnsweredError
from treadle.stores import SqliteStore


def asking_twice(reached: asyncio.Event, go_on: asyncio.Event):
    @executor(id="ask")
    async def ask(topic: str, ctx: WorkflowContext[str]) -> None:
        first = await ctx.request(f"first about {topic}?", bool)
        reached.set()
        await go_on.wait()  # the first answer's caller owns the run meanwhile
        second = await ctx.request(f"second about {topic}?", bool)
        ctx.yield_output(f"{first} {second}")

    return WorkflowBuilder(start=ask, name="asking").build()


async def test_a_second_answer_while_the_first_one_is_applied_is_told_who_answered(tmp_path):
    reached, go_on = asyncio.Event(), asyncio.Event()
    workflow = asking_twice(reached, go_on)
    store = SqliteStore(tmp_path / "runs.sqlite")
    try:
        asked = await workflow.run("otters", store=store)
        (first,) = asked.pending_requests
        answering = asyncio.create_task(
            workflow.respond(asked.run_id, {first.request_id: True}, store=store)
        )
        await asyncio.wait_for(reached.wait(), 30)  # applied: its caller goes on with the run
        with pytest.raises(RequestAlreadyAnsweredError, match="python") as refused:
            await workflow.respond(asked.run_id, {first.request_id: False}, store=store)
        assert (refused.value.request_id, refused.value.answer) == (first.request_id, "true")
        go_on.set()
        waiting = await answering
        (second,) = waiting.pending_requests
        done = await workflow.respond(asked.run_id, {second.request_id: True}, store=store)
    finally:
        await store.close()
    assert done.outputs == ["True True"]
