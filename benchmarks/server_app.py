"""The workflows ``benchmarks/server.py`` serves: many small runs, and one run with a long log."""

from __future__ import annotations

from treadle import WorkflowBuilder, WorkflowContext, executor

CHATTY_SUPERSTEPS = 100
CUSTOM_PER_SUPERSTEP = 95
"""With the five events every superstep logs of its own: 10,000 events in the run's log."""


@executor(id="greet")
async def greet(name: str, ctx: WorkflowContext[str]) -> None:
    ctx.yield_output(f"hello {name}")


tiny = WorkflowBuilder(greet, name="tiny").build()


@executor(id="talk")
async def talk(n: int, ctx: WorkflowContext[int]) -> None:
    for item in range(CUSTOM_PER_SUPERSTEP):
        ctx.add_event({"superstep": n, "item": item})
    if n < CHATTY_SUPERSTEPS:
        ctx.send_message(n + 1)


chatty = WorkflowBuilder(talk, name="chatty").add_edge(talk, talk).build()


@executor(id="approve")
async def approve(amount: int, ctx: WorkflowContext) -> None:
    approved = await ctx.request({"amount": amount}, bool)
    ctx.yield_output("approved" if approved else "rejected")


approval = WorkflowBuilder(approve, name="approval").build()
"""A run that waits for a person's answer: the answer's latency through the server."""
