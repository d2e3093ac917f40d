"""A workflow that reports ephemeral events (as an agent's token deltas are) while it works."""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from pathlib import Path

from treadle import WorkflowBuilder, WorkflowContext, executor
from treadle.events import WorkflowEvent


@dataclass(slots=True, kw_only=True)
class Token(WorkflowEvent):
    """A piece of a reply as it arrives: streamed live, never logged."""

    ephemeral = True  # a class attribute, not a field
    text: str = ""


@executor(id="speak")
async def speak(words: list[str], ctx: WorkflowContext[str]) -> None:
    gate = Path(os.environ["LIVE_GATE"])
    for word in words:
        # Each token waits until the test follows the run (and has seen the last one):
        # a live token is not in the log, so one raised before anyone follows is gone.
        while not gate.exists():  # noqa: ASYNC110, ASYNC240 - another process opens it
            await asyncio.sleep(0.01)
        gate.unlink()  # noqa: ASYNC240 - the test opens it again for the next word
        ctx.emit(Token(run_id=ctx.run_id, superstep=1, executor_id="speak", text=word))
    ctx.yield_output(" ".join(words))


talk = WorkflowBuilder(speak, name="talk").build()
