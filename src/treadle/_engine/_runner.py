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

from treadle._engine._clock import sleep_for
from treadle._engine._context import WorkflowContext
from treadle._engine._errors import ExecutorFailedError
from treadle._engine._events import (
    ExecutorFailed,
    ExecutorSuspended,
    RequestEvent,
    executor_completed,
    executor_invoked,
)
from treadle._engine._waits import Suspend, Suspension
from treadle._exceptions import HandlerTimeoutError, RoutingError
from treadle._graph._policies import NO_RETRY

if TYPE_CHECKING:
    from collections.abc import Sequence

    from treadle._engine._delivery import Envelope
    from treadle._engine._events import WorkflowEvent
    from treadle._engine._loop import RunLoop
    from treadle._engine._state import Op
    from treadle._engine._tracing import RunTrace
    from treadle._engine._waits import Wait
    from treadle._graph._executor import Executor, HandlerSpec
    from treadle._graph._policies import RetryPolicy

Planned = tuple["Executor", int, "list[Envelope]"]
"""One executor's share of a superstep: (instance, rank, inbox)."""


async def run_superstep(
    run: RunLoop, superstep: int, plan: Sequence[Planned]
) -> list[WorkflowContext[object]]:
    """Run every planned invocation; return their contexts in stamp order.

    Raises:
        ExecutorFailedError: a handler raised (the lowest-ranked failure).
    """
    if len(plan) == 1 and len(plan[0][2]) == 1:  # one invocation: no inbox to drain
        executor, rank, inbox = plan[0]
        return [await _invoke(run, superstep, executor, rank, 0, inbox[0], ())]
    if len(plan) == 1 or run.options.deterministic:
        contexts: list[WorkflowContext[object]] = []
        for executor, rank, inbox in plan:
            contexts.extend(await _drain(run, superstep, executor, rank, inbox))
        return contexts
    tasks: list[asyncio.Task[WorkflowContext[object] | list[WorkflowContext[object]]]] = []
    failure: ExecutorFailedError | None = None
    try:
        async with asyncio.TaskGroup() as group:
            for executor, rank, inbox in plan:
                # One message: the invocation itself is the task, with no inbox to drain.
                tasks.append(
                    group.create_task(
                        _invoke(run, superstep, executor, rank, 0, inbox[0], ())
                        if len(inbox) == 1
                        else _drain(run, superstep, executor, rank, inbox)
                    )
                )
    except BaseExceptionGroup as errors:
        failures = [e for e in _leaves(errors) if isinstance(e, ExecutorFailedError)]
        if not failures or len(failures) != len(_leaves(errors)):
            raise
        failure = min(failures, key=lambda e: run.ranks[e.executor_id])
    if failure is not None:
        raise failure
    contexts = []
    for task in tasks:
        done = task.result()
        if isinstance(done, list):
            contexts.extend(done)
        else:
            contexts.append(done)
    return contexts


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
) -> list[WorkflowContext[object]]:
    """Handle one executor's inbox: in order, or ``concurrency`` at a time."""
    earlier: list[Sequence[Op]] = []
    if executor.concurrency == 1 or len(inbox) == 1:
        contexts = []
        for position, envelope in enumerate(inbox):
            ctx = await _invoke(run, superstep, executor, rank, position, envelope, earlier)
            contexts.append(ctx)
            if ctx._state is not None and ctx._state.ops and ctx.suspension is None:
                earlier.append(ctx._state.ops)
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
    return [ctx for ctx in done if ctx is not None]


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
    carried: list[WorkflowEvent] = []  # every attempt's events, kept for the barrier's batch
    for_barrier = listening and not run.live  # else events go out live, through ctx.emit
    attempt = 1
    while True:
        ctx: WorkflowContext[object] = WorkflowContext(
            run, executor_id, rank, position, superstep, envelope, earlier, carried
        )
        if run.backpressure is not None:
            await run.backpressure()
        if for_barrier:  # what ctx.emit comes to, without the call: this runs every invocation
            carried.append(executor_invoked(run.run_id, superstep, executor_id, position, attempt))
        elif listening:
            ctx.emit(executor_invoked(run.run_id, superstep, executor_id, position, attempt))
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
            _suspended(ctx, envelope, suspend.wait)
            return ctx
        except Exception as error:  # noqa: BLE001 - retried, or raised wrapped by _failed
            policy = _retry_policy(run, executor, spec)  # read only when something failed
            _failed(ctx, error, attempt, retrying=policy.should_retry(error, attempt))
            await sleep_for(run.clock, policy.backoff.delay(attempt))
            attempt += 1
            continue
        if for_barrier:
            carried.append(executor_completed(run.run_id, superstep, executor_id, position))
        elif listening:
            ctx.emit(executor_completed(run.run_id, superstep, executor_id, position))
        return ctx


def _suspended(ctx: WorkflowContext[object], envelope: Envelope, wait: Wait) -> None:
    """Record that the invocation reached a durable wait, and announce it."""
    ctx.suspension = Suspension(ctx.executor_id, envelope, ctx._journal or [], wait)
    if ctx._run.listening:
        ctx.announce(ExecutorSuspended, position=ctx.position, wait=wait.kind, key=wait.key)
        if wait.kind == "request":
            ctx.announce(
                RequestEvent,
                request_id=wait.key,
                payload=wait.payload,
                response_type=wait.response_type,
            )


def _failed(
    ctx: WorkflowContext[object], error: Exception, attempt: int, *, retrying: bool
) -> None:
    """Announce a failed attempt; unless it is retried, raise it as the executor's failure.

    Raises:
        ExecutorFailedError: ``error`` ends the invocation (no retry left).
    """
    run = ctx._run
    if run.listening and (retrying or run.live):  # a batch reports the final failure itself
        ctx.announce(
            ExecutorFailed, position=ctx.position, error=error, attempt=attempt, retrying=retrying
        )
    if not retrying:
        failure = ExecutorFailedError(ctx.executor_id, ctx.superstep, error)
        failure.attempt = attempt
        failure.events = ctx._events  # for a batch: what this invocation raised
        raise failure from error


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
