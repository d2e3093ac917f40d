"""A run that rests on a question with state in its checkpoints, for the corrupt-cell tests."""

from __future__ import annotations

from dataclasses import dataclass

from treadle import WorkflowBuilder, WorkflowContext, executor


@dataclass(frozen=True)
class Verdict:
    ok: bool


@executor(id="draft")
async def draft(topic: str, ctx: WorkflowContext[str]) -> None:
    ctx.state.set("topic", topic)
    ctx.state.set("notes", [f"{topic} note {n}" for n in range(20)])
    ctx.send_message(topic)


@executor(id="approve")
async def approve(text: str, ctx: WorkflowContext) -> None:
    verdict = await ctx.request({"text": text}, Verdict)
    ctx.yield_output(verdict.ok)


review = (
    WorkflowBuilder(start=draft, name="corrupt-review")
    .add_edge(draft, approve)
    .register_type(Verdict)
    .build()
)
