"""Workflows the CLI tests drive through the `treadle` command."""

import asyncio
from dataclasses import dataclass

from treadle import WorkflowBuilder, WorkflowContext, executor


@dataclass(frozen=True)
class Verdict:
    ok: bool
    note: str = ""


@dataclass(frozen=True)
class Brief:
    topic: str
    words: int


@executor
async def write(brief: Brief, ctx: WorkflowContext[str]) -> None:
    ctx.state.set("topic", brief.topic)
    ctx.send_message(f"{brief.words} words about {brief.topic}")


@executor
async def approve(text: str, ctx: WorkflowContext) -> None:
    verdict = await ctx.request({"text": text}, Verdict)
    ctx.yield_output({"text": text, "approved": verdict.ok, "note": verdict.note})


review = (
    WorkflowBuilder(start=write, name="review")
    .add_edge(write, approve)
    .register_type(Verdict)
    .build()
)


@executor
async def crunch(steps: int, ctx: WorkflowContext) -> None:
    for done in range(1, steps + 1):
        await asyncio.sleep(0.25)
        ctx.report_progress(done, steps, "crunching")
    ctx.yield_output(steps)


long_job = WorkflowBuilder(start=crunch, name="long-job").build()


@executor
async def bounce(n: int, ctx: WorkflowContext[int]) -> None:
    ctx.send_message(n + 1)


bouncing = WorkflowBuilder(start=bounce, name="bouncing").add_edge(bounce, bounce).build()
