"""A driver stops even when a cancellation is lost in code below it.

On Python 3.11, ``asyncio.wait_for`` returns its inner result when that
completes as the waiting task is cancelled, and psycopg_pool waits for a
free connection with it: under load, a ``Runtime`` leaving its block had
its timer service's cancellation lost inside a claim, and the service
polled on forever while the block's exit waited for it (an input-policy
race test hung 300 s on PostgreSQL). Here a store loses the cancellation
on purpose, inside the claim the service is making when the block ends.
"""

from __future__ import annotations

import asyncio

from treadle import Runtime, WorkflowBuilder, WorkflowContext, executor
from treadle.stores import SqliteStore


class LosesOneCancellation(SqliteStore):
    """A store whose claim of started runs, once it is asked to, loses a cancellation."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.claiming = asyncio.Event()
        self.lost = 0

    async def claim_starts(self, *args, **kwargs):
        if not self.claiming.is_set():
            self.claiming.set()
            try:
                await asyncio.sleep(3600)  # the wait whose cancellation is lost
            except asyncio.CancelledError:
                self.lost += 1  # as wait_for on 3.11: the wait "completed", no error
        return await super().claim_starts(*args, **kwargs)


@executor(id="echo")
async def echo(message: str, ctx: WorkflowContext) -> None:
    ctx.yield_output(message)


async def test_a_runtime_leaving_its_block_stops_its_service_though_a_claim_lost_the_cancellation(
    tmp_path,
):
    store = LosesOneCancellation(tmp_path / "runs.sqlite")
    workflow = WorkflowBuilder(start=echo, store=store, name="echo").build()
    try:
        runtime = Runtime(store, [workflow], poll_interval=0.01)
        await runtime.__aenter__()
        await store.claiming.wait()  # the service is inside a claim
        leaving = asyncio.create_task(runtime.__aexit__(None, None, None))
        await asyncio.wait({leaving}, timeout=10)
        assert leaving.done(), "the runtime's exit waited on a service that never stopped"
        leaving.result()
        assert store.lost == 1
    finally:
        await store.close()
