"""A run resumed from an old checkpoint in one process while another prunes it, as scripts.

    python prune_race_app.py resume STORE RUN_ID CHECKPOINT_ID GO_FILE
        # time travel: prints "running" from the first resumed superstep, waits
        # for GO_FILE to exist, then prints how the resume ended
    python prune_race_app.py prune STORE RUN_ID   # keep only the latest checkpoint

STORE is a SQLite path, or ``postgresql://...#schema`` for a PostgreSQL schema.
"""

from __future__ import annotations

import asyncio
import operator
import sys
from pathlib import Path

from treadle import WorkflowBuilder, WorkflowContext, executor
from treadle.errors import CheckpointNotFoundError
from treadle.stores import PostgresStore, SqliteStore

LAST = 6
GO: Path | None = None


def build():
    @executor(id="write")
    async def write(n: int, ctx: WorkflowContext[int]) -> None:
        if GO is not None:
            print("running", flush=True)
            while not await asyncio.to_thread(GO.exists):  # noqa: ASYNC110 - another process makes it
                await asyncio.sleep(0.01)
        ctx.state.set("log", [f"line {n}"])
        if n % 2 == 0:  # a value later supersteps replace: only its checkpoints need it
            ctx.state.set("note", f"note {n}")
        if n < LAST:
            ctx.send_message(n + 1)

    return (
        WorkflowBuilder(write, name="pruned")
        .add_edge(write, write)
        .add_state("log", default=[], reducer=operator.add)
        .build()
    )


def open_store(where: str):
    if where.startswith("postgresql://"):
        dsn, schema = where.split("#")
        return PostgresStore(dsn, schema=schema)
    return SqliteStore(where)


async def main(mode: str, where: str, run_id: str, *rest: str) -> None:
    global GO
    store = open_store(where)
    try:
        if mode == "prune":
            print("pruned", await store.prune(run_id, 1), flush=True)
            return
        checkpoint_id, GO = rest[0], Path(rest[1])
        try:
            result = await build().resume(run_id, checkpoint_id, store=store)
        except CheckpointNotFoundError as error:
            print("refused", error.checkpoint_id, flush=True)
        else:
            print("completed", result.status.value, flush=True)
    finally:
        await store.close()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:]))
