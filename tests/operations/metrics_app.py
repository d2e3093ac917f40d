"""Workflows the metrics tests run: a loop that finishes, an approval that waits, a failure.

``looping`` runs one superstep per number up to ``to``; ``approval`` asks a
person (answered with a bool) and ends; ``failing`` raises; ``sleeping``
rests on a timer ``seconds`` long.
"""

from dataclasses import dataclass

from treadle import WorkflowBuilder, WorkflowContext, executor


@dataclass(frozen=True)
class Loop:
    to: int
    n: int = 0


@executor
async def step(loop: Loop, ctx: WorkflowContext[Loop]) -> None:
    if loop.n >= loop.to:
        ctx.yield_output(loop.n)
        return
    ctx.send_message(Loop(loop.to, loop.n + 1))


looping = WorkflowBuilder(start=step, name="looping").add_edge(step, step).build()


@executor
async def ask(topic: str, ctx: WorkflowContext) -> None:
    approved = await ctx.request({"topic": topic}, bool)
    ctx.yield_output(approved)


approval = WorkflowBuilder(start=ask, name="approval").build()


class Boom(RuntimeError):
    pass


@executor
async def explode(reason: str, ctx: WorkflowContext) -> None:
    raise Boom(reason)


failing = WorkflowBuilder(start=explode, name="failing").build()


@executor
async def nap(seconds: float, ctx: WorkflowContext) -> None:
    await ctx.sleep(seconds)
    ctx.yield_output("rested")


sleeping = WorkflowBuilder(start=nap, name="sleeping").build()
