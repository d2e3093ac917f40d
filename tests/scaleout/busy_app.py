"""Runs whose calls share a limit of one call at a time, one of which a provider answers 429.

Each run of ``busy`` makes one call under the ``api`` limit (one at a
time). The first call of run ``run-0000`` in the whole campaign (a file
created with ``O_EXCL`` says it came) raises ``ProviderBusyError`` with a
``Retry-After`` of ``RETRY_AFTER`` seconds, ``ANSWER`` seconds after it
started (holding the limit's one slot meanwhile): every process on the store
must then start no call of the limit for that long. Each call writes
``busy|start TIME RUN PID`` to the file ``TREADLE_CALL_LOG`` names (one
``O_APPEND`` write a line). ``python busy_app.py DB FIRST COUNT`` drives
runs ``run-FIRST`` .. on a SQLite file until every run in it has ended;
``treadle worker --app busy_app`` drives them on PostgreSQL.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time

from treadle import CallLimit, WorkflowBuilder, WorkflowContext, executor
from treadle.errors import ProviderBusyError

RETRY_AFTER = 1.0
ANSWER = 0.5  # how long the provider takes to refuse: the test starts the other process meanwhile
api = CallLimit("api", concurrency=1)


def _note(line: str) -> None:
    descriptor = os.open(os.environ["TREADLE_CALL_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(descriptor, line.encode())
    finally:
        os.close(descriptor)


def _first_busy() -> bool:
    """Whether this is the campaign's first call of run-0000 (the one the provider refuses)."""
    try:
        os.close(os.open(os.environ["TREADLE_CALL_LOG"] + ".busy", os.O_CREAT | os.O_EXCL))
    except FileExistsError:
        return False
    return True


@executor(id="call", limits=["api"])
async def call(n: int, ctx: WorkflowContext) -> None:
    start = time.time()
    refused = ctx.run_id == "run-0000" and _first_busy()
    _note(f"{'busy' if refused else 'start'} {start:.6f} {ctx.run_id} {os.getpid()}\n")
    if refused:
        await asyncio.sleep(ANSWER)
        raise ProviderBusyError(RETRY_AFTER)
    await asyncio.sleep(0.02)
    ctx.yield_output(n)


busy = WorkflowBuilder(call, limits=[api], name="busy").build()


def drive(path: str, first: int, count: int) -> None:
    """Drive runs ``run-FIRST`` .. on the SQLite file at ``path`` until every run has ended."""
    from limits_driver import drive_runs  # noqa: PLC0415 - a worker importing the app needs none

    asyncio.run(drive_runs(path, busy, api, first, count))


if __name__ == "__main__":
    drive(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
