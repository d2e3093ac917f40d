"""A workflow the bulk-cancel test serves with ``treadle worker``: runs that never end alone.

``spin`` sends itself a message every superstep after a short pause, counting
in its state; each run carries its ``batch`` (an input search field) and its
``spins`` (a state field), so filters find it whether a worker has taken it
up yet or not.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from treadle import WorkflowBuilder, WorkflowContext, executor


@dataclass(frozen=True)
class Spin:
    batch: str
    n: int = 0


@executor(id="spin")
async def spin(message: Spin, ctx: WorkflowContext[Spin]) -> None:
    await asyncio.sleep(0.05)
    ctx.state.set("spins", message.n + 1)
    ctx.send_message(Spin(message.batch, message.n + 1))


spinner = (
    WorkflowBuilder(spin, name="spinner", max_supersteps=100_000)
    .add_edge(spin, spin)
    .add_search_field("batch", str, input=lambda s: s.batch)
    .add_search_field("spins", int, state=lambda s: s.get("spins"))
    .build()
)
