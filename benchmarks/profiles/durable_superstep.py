"""Durable supersteps on SQLite for a profiler: ``python durable_superstep.py KIND N``.

KIND ``sync``, ``background`` or ``batched``: N runs of ``ckpt_chain`` (a chain of
100 no-op executors, every superstep checkpointed); ``many``: N rounds of 100
concurrent runs of ``many_durable_runs``' 5-executor chain (``durability="sync"``).
One more unit runs first, unmeasured. The store lives in /dev/shm, so its fsyncs
cost next to nothing and what shows is CPU. ``PROFILE_INLINE=1`` lets the store's
writer run every commit on the caller's thread, as it does on a quick disk
(under valgrind its calls are slow, so they would all go to its thread).

Instructions per unit (see README.md): run it under
``valgrind --tool=callgrind`` with N and with N + 2, and divide the difference.
"""

import asyncio
import os
import sys
import tempfile
from pathlib import Path

from treadle import WorkflowBuilder, WorkflowContext, executor
from treadle._stores import _sqlite_lanes
from treadle.stores import SqliteStore


def _forward(node_id: str):
    @executor(id=node_id)
    async def forward(msg: int, ctx: WorkflowContext[int]) -> None:
        ctx.send_message(msg + 1)

    return forward


def _last(node_id: str):
    @executor(id=node_id)
    async def last(msg: int, ctx: WorkflowContext[int]) -> None:
        ctx.yield_output(msg)

    return last


def _chain(n: int):
    nodes = [_forward(f"n{i}") for i in range(n - 1)]
    nodes.append(_last(f"n{n - 1}"))
    return WorkflowBuilder(start=nodes[0]).add_chain(nodes).build()


async def _main(kind: str, units: int) -> None:
    store = SqliteStore(Path(tempfile.mkdtemp(dir="/dev/shm")) / "runs.sqlite")
    try:
        if kind == "many":
            workflow = _chain(5)
            for _ in range(units + 1):
                runs = (workflow.run(0, store=store, durability="sync") for _ in range(100))
                results = await asyncio.gather(*runs)
                assert all(r.outputs == [4] for r in results)  # noqa: S101
        else:
            workflow = _chain(100)
            for _ in range(units + 1):
                result = await workflow.run(0, store=store, durability=kind)
                assert result.outputs == [99]  # noqa: S101
    finally:
        await store.close()


if __name__ == "__main__":
    if os.environ.get("PROFILE_INLINE"):
        _sqlite_lanes.INLINE_UNDER = 10.0
    asyncio.run(_main(sys.argv[1], int(sys.argv[2])))
