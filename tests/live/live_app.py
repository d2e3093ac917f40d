"""An agent whose reply streams slowly, held at two gates, for the live-event tests.

The model (a scripted ``FunctionModel``, offline) streams ``REPLY`` in small
chunks. Before its second chunk it writes ``reached`` in the directory
``LIVE_GATES`` names and waits for ``followed`` there (the test starts its
followers meanwhile); before its last chunk it waits for ``finish``. So
while ``finish`` is missing the turn cannot end, and its barrier cannot
commit: whatever a follower shows of the reply by then came live.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from pydantic_ai import Agent

from agents.scripted import chunks, scripted
from treadle import WorkflowBuilder
from treadle.agents import AgentExecutor

REPLY = "Your parcel left the Lyon depot this morning and reaches you on Friday."
LAST = len(chunks(REPLY)) - 1


async def _hold(request: int, chunk: int) -> None:
    gates = Path(os.environ["LIVE_GATES"])
    if request == 0 and chunk == 1:
        (gates / "reached").touch()  # a marker, once
        await _until(gates / "followed")
    elif request == 0 and chunk == LAST:
        await _until(gates / "finish")


async def _until(gate: Path) -> None:
    while not gate.exists():  # noqa: ASYNC110, ASYNC240 - another process opens it
        await asyncio.sleep(0.02)


courier = WorkflowBuilder(
    AgentExecutor(Agent(scripted(REPLY, name="courier-model", pause=_hold), name="courier")),
    name="courier",
).build()
