"""What an invocation asks its call limits for: one request per limit, in name order.

Each attempt takes a slot of every limit its executor names, in name
order, before its handler runs, and gives them back when the attempt ends
however it ends (returned, failed, suspended, timed out, cancelled); see
``_engine/_handler_call.py``. An attempt cancelled while it waits gives
its place in line up and holds nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
from time import perf_counter
from typing import TYPE_CHECKING, cast

from treadle._engine._events import LimitSlowed
from treadle._engine._limiter import Slot, SlotRequest
from treadle._graph._limits import LimitCall

if TYPE_CHECKING:
    from collections.abc import Awaitable, Sequence

    from treadle._engine._context import WorkflowContext
    from treadle._engine._invocation import Invocation
    from treadle._engine._limiter import CallGate, Limiting
    from treadle._graph._limits import CallLimit


def call_id(invocation: Invocation) -> str:
    """The call's identity: the same on every attempt and after its run is taken over."""
    env = invocation.env
    scope = f"{env.wait_scope}/" if env.wait_scope else ""
    executor_id = invocation.executor.id
    call = f"{env.run_id}/{scope}{invocation.superstep}/{executor_id}/{invocation.position}"
    return f"{call}~{env.branch}" if env.branch else call


def slot_requests(invocation: Invocation, limits: Sequence[CallLimit]) -> list[SlotRequest]:
    """The requests of one attempt of ``invocation``, one per limit, in the limits' order.

    The call is described (:class:`LimitCall`) only for a limit that computes
    a key, a priority or a token estimate from it.

    Raises:
        CallLimitError: a limit could never admit the call (its token
            estimate is above the limit's whole window).
    """
    env = invocation.env
    identity = call_id(invocation)
    call: LimitCall | None = None
    requests = []
    for limit in limits:
        if limit.key is None and limit.priority is None and limit.tokens is None:
            requests.append(SlotRequest(limit, identity, env.run_id))
            continue
        if call is None:
            executor_id = invocation.executor.id
            payload = invocation.envelope.payload
            call = LimitCall(payload, env.run_id, env.workflow.name, executor_id)
        requests.append(
            SlotRequest(
                limit,
                identity,
                env.run_id,
                limit.key_of(call),
                limit.priority_of(call),
                limit.estimate_of(call),
            )
        )
    return requests


async def take_slots(invocation: Invocation, limiting: Limiting, slots: list[Slot]) -> None:
    """Take a slot of each of the invocation's limits into ``slots``, waiting for each in turn.

    Filled as they are taken, so whoever gives ``slots`` back gives back
    those taken before a cancellation too.
    """
    gate = limiting.gate
    metrics = invocation.env.options.metrics
    for request in slot_requests(invocation, limiting.by_executor[invocation.executor.id]):
        asked = perf_counter()
        got = gate.acquire(request)
        if type(got) is not Slot:  # its turn comes later
            waiting = cast("Awaitable[Slot]", got)
            try:
                got = await waiting
            except asyncio.CancelledError:
                if (
                    isinstance(waiting, asyncio.Future)
                    and waiting.done()
                    and not waiting.cancelled()
                ):
                    slots.append(waiting.result())  # granted as it was cancelled
                raise
        slots.append(got)
        if metrics is not None:
            metrics.limit_wait(request.limit.name, perf_counter() - asked)


async def slow_down(
    ctx: WorkflowContext[object], slots: Sequence[Slot], gate: CallGate, seconds: float
) -> None:
    """Slow each limit ``slots`` hold down for ``seconds`` (a provider's ``Retry-After``).

    Each is recorded as a :class:`LimitSlowed` event of the invocation. A
    limit that cannot be slowed (its store is gone) is left: the attempt
    is tried again all the same.
    """
    for slot in slots:
        name = slot.request.limit.name
        with contextlib.suppress(Exception):
            pending = gate.slow_down(name, seconds)
            if pending is not None:
                await pending
        if ctx.listening:
            ctx.announce(LimitSlowed, position=ctx.position, limit=name, seconds=seconds)


async def give_back(slots: Sequence[Slot], gate: CallGate) -> None:
    """Release ``slots``, the last taken first; one that cannot be released is let go."""
    for slot in reversed(slots):
        with contextlib.suppress(Exception):  # its holder's lease ends it in the store anyway
            pending = gate.release(slot)
            if pending is not None:
                await pending
