"""A fork of a run that waits for an answer is answered like the run itself."""

from __future__ import annotations

from treadle import WorkflowBuilder, WorkflowContext, executor
from treadle.stores import SqliteStore


def asking():
    @executor(id="draft")
    async def draft(topic: str, ctx: WorkflowContext[str]) -> None:
        ctx.send_message(f"notes on {topic}")

    @executor(id="approve")
    async def approve(text: str, ctx: WorkflowContext[str]) -> None:
        verdict = await ctx.request({"text": text}, str)
        ctx.yield_output(f"{text}: {verdict}")

    return WorkflowBuilder(draft, name="asking").add_edge(draft, approve).build()


async def test_a_fork_of_a_waiting_run_is_answered_and_completes_as_the_parent_would(tmp_path):
    workflow = asking()
    store = SqliteStore(tmp_path / "runs.sqlite")
    try:
        rested = await workflow.run("tides", store=store, run_id="parent")
        (asked,) = rested.pending_requests
        latest = (await store.get_run("parent")).checkpoint_id
        fork = await workflow.fork("parent", latest, new_run_id="fork", store=store)
        forked = await workflow.resume(fork, store=store)
        (copied,) = forked.pending_requests
        assert copied.request_id == asked.request_id  # the same wait, in a run of its own
        done = await workflow.respond(fork, {copied.request_id: "no"}, store=store)
        assert done.outputs == ["notes on tides: no"]
        parent = await workflow.respond("parent", {asked.request_id: "yes"}, store=store)
        assert parent.outputs == ["notes on tides: yes"]  # each run its own answer
    finally:
        await store.close()


async def test_a_fork_of_a_run_waiting_inside_a_sub_workflow_is_answered_too(tmp_path):
    @executor(id="wrap")
    async def wrap(topic: str, ctx: WorkflowContext[str]) -> None:
        ctx.send_message(topic)

    parent = (
        WorkflowBuilder(wrap, name="outer")
        .add_workflow(asking(), id="review")
        .add_edge(wrap, "review")
        .build()
    )
    store = SqliteStore(tmp_path / "runs.sqlite")
    try:
        rested = await parent.run("otters", store=store, run_id="outer")
        (asked,) = rested.pending_requests
        assert asked.executor_id == "review/approve"
        latest = (await store.get_run("outer")).checkpoint_id
        fork = await parent.fork("outer", latest, new_run_id="outer-fork", store=store)
        done = await parent.respond(fork, {asked.request_id: "fine"}, store=store)
        assert done.outputs == ["notes on otters: fine"]
    finally:
        await store.close()
