"""Running the invocations of one superstep.

Every executor with messages runs concurrently (bounded by the run's
``max_concurrency``); each executor handles its own inbox one message at a
time, in delivery order, unless it declared ``concurrency=n``. Plain ``def``
handlers run in a worker thread, so a blocking handler never stalls the
async executors of the same superstep.

Failure is structured: the first handler to raise cancels its siblings
(``asyncio.TaskGroup``), and of the failures collected the one of lowest
(rank, position) is reported, so the error does not depend on timing.

A superstep with a single executor, or a deterministic run, creates no task
at all: the handlers are awaited inline, one after the other.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

from treadle._exceptions import ExecutorFailedError, HandlerTimeoutError, RoutingError
from treadle._runtime._clock import sleep_for
from treadle._runtime._context import WorkflowContext
from treadle._runtime._events import (
    ExecutorCompleted,
    ExecutorFailed,
    ExecutorInvoked,
    ExecutorSuspended,
    RequestEvent,
)
from treadle._runtime._policies import NO_RETRY
from treadle._runtime._waits import Suspend, Suspension

if TYPE_CHECKING:
    from collections.abc import Sequence

    from treadle._graph._executor import Executor, HandlerSpec
    from treadle._runtime._delivery import Envelope
    from treadle._runtime._events import WorkflowEvent
    from treadle._runtime._loop import RunLoop
    from treadle._runtime._policies import RetryPolicy
    from treadle._runtime._state import Op
    from treadle._runtime._tracing import RunTrace

Planned = tuple["Executor", int, "list[Envelope]"]
"""One executor's share of a superstep: (instance, rank, inbox)."""


async def run_superstep(
    run: RunLoop, superstep: int, plan: Sequence[Planned]
) -> list[WorkflowContext[object]]:
    """Run every planned invocation; return their contexts in stamp order.

    Raises:
        ExecutorFailedError: a handler raised (the lowest-ranked failure).
    """
    if len(plan) == 1 or run.options.deterministic:
        contexts: list[WorkflowContext[object]] = []
        for executor, rank, inbox in plan:
            contexts.extend(await _drain(run, superstep, executor, rank, inbox))
        return contexts
    results: list[list[WorkflowContext[object]]] = [[] for _ in plan]
    failure: ExecutorFailedError | None = None
    try:
        async with asyncio.TaskGroup() as group:
            for index, (executor, rank, inbox) in enumerate(plan):
                # No wrapper coroutine: _drain files its contexts under ``index`` itself.
                group.create_task(_drain(run, superstep, executor, rank, inbox, results, index))
    except BaseExceptionGroup as errors:
        failures = [e for e in _leaves(errors) if isinstance(e, ExecutorFailedError)]
        if not failures or len(failures) != len(_leaves(errors)):
            raise
        failure = min(failures, key=lambda e: run.ranks[e.executor_id])
    if failure is not None:
        raise failure
    return [ctx for contexts in results for ctx in contexts]


def _leaves(group: BaseExceptionGroup[BaseException]) -> list[BaseException]:
    found: list[BaseException] = []
    for error in group.exceptions:
        if isinstance(error, BaseExceptionGroup):
            found.extend(_leaves(error))
        else:
            found.append(error)
    return found


async def _drain(
    run: RunLoop,
    superstep: int,
    executor: Executor,
    rank: int,
    inbox: list[Envelope],
    into: list[list[WorkflowContext[object]]] | None = None,
    index: int = 0,
) -> list[WorkflowContext[object]]:
    """Handle one executor's inbox: in order, or ``concurrency`` at a time.

    The contexts are returned, and also stored at ``into[index]`` when given.
    """
    earlier: list[Sequence[Op]] = []
    if executor.concurrency == 1 or len(inbox) == 1:
        contexts = []
        for position, envelope in enumerate(inbox):
            ctx = await _invoke(run, superstep, executor, rank, position, envelope, earlier)
            contexts.append(ctx)
            if ctx._state is not None and ctx._state.ops and ctx.suspension is None:
                earlier.append(ctx._state.ops)
        if into is not None:
            into[index] = contexts
        return contexts
    slots = asyncio.Semaphore(executor.concurrency)
    done: list[WorkflowContext[object] | None] = [None] * len(inbox)

    async def one(position: int, envelope: Envelope) -> None:
        async with slots:
            ctx = await _invoke(run, superstep, executor, rank, position, envelope, earlier)
        done[position] = ctx
        if ctx._state is not None and ctx._state.ops and ctx.suspension is None:
            earlier.append(ctx._state.ops)

    async with asyncio.TaskGroup() as group:
        for position, envelope in enumerate(inbox):
            group.create_task(one(position, envelope))
    finished = [ctx for ctx in done if ctx is not None]
    if into is not None:
        into[index] = finished
    return finished


async def _invoke(
    run: RunLoop,
    superstep: int,
    executor: Executor,
    rank: int,
    position: int,
    envelope: Envelope,
    earlier: Sequence[Sequence[Op]],
) -> WorkflowContext[object]:
    """One handler on one message: retries, timeout, events, error wrapping.

    Each attempt gets a fresh context, so nothing a failed attempt sent or
    wrote can commit; the events it raised are kept for the batch.
    """
    executor_id = executor.id
    payload = envelope.payload
    spec = executor.find_handler(type(payload))
    timeout = (spec.timeout if spec else None) or executor.timeout
    listening = run.listening
    trace = run.trace
    carried: list[WorkflowEvent] = []
    attempt = 1
    while True:
        ctx: WorkflowContext[object] = WorkflowContext(
            run, executor_id, rank, position, superstep, envelope, earlier
        )
        ctx._events = carried
        if run.backpressure is not None:
            await run.backpressure()
        if listening:  # built directly: announce()'s keyword packing costs on every step
            ctx.emit(
                ExecutorInvoked(
                    run_id=run.run_id,
                    superstep=superstep,
                    executor_id=executor_id,
                    position=position,
                    attempt=attempt,
                )
            )
        try:
            if spec is None:
                msg = f"executor {executor_id!r} has no handler for {type(payload).__qualname__}"
                raise RoutingError(msg)  # noqa: TRY301 - reported like a handler error
            if trace is None and timeout is None and run.limiter is None and spec.is_async:
                # The common case, awaited directly: each coroutine layer costs.
                await executor.invoke(spec, payload, ctx)
            elif trace is None:
                await _call_bounded(run, executor, spec, payload, ctx, timeout)
            else:
                await _call_traced(trace, run, executor, spec, payload, ctx, timeout, attempt)
        except Suspend as suspend:
            ctx.suspension = Suspension(executor_id, envelope, ctx._journal, suspend.wait)
            if listening:
                wait = suspend.wait
                ctx.announce(ExecutorSuspended, position=position, wait=wait.kind, key=wait.key)
                if suspend.wait.kind == "request":
                    ctx.announce(
                        RequestEvent,
                        request_id=wait.key,
                        payload=wait.payload,
                        response_type=wait.response_type,
                    )
            return ctx
        except Exception as error:
            policy = _retry_policy(run, executor, spec)  # read only when something failed
            retrying = policy.should_retry(error, attempt)
            if listening and (retrying or run.live):  # a batch reports the final failure itself
                ctx.announce(
                    ExecutorFailed,
                    position=position,
                    error=error,
                    attempt=attempt,
                    retrying=retrying,
                )
            if not retrying:
                failure = ExecutorFailedError(executor_id, superstep, error)
                failure.attempt = attempt
                failure.events = ctx._events  # for a batch: what this invocation raised
                raise failure from error
            carried = ctx._events
            await sleep_for(run.clock, policy.backoff.delay(attempt))
            attempt += 1
            continue
        if listening:
            ctx.emit(
                ExecutorCompleted(
                    run_id=run.run_id,
                    superstep=superstep,
                    executor_id=executor_id,
                    position=position,
                )
            )
        return ctx


async def _call_traced(
    trace: RunTrace,
    run: RunLoop,
    executor: Executor,
    spec: HandlerSpec,
    payload: object,
    ctx: WorkflowContext[object],
    timeout: float | None,  # noqa: ASYNC109 - enforced on the injected clock, not asyncio's
    attempt: int,
) -> None:
    """:func:`_call_bounded` in the attempt's span, current while the handler runs."""
    with trace.invocation(ctx.superstep, executor.id, ctx.position, attempt) as span:
        try:
            await _call_bounded(run, executor, spec, payload, ctx, timeout)
        except Suspend:
            span.set_outcome("suspended")
            raise
        except asyncio.CancelledError:
            span.set_outcome("cancelled")
            raise
        except Exception as error:
            span.set_outcome("failed", error)
            raise
        span.set_outcome("completed")


def _retry_policy(run: RunLoop, executor: Executor, spec: HandlerSpec | None) -> RetryPolicy:
    """The most specific retry policy: the handler's, the executor's, the workflow's."""
    return (spec.retry if spec else None) or executor.retry or run.options.retry or NO_RETRY


async def _call_bounded(
    run: RunLoop,
    executor: Executor,
    spec: HandlerSpec,
    payload: object,
    ctx: WorkflowContext[object],
    timeout: float | None,  # noqa: ASYNC109 - enforced on the injected clock, not asyncio's
) -> None:
    """The handler under the run's concurrency limit and its own timeout."""
    limiter = run.limiter
    if limiter is not None:
        async with limiter:
            await _call_timed(run, executor, spec, payload, ctx, timeout)
    else:
        await _call_timed(run, executor, spec, payload, ctx, timeout)


async def _call_timed(
    run: RunLoop,
    executor: Executor,
    spec: HandlerSpec,
    payload: object,
    ctx: WorkflowContext[object],
    timeout: float | None,  # noqa: ASYNC109 - enforced on the injected clock, not asyncio's
) -> None:
    if timeout is None:
        await _call(executor, spec, payload, ctx)
        return
    clock = run.clock
    work = asyncio.ensure_future(_call(executor, spec, payload, ctx))
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
    # Too late: cancel it (a thread cannot be stopped, but whatever it does
    # from now on lands in this discarded context and never commits).
    work.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await work
    raise HandlerTimeoutError(executor.id, timeout)


async def _call(
    executor: Executor, spec: HandlerSpec, payload: object, ctx: WorkflowContext[object]
) -> None:
    if spec.is_async:
        await executor.invoke(spec, payload, ctx)
    elif executor.sync_handlers == "loop":
        executor.invoke(spec, payload, ctx)
    else:
        ctx.threaded = True
        try:
            await asyncio.to_thread(executor.invoke, spec, payload, ctx)
        finally:
            ctx.threaded = False
