"""A workflow whose every run makes five limited calls at once, for the call-limit campaigns.

``limited`` fans its input out to five callers in one superstep; each
waits for a slot of the ``api`` limit (declared here at the top level, so
``treadle worker --app limits_app`` declares it), writes its start and end
times to the file ``TREADLE_CALL_LOG`` names (one ``O_APPEND`` write a
line), and sends its result to a join. The output depends only on the
input, so a run interrupted any number of times ends with the outputs of
an uninterrupted one.
"""

from __future__ import annotations

import asyncio
import os
import time

from treadle import CallLimit, WorkflowBuilder, WorkflowContext, executor

CONCURRENCY = 4
CALLS = 25
PER = 1.0
CALL_SECONDS = 0.05
api = CallLimit("api", concurrency=CONCURRENCY, rate=f"{CALLS}/{PER}s")


def _note(line: str) -> None:
    path = os.environ.get("TREADLE_CALL_LOG")
    if path:
        descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(descriptor, line.encode())
        finally:
            os.close(descriptor)


@executor(id="fan")
async def fan(n: int, ctx: WorkflowContext) -> None:
    ctx.send_message(n)


def _caller(i: int):
    @executor(id=f"call{i}", limits=["api"])
    async def call(n: int, ctx: WorkflowContext) -> None:
        start = time.time()
        _note(f"start {start:.6f} {ctx.run_id} call{i} {os.getpid()}\n")
        await asyncio.sleep(CALL_SECONDS)
        _note(f"end {time.time():.6f} {ctx.run_id} call{i} {os.getpid()} {start:.6f}\n")
        ctx.send_message(n * 10 + i)

    return call


@executor(id="join")
async def join(values: list, ctx: WorkflowContext) -> None:
    ctx.yield_output(sum(values))


_callers = [_caller(i) for i in range(5)]
limited = (
    WorkflowBuilder(fan, name="limited", limits=["api"])
    .add_fan_out(fan, _callers)
    .add_fan_in(_callers, join)
    .build()
)


def expected_output(n: int) -> int:
    """What run ``n`` outputs, however often it was interrupted."""
    return sum(n * 10 + i for i in range(5))
