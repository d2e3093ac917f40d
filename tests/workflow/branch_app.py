"""A session under ``rollback`` whose invocations write down their idempotency keys, as a script.

    python branch_app.py send STORE SIDE MESSAGE
        # send MESSAGE to the session "s1" and drive it until it rests

``keyed`` appends ``MESSAGE KEY`` to the file SIDE for every message it
takes. Its turn on ``m1`` holds at the file gate ``SIDE.gate`` (writing
``SIDE.gate.reached``); with ``BRANCH_HOLD`` set in the environment, its
turn on ``m2`` writes its key, then ``SIDE.m2`` and waits for ever: the
process is killed there, mid-superstep on the branch ``m2`` made.
"""

from __future__ import annotations

import asyncio
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from treadle import InputPolicy, WorkflowBuilder, WorkflowContext, executor


@dataclass(frozen=True)
class Listen:
    """What a turn hands back to the session: wait for the next message."""


@executor(id="keyed")
async def keyed(message: str | Listen, ctx: WorkflowContext) -> None:
    if isinstance(message, Listen):
        ctx.send_message(await ctx.wait_for_input(), target="keyed")
        return
    side = Path(ctx.state["side"])
    with side.open("a") as out:  # noqa: ASYNC230 - one short line
        out.write(f"{message} {ctx.idempotency_key}\n")
    if message == "m1":
        Path(f"{side}.gate.reached").touch()  # noqa: ASYNC240 - a marker file, once
        while not Path(f"{side}.gate").exists():  # noqa: ASYNC110, ASYNC240 - the test opens it
            await asyncio.sleep(0.01)
    if message == "m2" and os.environ.get("BRANCH_HOLD"):
        Path(f"{side}.m2").touch()  # noqa: ASYNC240 - a marker file, once
        await asyncio.Event().wait()  # killed here
    ctx.yield_output(f"done {message}")
    ctx.send_message(Listen(), target="keyed")


chat = (
    WorkflowBuilder(keyed, name="keyed", input_policy=InputPolicy.ROLLBACK)
    .add_edge(keyed, keyed)
    .add_state("side", default="")
    .build()
)


async def main(command: str, store_path: str, side: str, message: str) -> None:
    from treadle.stores import SqliteStore  # noqa: PLC0415

    store = SqliteStore(store_path)
    try:
        if command == "send":
            await chat.send_message("s1", message, store=store)
    finally:
        await store.close()


def cli() -> None:
    """The command line, run in a process forked for a test (``tests/forked.py``)."""
    asyncio.run(main(*sys.argv[1:]))
