"""A limit's line with calls in it: one run holds the only slot of ``openai``, the others wait.

The tests of what shows a run's waits (``treadle runs``, ``GET /api/runs``,
the wait metrics) need the same scene: a run whose call holds the slot until
the test lets it go, and runs queued behind it, in a known order.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from treadle import CallLimit, WorkflowBuilder, WorkflowContext, executor

if TYPE_CHECKING:
    from treadle import RunOptions, RunResult
    from treadle.stores import Store


class HeldLine:
    """Runs of one call under limit ``openai`` (concurrency 1); the first holds the slot."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.holding = asyncio.Event()

        @executor(id="call", limits=["openai"])
        async def call(value: Any, ctx: WorkflowContext) -> None:
            self.holding.set()
            await self.release.wait()
            ctx.yield_output(value)

        limit = CallLimit("openai", concurrency=1)
        self.workflow = WorkflowBuilder(call, name="asks", limits=[limit]).build()
        self.runs: list[asyncio.Future[RunResult]] = []

    async def queue(
        self, store: Store, inputs: dict[str, Any], options: RunOptions | None = None
    ) -> None:
        """Start a run of each input (run id -> input): the first holds the slot, each
        next one is started once the one before waits in line, so the line keeps their order."""
        for place, (run_id, value) in enumerate(inputs.items()):
            self.runs.append(
                asyncio.ensure_future(
                    self.workflow.run(value, store=store, run_id=run_id, options=options)
                )
            )
            if place == 0:
                await asyncio.wait_for(self.holding.wait(), 60)
                continue
            deadline = asyncio.get_running_loop().time() + 60
            while not await store.line_waits([run_id]):
                assert asyncio.get_running_loop().time() < deadline, f"{run_id} never waited"
                await asyncio.sleep(0.01)

    async def finish(self) -> list[RunResult]:
        """Let the first run's call go; every run's result once all have ended."""
        self.release.set()
        return list(await asyncio.gather(*self.runs))
