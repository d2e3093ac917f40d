"""Workflows the server tests serve: an approval, a failure, a long loop, a chat.

``approval`` asks a person (a ``Verdict``: ``approved: bool``, ``note: str``)
and outputs what they said. ``failing`` raises in its handler, so its run
fails with a traceback. ``counting`` loops one superstep per number up to
``to``; at ``hold_at`` it waits until the file ``gate`` exists, so a test
decides when the run may go on (no timing guesses). ``chat`` waits for
session messages and echoes each until it is told "bye".
"""

import asyncio
import dataclasses
from dataclasses import dataclass
from pathlib import Path

from treadle import WorkflowBuilder, WorkflowContext, executor


@dataclass(frozen=True)
class Verdict:
    approved: bool
    note: str


@dataclass(frozen=True)
class Brief:
    topic: str
    words: int


@executor
async def draft(brief: Brief, ctx: WorkflowContext[str]) -> None:
    ctx.state.set("topic", brief.topic)
    ctx.send_message(f"{brief.words} words about {brief.topic}")


@executor
async def approve(text: str, ctx: WorkflowContext) -> None:
    verdict = await ctx.request({"text": text}, Verdict)
    ctx.yield_output({"text": text, "approved": verdict.approved, "note": verdict.note})


approval = (
    WorkflowBuilder(start=draft, name="approval")
    .add_edge(draft, approve)
    .register_type(Verdict)
    .build()
)


class Boom(RuntimeError):
    pass


@executor
async def explode(reason: str, ctx: WorkflowContext) -> None:
    raise Boom(f"exploded: {reason}")


failing = WorkflowBuilder(start=explode, name="failing").build()


@dataclass(frozen=True)
class Count:
    to: int
    gate: str = ""
    hold_at: int = 0
    n: int = 0
    hold_again_at: int = 0  # then waits for the file gate + ".again" (0: never)


async def _hold(gate: str) -> None:
    """Say the run reached ``gate``, then wait until the file ``gate`` exists."""
    await asyncio.to_thread(Path(gate + ".reached").touch)
    while not await asyncio.to_thread(Path(gate).exists):  # noqa: ASYNC110
        await asyncio.sleep(0.02)


@executor
async def count(step: Count, ctx: WorkflowContext[Count]) -> None:
    if step.gate and step.n == step.hold_at:
        await _hold(step.gate)
    if step.gate and step.hold_again_at and step.n == step.hold_again_at:
        await _hold(step.gate + ".again")
    ctx.report_progress(step.n, step.to, "counting")
    if step.n >= step.to:
        ctx.yield_output(step.n)
        return
    ctx.send_message(dataclasses.replace(step, n=step.n + 1))


counting = (
    WorkflowBuilder(start=count, name="counting")
    .add_edge(count, count)
    .register_type(Count)
    .build()
)


@executor
async def listen(greeting: str, ctx: WorkflowContext) -> None:
    heard = []
    while True:
        message = await ctx.wait_for_input()
        if message == "bye":
            break
        heard.append(message)
    ctx.yield_output([greeting, *heard])


chat = WorkflowBuilder(start=listen, name="chat").build()
