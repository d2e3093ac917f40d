"""The one way a handler is called: :func:`call_handler`.

An attempt awaits what it returns. When nothing surrounds the handler (no
span, no concurrency limit, no timeout; an ``async def``), that is the
handler's own coroutine, with no layer of the runner's around it: most
handlers are such, and each layer costs. Otherwise it is :func:`_guarded`,
one coroutine that opens the attempt's span, waits for the slots of the
executor's call limits (``_engine/_limiter.py``), takes the run's limit,
measures the handler's timeout on the run's clock, and runs the handler
where it runs: awaited, called on the loop, in a worker thread (one that
overruns its timeout is abandoned, see ``_engine/_threads.py``) or on an
executor pool (each attempt packed and unpacked by ``_engine/_remote.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from typing import TYPE_CHECKING, Any

from treadle._engine._later import ContinueLater
from treadle._engine._limits_call import give_back, slow_down, take_slots
from treadle._engine._remote import call_on_pool
from treadle._engine._threads import in_daemon_thread
from treadle._engine._waits import Suspend
from treadle._exceptions import HandlerTimeoutError, ProviderBusyError, RoutingError

if TYPE_CHECKING:
    from collections.abc import Coroutine

    from treadle._engine._context import WorkflowContext
    from treadle._engine._invocation import Invocation
    from treadle._engine._limiter import Slot
    from treadle._engine._tracing import TraceSpan
    from treadle._graph._executor import HandlerSpec


def call_handler(
    invocation: Invocation, ctx: WorkflowContext[object], attempt: int
) -> Coroutine[Any, Any, Any]:
    """What attempt ``attempt`` of ``invocation`` awaits: its handler, called."""
    spec = invocation.spec
    if (
        spec is not None
        and spec.is_async
        and invocation.timeout is None
        and invocation.env.plain_calls
    ):
        handler: Coroutine[Any, Any, Any] = invocation.executor.invoke(
            spec, invocation.envelope.payload, ctx
        )
        return handler
    return _guarded(invocation, ctx, attempt)


async def _guarded(invocation: Invocation, ctx: WorkflowContext[object], attempt: int) -> None:
    """The handler in the attempt's span, under the run's limit and its own timeout.

    Raises:
        RoutingError: the executor has no handler for the message.
        HandlerTimeoutError: the timeout passed first; the handler was
            cancelled (or, in a thread, abandoned).
    """
    spec = invocation.spec
    if spec is None:
        payload = invocation.envelope.payload
        msg = f"executor {ctx.executor_id!r} has no handler for {type(payload).__qualname__}"
        raise RoutingError(msg)
    env = invocation.env
    trace = env.trace
    span: TraceSpan | None = None
    with contextlib.ExitStack() as scope:
        if trace is not None:
            span = scope.enter_context(
                trace.invocation(ctx.superstep, ctx.executor_id, ctx.position, attempt)
            )
        slots: list[Slot] | None = None
        try:
            limiting = env.limiting
            if limiting is not None and ctx.executor_id in limiting.by_executor:
                slots = []
                ctx.hold_slots(slots)
                await take_slots(invocation, limiting, slots)
            limiter = env.limiter
            if limiter is not None:
                await limiter.acquire()
                scope.callback(limiter.release)
            if invocation.timeout is None:
                await _handler(invocation, spec, ctx)
            else:
                await _timed(invocation, spec, ctx)
        except Suspend:
            _outcome(span, "suspended")
            raise
        except ContinueLater:
            _outcome(span, "completed")
            raise
        except asyncio.CancelledError:
            _outcome(span, "cancelled")
            raise
        except ProviderBusyError as busy:
            _outcome(span, "failed", busy)
            if slots:
                await slow_down(ctx, slots, limiting.gate, busy.retry_after)  # type: ignore[union-attr]
            raise
        except Exception as error:
            _outcome(span, "failed", error)
            raise
        finally:
            if slots:
                await give_back(slots, limiting.gate)  # type: ignore[union-attr]
        _outcome(span, "completed")


def _outcome(span: TraceSpan | None, outcome: str, error: BaseException | None = None) -> None:
    if span is not None:
        span.set_outcome(outcome, error)


async def _timed(invocation: Invocation, spec: HandlerSpec, ctx: WorkflowContext[object]) -> None:
    """The handler under its own timeout, measured on the run's clock.

    Raises:
        HandlerTimeoutError: the timeout passed first.
    """
    timeout = invocation.timeout
    assert timeout is not None  # noqa: S101 - only a handler with a timeout is timed
    clock = invocation.env.clock
    work = asyncio.ensure_future(_handler(invocation, spec, ctx))
    timer = asyncio.ensure_future(clock.sleep_until(clock.now() + timeout))
    try:
        await asyncio.wait((work, timer), return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        work.cancel()
        raise
    finally:
        timer.cancel()
    if work.done():
        work.result()  # re-raise what the handler raised
        return
    # Too late: cancel it. Whatever it does from now on lands in this
    # attempt's context, which is discarded and never commits. One that does
    # not stop (it swallows the cancellation, or cleans up for long) is waited
    # for only so long, then left running, unheard, as a thread is: the
    # timeout bounds the attempt whatever the handler does.
    work.cancel()
    await asyncio.wait((work,), timeout=CANCEL_GRACE)
    if not work.done():
        work.add_done_callback(_heard_nothing)
    else:
        with contextlib.suppress(asyncio.CancelledError, Exception):
            work.result()
    raise HandlerTimeoutError(ctx.executor_id, timeout)


CANCEL_GRACE = 1.0
"""Seconds a timed-out handler is given to stop once cancelled, before it is left running."""


def _heard_nothing(work: asyncio.Future[None]) -> None:
    """Take the outcome of a handler left running after its timeout: nobody awaits it."""
    if not work.cancelled():
        work.exception()


async def _handler(invocation: Invocation, spec: HandlerSpec, ctx: WorkflowContext[object]) -> None:
    """The handler itself: awaited, called on the loop, run in a worker thread or on a pool."""
    executor = invocation.executor
    payload = invocation.envelope.payload
    if spec.is_async:
        await executor.invoke(spec, payload, ctx)
        return
    if spec.pool is not None:  # cancelled (timed out), it gives the job up: nothing lands
        await call_on_pool(invocation, spec, ctx, spec.pool)
        return
    if executor.sync_handlers == "loop":
        executor.invoke(spec, payload, ctx)
        return
    handler = functools.partial(executor.invoke, spec, payload, ctx)
    ctx.hand_to_thread()
    try:
        if invocation.timeout is None:
            await asyncio.to_thread(handler)
        else:  # it may be abandoned: on a thread nobody joins (see _engine/_threads.py)
            await in_daemon_thread(handler)
    except asyncio.CancelledError:
        ctx.abandon()  # timed out or cancelled: the thread runs on, unheard
        raise
