"""A workflow whose error message and progress label are text from its input."""

from __future__ import annotations

from treadle import WorkflowBuilder, WorkflowContext, executor


@executor(id="echo")
async def echo(text: str, ctx: WorkflowContext) -> None:
    ctx.report_progress(1, 2, f"reading {text}")
    msg = f"bad input {text}"
    raise ValueError(msg)


fails = WorkflowBuilder(start=echo, name="fails").build()
