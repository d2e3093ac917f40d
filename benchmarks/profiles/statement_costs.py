"""What SQLite itself costs a durable superstep: ``python statement_costs.py [KIND] [RUNS]``.

KIND ``sync`` (the default), ``background`` or ``batched``: RUNS (default 30)
runs of ``ckpt_chain`` (a chain of 100 no-op executors) on a SQLite file in
/dev/shm, where an fsync costs next to nothing. Every statement the store's
connections execute is timed (a ``sqlite3.Connection`` subclass given to each
``sqlite3.connect``), and the table printed says, per statement text, how
often it ran per superstep and how long it took on average: what is left
of a superstep's CPU once the fsync is shared or free, and how much of it
is SQLite's, not treadle's Python. One more run goes first, unmeasured.
"""

from __future__ import annotations

import asyncio
import collections
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

NODES = 100
_spent: collections.defaultdict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0])


class _TimedConnection(sqlite3.Connection):
    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:  # type: ignore[override]
        began = time.perf_counter()
        try:
            return super().execute(sql, *args)
        finally:
            entry = _spent[" ".join(sql.split())[:72]]
            entry[0] += 1
            entry[1] += time.perf_counter() - began


_connect = sqlite3.connect


def _timed_connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
    return _connect(*args, factory=_TimedConnection, **kwargs)


sqlite3.connect = _timed_connect  # type: ignore[assignment]  # before treadle opens a store

from treadle import WorkflowBuilder, WorkflowContext, executor  # noqa: E402
from treadle.stores import SqliteStore  # noqa: E402


def _chain(n: int) -> Any:
    def forward(node_id: str) -> Any:
        @executor(id=node_id)
        async def step(msg: int, ctx: WorkflowContext[int]) -> None:
            ctx.send_message(msg + 1)

        return step

    @executor(id=f"n{n - 1}")
    async def last(msg: int, ctx: WorkflowContext[int]) -> None:
        ctx.yield_output(msg)

    nodes = [*(forward(f"n{i}") for i in range(n - 1)), last]
    return WorkflowBuilder(start=nodes[0]).add_chain(nodes).build()


async def _main(kind: str, runs: int) -> None:
    store = SqliteStore(Path(tempfile.mkdtemp(dir="/dev/shm")) / "runs.sqlite")
    try:
        workflow = _chain(NODES)
        await workflow.run(0, store=store, durability=kind)
        _spent.clear()
        cpu = time.process_time()
        for _ in range(runs):
            result = await workflow.run(0, store=store, durability=kind)
            assert result.outputs == [NODES - 1]  # noqa: S101 - a scratch check
        cpu = time.process_time() - cpu
    finally:
        await store.close()
    steps = runs * NODES
    total = sum(seconds for _, seconds in _spent.values())
    print(f"{kind}: {cpu / steps * 1e6:.0f} us of CPU a superstep (every thread), of which")
    print(f"SQLite statements {total / steps * 1e6:.1f} us:")
    print(f"{'per step':>9} {'us each':>8} {'us/step':>8}  statement")
    for text, (count, seconds) in sorted(_spent.items(), key=lambda kv: -kv[1][1])[:10]:
        each, per_step = seconds / count * 1e6, seconds / steps * 1e6
        print(f"{count / steps:9.2f} {each:8.1f} {per_step:8.1f}  {text}")


if __name__ == "__main__":
    kind = sys.argv[1] if len(sys.argv) > 1 else "sync"
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    asyncio.run(_main(kind, runs))
