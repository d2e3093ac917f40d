"""An expense workflow in two versions whose steps leave a visible mark, for the replay check.

Every step body appends a line to the file ``EXPENSE_SIDE_EFFECTS`` names, so a
test sees whether a replay ran one: a replay must return a step's journaled
result, never call it again.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from treadle import Executor, Workflow, WorkflowBuilder, WorkflowContext, executor


@dataclass(frozen=True)
class Verdict:
    ok: bool


def side_effect(what: str) -> str:
    """Append ``what`` to the side-effect file (a reminder e-mail, a receipt filed)."""
    with Path(os.environ["EXPENSE_SIDE_EFFECTS"]).open("a", encoding="utf-8") as file:
        file.write(what + "\n")
    return what


@executor(id="submit")
async def submit(amount: int, ctx: WorkflowContext[int]) -> None:
    ctx.send_message(amount)


@executor(id="approve")
async def approve(amount: int, ctx: WorkflowContext) -> None:
    reminded = await ctx.step("remind", side_effect, f"REMINDER to approve {amount}")
    verdict = await ctx.request({"amount": amount, "note": reminded}, Verdict)
    filed = await ctx.step("file", side_effect, f"FILED {amount} ok={verdict.ok}")
    ctx.yield_output(filed)


@executor(id="approve")
async def approve_audited(amount: int, ctx: WorkflowContext) -> None:
    """Version 1 changed in place: a new step before the question."""
    reminded = await ctx.step("remind", side_effect, f"REMINDER to approve {amount}")
    await ctx.step("audit", side_effect, f"AUDITED {amount}")
    verdict = await ctx.request({"amount": amount, "note": reminded}, Verdict)
    filed = await ctx.step("file", side_effect, f"FILED {amount} ok={verdict.ok}")
    ctx.yield_output(filed)


@executor(id="receive")
async def receive(amount: int, ctx: WorkflowContext[int]) -> None:
    """Version 2's start: it takes a receipt number first, in a step."""
    await ctx.step("number", side_effect, f"NUMBERED {amount}")
    ctx.send_message(amount)


def _v1(handler: Executor) -> Workflow:
    return (
        WorkflowBuilder(start=submit, name="expenses", version=1)
        .add_edge(submit, handler)
        .register_type(Verdict)
        .build()
    )


expenses_v1 = _v1(approve)
expenses_v2 = (
    WorkflowBuilder(start=receive, name="expenses", version=2)
    .add_edge(receive, approve)
    .register_type(Verdict)
    .build()
)
audited_v1 = _v1(approve_audited)
