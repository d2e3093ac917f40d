"""The workflow behind ``tests/stores/data/store-v4.sqlite``, and how that file was made.

The file was written by treadle as released before checkpoints were stored as
pieces (schema version 4, checkpoint format 1), by running this module::

    python tests/stores/upgrade_app.py make tests/stores/data/store-v4.sqlite

``test_upgrade.py`` opens a copy with today's treadle, which must migrate it
in place and carry its runs on. Keep the workflow as it is: the stored runs
were made by this exact graph.
"""

from __future__ import annotations

import asyncio
import operator
import sys
from pathlib import Path

from treadle import Workflow, WorkflowBuilder, WorkflowContext, executor
from treadle.stores import SqliteStore

PAUSED = "run-paused"
"""Asked for a review at its third entry, and waits for the answer."""
DONE = "run-done"
"""Answered and completed."""
FORKED = "run-forked"
"""A fork of ``DONE`` at its second checkpoint, never advanced."""
TRIMMED = "run-trimmed"
"""Completed, with only its last two checkpoints kept."""


def entry(n: int) -> str:
    """A log line of a few hundred bytes, different for every ``n``."""
    return f"entry {n}: " + "abcdefghij" * 20


def build() -> Workflow:
    @executor
    async def writer(n: int, ctx: WorkflowContext[int]) -> None:
        if n == 3:
            verdict = await ctx.request({"review": n}, str)
            ctx.state.set("log", [f"review: {verdict}"])
            ctx.yield_output(f"reviewed {verdict}")
            return
        ctx.state.set("log", [entry(n)])
        ctx.state.set("count", n)
        ctx.yield_output(n)
        ctx.send_message(n + 1)

    return (
        WorkflowBuilder(writer, name="notebook")
        .add_edge(writer, writer)
        .add_state("log", default=[], reducer=operator.add)
        .add_state("count", default=0)
        .build()
    )


async def make(path: str) -> None:
    """Write the runs described above into a new SQLite store at ``path``."""
    store = SqliteStore(path)
    workflow = build()
    try:
        await workflow.run(0, run_id=PAUSED, store=store)
        for run_id, verdict in ((DONE, "approved"), (TRIMMED, "fine")):
            [request] = (await workflow.run(0, run_id=run_id, store=store)).pending_requests
            await workflow.respond(run_id, {request.request_id: verdict}, store=store)
        await store.prune(TRIMMED, 2)
        history = await workflow.history(DONE, store=store)
        await workflow.fork(
            DONE,
            history.checkpoints[1].checkpoint_id,
            state_patch={"count": 100},
            new_run_id=FORKED,
            store=store,
        )
    finally:
        await store.close()


if __name__ == "__main__":
    if sys.argv[1:2] != ["make"] or len(sys.argv) != 3:
        sys.exit(__doc__)
    Path(sys.argv[2]).unlink(missing_ok=True)
    asyncio.run(make(sys.argv[2]))
