"""A run whose spawned work never finishes; the test kills this process."""

import asyncio
import sys

from treadle import Executor, SpawnResult, WorkflowBuilder, WorkflowContext, handler
from treadle.stores import SqliteStore


class Waiter(Executor):
    def __init__(self) -> None:
        super().__init__("waiter")

    @handler
    async def start(self, msg: str, ctx: WorkflowContext) -> None:
        async def forever() -> None:
            print("working", flush=True)
            await asyncio.Event().wait()

        ctx.spawn(forever, name="forever")

    @handler
    async def done(self, result: SpawnResult, ctx: WorkflowContext) -> None:
        ctx.yield_output((result.name, result.lost))


def build(store):
    return WorkflowBuilder(start=Waiter, store=store).build()


async def main(path: str) -> None:
    await build(SqliteStore(path)).run("go", run_id="s1")


def cli() -> None:
    """The command line, run as a script or in a process forked for a test (``tests/forked.py``)."""
    asyncio.run(main(sys.argv[1]))


if __name__ == "__main__":
    cli()
