"""A run started in-process on PostgreSQL has one owner, as every run on every store.

docs/deploy.md once said such runs take no lease; DESIGN §9 says every run
has one owner. This shows the run row naming this process as the owner
while a superstep computes, so no worker can advance it meanwhile.
"""

from __future__ import annotations

import asyncio
import os
import socket

import pytest

from treadle import WorkflowBuilder, WorkflowContext, executor

pytestmark = pytest.mark.integration


async def test_an_in_process_run_on_postgresql_holds_a_lease_while_it_computes(store):
    started = asyncio.Event()
    release = asyncio.Event()

    @executor
    async def hold(n: int, ctx: WorkflowContext) -> None:
        started.set()
        await release.wait()
        ctx.yield_output(n)

    workflow = WorkflowBuilder(start=hold, name="held").build()
    running = asyncio.create_task(workflow.run(1, store=store, run_id="in-process"))
    await started.wait()
    row = await store.get_run("in-process")
    assert row.owner is not None
    assert row.owner.startswith(f"{socket.gethostname()}:{os.getpid()}:")
    release.set()
    assert (await running).outputs == [1]
    assert (await store.get_run("in-process")).owner is None  # given up as it ended
