"""Workflows for the CLI ownership tests: one held in superstep 2 as long as a test needs.

``gated``'s input is a path. Its second executor (``hold``, superstep 2)
touches ``<path>.reached`` and then waits until ``<path>`` exists, so a test
knows when the run is mid-superstep and decides when it may go on: no timing
guesses. ``echo`` outputs whatever JSON it is given.
"""

import asyncio
from pathlib import Path

from treadle import WorkflowBuilder, WorkflowContext, executor


@executor
async def begin(gate: str, ctx: WorkflowContext[str]) -> None:
    ctx.state.set("gate", gate)
    ctx.send_message(gate)


@executor
async def hold(gate: str, ctx: WorkflowContext[str]) -> None:
    await asyncio.to_thread(Path(gate + ".reached").touch)
    while not await asyncio.to_thread(Path(gate).exists):  # noqa: ASYNC110 - another process's file
        await asyncio.sleep(0.02)
    ctx.send_message(gate)


@executor
async def finish(gate: str, ctx: WorkflowContext) -> None:
    ctx.yield_output(f"passed {Path(gate).name}")


gated = (
    WorkflowBuilder(start=begin, name="gated").add_edge(begin, hold).add_edge(hold, finish).build()
)


@executor
async def repeat(value: object, ctx: WorkflowContext) -> None:
    ctx.yield_output(value)


echo = WorkflowBuilder(start=repeat, name="echo").build()


def napper(name: str):
    """A workflow that sleeps ``seconds`` on a durable timer, then says when it woke."""

    @executor(id="nap")
    async def nap(seconds: float, ctx: WorkflowContext) -> None:
        await ctx.sleep(seconds)
        ctx.yield_output(ctx.now())

    return WorkflowBuilder(start=nap, name=name).build()


nap_a = napper("nap_a")
nap_b = napper("nap_b")


@executor
async def ask(gate: str, ctx: WorkflowContext[str]) -> None:
    if await ctx.request({"gate": gate}, bool):
        ctx.send_message(gate)


asked_then_gated = (
    WorkflowBuilder(start=ask, name="asked-then-gated")
    .add_edge(ask, hold)
    .add_edge(hold, finish)
    .build()
)
