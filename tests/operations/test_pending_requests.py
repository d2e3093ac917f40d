"""The inbox of requests reads a run's checkpoint and its inbox apart: a commit between them.

The commit that applies an answer removes the request from the run's
checkpoint and the answer from its inbox at once. Read checkpoint first and
inbox second, a request answered and applied in between looked open: the
page's inbox count stayed up after its answer (a flaky browser test found
it). The listing now sees that the run moved on, and reads again.
"""

from __future__ import annotations

from typing import Any

from treadle import RunStatus, WorkflowBuilder, WorkflowContext, executor
from treadle._operations._requests import pending_requests
from treadle._workflow._versions import Hosted
from treadle.stores import SqliteStore


@executor(id="review")
async def review(title: str, ctx: WorkflowContext[str]) -> None:
    verdict = await ctx.request({"title": title}, str)
    ctx.yield_output(f"{title}: {verdict}")


async def test_a_request_answered_and_applied_between_the_two_reads_is_not_listed(tmp_path):
    store = SqliteStore(tmp_path / "runs.sqlite")
    workflow = WorkflowBuilder(start=review, name="review").build()
    asked = await workflow.run("Stool", store=store)
    assert asked.status is RunStatus.AWAITING_INPUT
    [request] = asked.pending_requests
    reads_of_the_inbox = store.inbox
    applied: list[Any] = []
    answering: list[str] = []

    async def inbox_after_the_answer_went_in(run_id: str) -> Any:
        if not answering:  # the checkpoint was read, still asking: now the answer comes and goes
            answering.append(run_id)  # (respond reads the inbox too)
            applied.append(await workflow.respond(run_id, {request.request_id: "yes"}, store=store))
        return await reads_of_the_inbox(run_id)

    store.inbox = inbox_after_the_answer_went_in  # type: ignore[method-assign]
    try:
        listed = await pending_requests(store, workflows=Hosted([workflow]))
    finally:
        store.inbox = reads_of_the_inbox  # type: ignore[method-assign]
        await store.close()
    assert [done.status for done in applied] == [RunStatus.COMPLETED]
    assert listed == []
