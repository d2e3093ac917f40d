"""Two versions of an intake workflow, and the migration from the first to the second.

Version 1: ``write`` sends the draft to ``approve``, which asks a person.
Version 2 renames ``approve`` to ``review`` and reads a new state key,
``priority``, which the migration adds to every parked run. A run whose
draft is ``"stuck"`` carries a message the migration cannot convert, so it
cannot move (to show a refused run is named and left untouched).
"""

from __future__ import annotations

from dataclasses import dataclass

from treadle import WorkflowBuilder, WorkflowContext, executor
from treadle.versions import CheckpointContents, migration


@dataclass(frozen=True)
class Decision:
    approved: bool


@executor(id="write")
async def write_v1(text: str, ctx: WorkflowContext[str]) -> None:
    ctx.send_message(text)


@executor(id="approve")
async def approve(draft: str, ctx: WorkflowContext) -> None:
    decision = await ctx.request({"draft": draft}, Decision)
    ctx.yield_output(f"v1 {draft}: {decision.approved}")


intake_v1 = (
    WorkflowBuilder(write_v1, name="intake", version=1)
    .add_edge(write_v1, approve)
    .register_type(Decision)
    .build()
)


@executor(id="write")
async def write_v2(text: str, ctx: WorkflowContext[str]) -> None:
    ctx.send_message(text)


@executor(id="review")
async def review(draft: str, ctx: WorkflowContext) -> None:
    decision = await ctx.request({"draft": draft}, Decision)
    priority = ctx.state.get("priority")
    ctx.yield_output(f"v2 {draft}: {decision.approved}, priority {priority}")


intake = (
    WorkflowBuilder(write_v2, name="intake", version=2)
    .add_edge(write_v2, review)
    .add_state("priority", default="unset")
    .register_type(Decision)
    .build()
)


@migration("intake", from_version=1, to_version=2)
def approve_becomes_review(run: CheckpointContents) -> CheckpointContents:
    if any("stuck" in str(wait.payload) for waits in run.waits.values() for wait in waits):
        msg = "a stuck draft needs a person to look at it first"
        raise ValueError(msg)
    return run.rename_executor("approve", "review").with_state(priority="normal")
