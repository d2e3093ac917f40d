"""A shop whose card charge always fails, routed to a refund: run as a script by the tests.

    python error_route_app.py run    STORE RUN_ID HANG_MARKER  # the refund hangs, once marked
    python error_route_app.py resume STORE RUN_ID              # resumes in a new process

``kick`` fans an order out to ``charge`` and ``pack`` (superstep 2):
``charge`` fails both its attempts and its error route takes the failure
to ``refund``, while ``pack`` commits and sends to ``ship`` (superstep 3).
With a marker path, ``refund`` writes the marker and hangs, so the test can
SIGKILL the process with the routed superstep committed and the failure
pending. Messages are plain strings so that the test's process, which
imports this module rather than running it, decodes the same checkpoint.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from treadle import (
    ExecutorFailure,
    ExponentialBackoff,
    RetryPolicy,
    WorkflowBuilder,
    WorkflowContext,
    executor,
)
from treadle.stores import SqliteStore

HANG_MARKER = ""
RETRY = RetryPolicy(max_attempts=2, backoff=ExponentialBackoff(initial=0, maximum=0))


class CardDeclined(Exception):
    pass


@executor
async def kick(order: str, ctx: WorkflowContext[str]) -> None:
    ctx.send_message(order)


@executor(retry=RETRY)
async def charge(order: str, ctx: WorkflowContext[str]) -> None:
    ctx.state.set("charged", order)
    ctx.send_message(f"paid {order}")
    raise CardDeclined(f"card declined for {order}")


@executor
async def pack(order: str, ctx: WorkflowContext[str]) -> None:
    ctx.state.set("packed", order)
    ctx.send_message(order)


@executor
async def ship(order: str, ctx: WorkflowContext) -> None:
    ctx.yield_output(f"shipped {order}")


def _mark(superstep: int) -> None:
    """Write the marker whole, then rename it into place: the test reads it once it exists."""
    written = Path(f"{HANG_MARKER}.part")
    written.write_text(str(superstep))
    written.replace(HANG_MARKER)


@executor
async def refund(failure: ExecutorFailure, ctx: WorkflowContext) -> None:
    if HANG_MARKER:
        _mark(ctx.superstep)
        await asyncio.Event().wait()  # until the test kills the process
    ctx.state.set("refunded", failure.input)
    kind = failure.error_type.rsplit(".", 1)[-1]  # its module is __main__ in a script
    ctx.yield_output(f"refunded {failure.input} after {failure.attempts}: {kind}")


def build(store=None, *, routed_from: str = "charge"):
    """The shop; ``routed_from="pack"`` moves the error route (a changed graph)."""
    return (
        WorkflowBuilder(start=kick, name="shop", store=store)
        .add_fan_out(kick, [charge, pack])
        .add_edge(charge, ship)
        .add_edge(pack, ship)
        .add_error_edge(routed_from, refund)
        .build()
    )


def outcome(result) -> str:
    return json.dumps(
        {"status": result.status.value, "outputs": result.outputs, "state": dict(result.state)},
        sort_keys=True,
    )


async def main(mode: str, store_path: str, run_id: str) -> None:
    store = SqliteStore(store_path)
    workflow = build(store)
    try:
        if mode == "run":
            result = await workflow.run("o-1", run_id=run_id, record_events=False)
        else:
            result = await workflow.resume(run_id, record_events=False)
        print(outcome(result), flush=True)
    finally:
        await store.close()


if __name__ == "__main__":
    _, mode, store_path, run_id, *marker = sys.argv
    HANG_MARKER = marker[0] if marker else ""
    asyncio.run(main(mode, store_path, run_id))
