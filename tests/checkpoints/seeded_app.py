"""A program that seeds Python's ``random`` as it starts, then runs a workflow on a store.

``run(store, label)``: ``random.seed(42)``, as a script wanting reproducible
results does (every process running this seeds alike), then one run whose
step keeps a value naming ``label`` in its state at each of its supersteps;
prints the run's id. STORE is a SQLite path or a ``postgresql://`` DSN
(schema from ``SEEDED_SCHEMA``).
"""

from __future__ import annotations

import asyncio
import os
import random

from treadle import WorkflowBuilder, WorkflowContext, executor
from treadle.stores import PostgresStore, SqliteStore

STEPS = 3


def workflow(label: str):
    @executor(id="step")
    async def step(i: int, ctx: WorkflowContext[int]) -> None:
        ctx.yield_output(ctx.state["value"])  # what this superstep found
        ctx.state.set("value", f"{label} at step {i}")
        if i < STEPS:
            ctx.send_message(i + 1)

    return WorkflowBuilder(start=step).add_edge(step, step).add_state("value", default="").build()


async def _run(store_url: str, label: str) -> str:
    if store_url.startswith("postgresql://"):
        store = PostgresStore(store_url, schema=os.environ["SEEDED_SCHEMA"])
    else:
        store = SqliteStore(store_url)
    try:
        result = await workflow(label).run(0, store=store)
    finally:
        await store.close()
    return result.run_id


def run(store_url: str, label: str) -> None:
    random.seed(42)
    print(asyncio.run(_run(store_url, label)))
