"""One superstep yields many large outputs (one commit of about 15 MB of events), then it waits."""

from __future__ import annotations

from treadle import WorkflowBuilder, WorkflowContext, executor

PIECE = "x" * 256 * 1024


@executor(id="pour")
async def pour(count: int, ctx: WorkflowContext[int]) -> None:
    for n in range(count):
        ctx.yield_output(f"{n}:{PIECE}")
    ctx.send_message(count)


@executor(id="ask")
async def ask(count: int, ctx: WorkflowContext) -> None:
    await ctx.request(f"{count} poured: more?", bool)  # the run waits, its streams open


big_commit = WorkflowBuilder(start=pour, name="big_commit").add_edge(pour, ask).build()
