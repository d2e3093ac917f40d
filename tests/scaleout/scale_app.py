"""Workflows the scale-out tests serve with real ``treadle worker`` processes.

``counter`` takes ``total`` supersteps (a self-loop), each pausing
``pause`` seconds so that kills and pauses land mid-superstep; ``napper``
sleeps on a durable timer; ``asker`` waits for an answer. Their outputs
depend only on their inputs, so a run interrupted any number of times must
end with exactly the outputs of an uninterrupted one.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from treadle import WorkflowBuilder, WorkflowContext, executor


@dataclass(frozen=True)
class Job:
    total: int
    pause: float = 0.0


@dataclass(frozen=True)
class Tick:
    n: int
    total: int
    pause: float
    acc: int


@executor(id="begin")
async def begin(job: Job, ctx: WorkflowContext) -> None:
    ctx.send_message(Tick(1, job.total, job.pause, 1))


@executor(id="step")
async def step(tick: Tick, ctx: WorkflowContext) -> None:
    if tick.pause:
        await asyncio.sleep(tick.pause)
    if tick.n >= tick.total:
        ctx.yield_output({"steps": tick.n, "acc": tick.acc})
        return
    n = tick.n + 1
    ctx.send_message(Tick(n, tick.total, tick.pause, (tick.acc * 31 + n) % 1_000_003))


counter = (
    WorkflowBuilder(begin, name="counter", max_supersteps=10_000)
    .add_edge(begin, step)
    .add_edge(step, step)
    .build()
)


@dataclass(frozen=True)
class Nap:
    seconds: float


@executor(id="nap")
async def nap(request: Nap, ctx: WorkflowContext) -> None:
    started = await ctx.step("started", ctx.now)
    await ctx.sleep(request.seconds)
    ctx.yield_output({"started": started, "woke": ctx.now()})


napper = WorkflowBuilder(nap, name="napper").build()


@executor(id="ask")
async def ask(question: str, ctx: WorkflowContext) -> None:
    answer = await ctx.request(question, str)
    ctx.yield_output(f"{question} -> {answer}")


asker = WorkflowBuilder(ask, name="asker").build()
