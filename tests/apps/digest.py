"""The tests' one scheduled app: a digest that outputs its input, quickly or slowly.

``digest`` outputs the text a schedule gave it (its tick's time, as a rule).
``slow_digest`` first sleeps ``DIGEST_SLOW_SECONDS`` (default 3) of real time
in its handler: a run slower than its schedule's interval, for the overlap
policies. ``treadle worker --app digest`` and ``treadle serve --app digest``
serve both (``tests/apps`` on the import path).
"""

from __future__ import annotations

import asyncio
import os

from treadle import Workflow, WorkflowBuilder, WorkflowContext, executor


@executor(id="digest")
async def _digest(text: str, ctx: WorkflowContext) -> None:
    ctx.yield_output(text)


@executor(id="slow")
async def _slow(text: str, ctx: WorkflowContext) -> None:
    await asyncio.sleep(float(os.environ.get("DIGEST_SLOW_SECONDS", "3")))
    ctx.yield_output(text)


digest: Workflow = WorkflowBuilder(start=_digest, name="digest").build()
slow_digest: Workflow = WorkflowBuilder(start=_slow, name="slow_digest").build()
