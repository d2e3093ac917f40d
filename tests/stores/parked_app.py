"""The workflow behind ``tests/stores/data/parked-v11.sqlite``, and how that file was made.

The file was written by treadle as released before checkpoint frames were
compact (schema version 11, frames of format 2 sealed in blobs of version 1),
by running this module::

    python tests/stores/parked_app.py make tests/stores/data/parked-v11.sqlite

It holds runs parked as that release parked them: on a durable timer, on a
request, and a run that keeps state and outputs as pieces while it sleeps.
``test_parked_upgrade.py`` opens a copy with today's treadle, which must
wake and answer them. Keep the workflow as it is: the stored runs were made
by this exact graph, on a fake clock starting at 0.
"""

from __future__ import annotations

import asyncio
import operator
import sys
from pathlib import Path

from treadle import Workflow, WorkflowBuilder, WorkflowContext, executor
from treadle.stores import SqliteStore
from treadle.testing import FakeClock

SLEEP_S = 3_600.0
"""How long the sleepers sleep, from time 0 of the fake clock."""
SLEEPERS = ("sleeper-1", "sleeper-2", "sleeper-3")
"""Parked on a timer at their first superstep."""
KEEPER = "keeper"
"""Wrote state and an output, then parked on a timer at its second superstep."""
ASKER = "asker"
"""Asked for an answer at its first superstep, and waits for it."""


def build() -> Workflow:
    @executor
    async def nap(n: int, ctx: WorkflowContext[int]) -> None:
        if n < 0:  # the asker
            answer = await ctx.request({"question": n}, str)
            ctx.yield_output(f"answered {answer}")
            return
        if n >= 100:  # the keeper's first superstep: state, an output, then on to itself
            ctx.state.set("log", [f"kept {n}"])
            ctx.yield_output(n)
            ctx.send_message(n - 100)
            return
        await ctx.sleep(SLEEP_S)
        ctx.state.set("log", [f"woke {n}"])
        ctx.yield_output(n)

    return (
        WorkflowBuilder(nap, name="parked")
        .add_edge(nap, nap)
        .add_state("log", default=[], reducer=operator.add)
        .build()
    )


async def make(path: str) -> None:
    """Write the runs described above into a new SQLite store at ``path``."""
    store = SqliteStore(path)
    workflow = build()
    clock = FakeClock(start=0.0)
    try:
        for n, run_id in enumerate(SLEEPERS, start=1):
            await workflow.run(n, run_id=run_id, store=store, clock=clock)
        await workflow.run(107, run_id=KEEPER, store=store, clock=clock)
        await workflow.run(-1, run_id=ASKER, store=store, clock=clock)
    finally:
        await store.close()


if __name__ == "__main__":
    if sys.argv[1:2] != ["make"] or len(sys.argv) != 3:
        sys.exit(__doc__)
    Path(sys.argv[2]).unlink(missing_ok=True)
    asyncio.run(make(sys.argv[2]))
