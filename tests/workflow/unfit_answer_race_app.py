"""Answerers racing for a request an unfit answer holds, each a process of its own.

``respond SPEC RUN REQUEST N GO``: says ``ready``, waits for the file
``GO``, answers ``REQUEST`` of ``RUN`` with ``N`` through
``Workflow.respond`` and prints what it was told, as JSON: the run's
outputs, or the error's type and message.

A SPEC starting with ``postgresql`` is a DSN (its schema in ``$RACE_SCHEMA``);
any other is an SQLite file.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

from treadle import WorkflowBuilder, WorkflowContext, executor
from treadle.errors import TreadleError
from treadle.stores import PostgresStore, SqliteStore


@executor(id="ask")
async def ask(x: int, ctx: WorkflowContext) -> None:
    n = await ctx.request("how many?", int)
    ctx.yield_output(x + n)


asker = WorkflowBuilder(ask, name="asker").build()


def store_of(spec: str) -> PostgresStore | SqliteStore:
    if spec.startswith("postgresql"):
        return PostgresStore(spec, schema=os.environ["RACE_SCHEMA"])
    return SqliteStore(spec)


async def respond(spec: str, run_id: str, request_id: str, n: str, go: str) -> None:
    store = store_of(spec)
    print("ready", flush=True)
    while not Path(go).exists():  # noqa: ASYNC110, ASYNC240 - another process makes it
        await asyncio.sleep(0.005)
    try:
        result = await asker.respond(run_id, {request_id: int(n)}, store=store)
        told = {"n": int(n), "outputs": result.outputs}
    except TreadleError as error:
        told = {"n": int(n), "error": type(error).__name__, "message": str(error)}
    finally:
        await store.close()
    print(json.dumps(told), flush=True)


def cli() -> None:
    """The command line, run in a process forked for a test (``tests/forked.py``)."""
    asyncio.run(respond(*sys.argv[2:]))
