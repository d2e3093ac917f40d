"""Workflows for the webhook receiver tests: one that ends at once, one whose step is sync.

A sync step runs on a worker thread of the loop's default executor, so it
shows whether anything else (a webhook delivery) holds those threads.
"""

from __future__ import annotations

from treadle import WorkflowBuilder, WorkflowContext, executor


@executor
async def finish(value: int, ctx: WorkflowContext) -> None:
    ctx.yield_output(value)


@executor
def tally(value: int, ctx: WorkflowContext) -> None:
    ctx.yield_output(value + 1)


quick = WorkflowBuilder(start=finish, name="quick").build()
counted = WorkflowBuilder(start=tally, name="counted").build()
