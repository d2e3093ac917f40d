"""One invocation: a handler on one message, with its attempts, events and retries.

Each attempt gets a fresh context, so nothing a failed attempt sent or
wrote can commit; the events it raised are kept for the batch. What the
invocation hands to the barrier is one :class:`InvocationOutcome`, kept on
the invocation.

:func:`invoke` is the one coroutine that runs an invocation's attempts,
going on from an :class:`Attempt`; each calls its handler the one way
there is (``_engine/_handler_call.py``). Whether an invocation starts
inline or in a task is the runner's policy (``_engine/_runner.py``); on
Python 3.11, which has no eager tasks, :func:`start_invocation` starts it
inline by hand, up to its first wait (see ``_engine/_eager.py``).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from treadle._engine._clock import sleep_for
from treadle._engine._context import WorkflowContext, new_context
from treadle._engine._eager import Resumed, Started, start
from treadle._engine._errors import ExecutorFailedError
from treadle._engine._events import (
    ExecutorFailed,
    ExecutorSuspended,
    RequestEvent,
    executor_completed,
    executor_invoked,
)
from treadle._engine._failure import routed_failure
from treadle._engine._handler_call import call_handler
from treadle._engine._later import ContinueLater
from treadle._engine._remote import retries_remote
from treadle._engine._waits import Suspend
from treadle._exceptions import ProviderBusyError
from treadle._graph._policies import NO_RETRY
from treadle._values._text import error_text

if TYPE_CHECKING:
    from collections.abc import Awaitable

    from treadle._engine._events import WorkflowEvent
    from treadle._engine._invocation import Invocation, InvocationOutcome
    from treadle._engine._waits import Wait
    from treadle._graph._policies import RetryPolicy

BUSY_TRIES = 10
"""Attempts in a row a provider's 429 (``ProviderBusyError``) is tried, beside the retry policy."""


@dataclass(slots=True)
class Attempt:
    """The attempt :func:`invoke` goes on with (one :func:`start_invocation` began inline).

    Attributes:
        number: Which attempt it is (the first is 1).
        events: The events kept so far (every attempt's).
        running: Its context and the rest of its handler call, under way;
            ``None`` to start it afresh.
        delay: The backoff to sleep first, after a failed attempt.
        busy: How many of the attempts so far a provider turned away
            (``ProviderBusyError``): they are not the retry policy's.
    """

    number: int
    events: list[WorkflowEvent]
    running: tuple[WorkflowContext[object], Awaitable[Any]] | None = None
    delay: float | None = None
    busy: int = 0


def start_invocation(invocation: Invocation) -> Started[None] | None:
    """Run ``invocation`` inline, in the current context, until it ends or first waits.

    Returns ``None`` once it has ended (its ``outcome`` is set), else what
    remains of it, to await in the task that started it. A handler that is
    simply awaited is called right here, with no coroutine of the runner's
    own around it: most return without waiting, and that layer is then
    most of what is left to save.

    Raises:
        ExecutorFailedError: it failed before waiting, with no retry and no error route left.
    """
    run = invocation.env
    spec = invocation.spec
    if not (run.inline_calls and invocation.timeout is None and spec is not None and spec.is_async):
        return start(invoke(invocation))  # the whole of it, started inline
    # As invoke's first attempt does (inline_calls: events, if any, go to the batch),
    # keeping them in a tuple while the handler raises none of its own.
    listening = run.listening
    ctx: WorkflowContext[object] = new_context(
        invocation,
        (
            executor_invoked(
                run.run_id,
                invocation.superstep,
                invocation.executor.id,
                invocation.position,
                1,
                run.clock.now(),  # kept to the barrier (inline calls batch): when it began
            ),
        )
        if listening
        else (),
    )
    handler = call_handler(invocation, ctx, 1)  # inline_calls: the handler's own coroutine
    try:
        yielded = handler.send(None)
    except (StopIteration, ContinueLater):  # it returned, or ended itself to go on later
        invocation.outcome = (
            ctx.outcome(
                executor_completed(
                    run.run_id,
                    invocation.superstep,
                    ctx.executor_id,
                    invocation.position,
                    run.clock.now(),
                )
            )
            if listening
            else ctx.outcome()
        )
        return None
    except Suspend as suspend:
        invocation.outcome = _suspended(invocation, ctx, suspend.wait)
        return None
    except (Exception, asyncio.CancelledError) as raised:  # noqa: BLE001 - see _failure_of
        error = _failure_of(raised)
        delay = _failed(invocation, ctx, ctx.kept_events(), error, 1)
        if delay is None:  # its error route took it: the outcome is set
            return None
        busy = int(isinstance(error, ProviderBusyError))
        return start(invoke(invocation, Attempt(2, ctx.kept_events(), delay=delay, busy=busy)))
    rest = Resumed(handler, yielded)  # stepped in the context invoke itself is stepped in
    return start(invoke(invocation, Attempt(1, ctx.kept_events(), (ctx, rest))))


async def invoke(invocation: Invocation, attempt_from: Attempt | None = None) -> None:
    """Every attempt of ``invocation`` (from ``attempt_from``); its ``outcome`` is set.

    Raises:
        ExecutorFailedError: the last attempt failed, and the executor has no error route.
    """
    run = invocation.env
    listening = run.listening
    batching = run.batching  # events kept for the barrier's batch, else emitted live
    # Every attempt's events: a tuple until a list must keep more (see WorkflowContext).
    events: list[WorkflowEvent] | tuple[WorkflowEvent, ...]
    if attempt_from is None:
        events, attempt, running, busy = (), 1, None, 0
    else:
        events, attempt, running = attempt_from.events, attempt_from.number, attempt_from.running
        busy = attempt_from.busy
        if attempt_from.delay is not None:
            await sleep_for(run.clock, attempt_from.delay)
    while attempt:  # 0 once an error route has taken the failure (the outcome is set)
        if running is not None:
            ctx, call = running
            running = None
        else:
            if run.backpressure is not None:
                await run.backpressure()
            invoked = (
                executor_invoked(
                    run.run_id,
                    invocation.superstep,
                    invocation.executor.id,
                    invocation.position,
                    attempt,
                    run.clock.now() if batching else None,  # kept to the barrier: when it began
                )
                if listening
                else None
            )
            if invoked is not None and batching:  # kept without a call: this runs every time
                if type(events) is list:  # a retry: the list the failed attempt kept in
                    events.append(invoked)
                else:
                    events = (*events, invoked)
            ctx = new_context(invocation, events)
            if invoked is not None and not batching:
                ctx.emit(invoked)
            spec = invocation.spec
            # call_handler's plain case (the usual one), without its frame.
            call = (
                invocation.executor.invoke(spec, invocation.envelope.payload, ctx)
                if spec is not None
                and spec.is_async
                and invocation.timeout is None
                and run.plain_calls
                else call_handler(invocation, ctx, attempt)
            )
        try:
            await call
        except Suspend as suspend:
            invocation.outcome = _suspended(invocation, ctx, suspend.wait)
            return
        except ContinueLater:
            pass  # it ended itself early: it completes, and its LaterWork says when it goes on
        except (Exception, asyncio.CancelledError) as raised:  # noqa: BLE001 - see _failure_of
            error = _failure_of(raised)
            events = ctx.kept_events()  # the next attempt keeps in the same list
            attempt = await _next_attempt(invocation, ctx, events, error, attempt, busy)
            busy += isinstance(error, ProviderBusyError)
            continue
        invocation.outcome = _completed(invocation, ctx) if listening else ctx.outcome()
        return


# -- what each attempt reports --------------------------------------------------------
def _completed(invocation: Invocation, ctx: WorkflowContext[object]) -> InvocationOutcome:
    """Report that the handler returned (to a listener); its outcome is all it did."""
    run = invocation.env
    if run.batching:  # kept to the barrier: stamped with when it ended
        completed = executor_completed(
            run.run_id, invocation.superstep, ctx.executor_id, invocation.position, run.clock.now()
        )
        return ctx.outcome(completed)
    completed = executor_completed(
        run.run_id, invocation.superstep, ctx.executor_id, invocation.position
    )
    ctx.emit(completed)
    return ctx.outcome()


def _suspended(
    invocation: Invocation, ctx: WorkflowContext[object], wait: Wait
) -> InvocationOutcome:
    """Report that the handler reached a durable wait; its outcome is the suspension."""
    if invocation.env.listening:
        ctx.announce(ExecutorSuspended, position=ctx.position, wait=wait.kind, key=wait.key)
        if wait.kind == "request":
            ctx.announce(
                RequestEvent,
                request_id=wait.key,
                payload=wait.payload,
                response_type=wait.response_type,
                approvers=wait.approvers,
                four_eyes=wait.four_eyes,
                deadline_at=wait.due_at,
            )
    return ctx.suspended_at(wait)


def _failed(
    invocation: Invocation,
    ctx: WorkflowContext[object],
    events: list[WorkflowEvent],
    error: Exception,
    attempt: int,
    busy: int = 0,
) -> float | None:
    """Report a failed attempt; return the backoff before the next one.

    ``None``: no retry is left and the executor has an error route, so the
    invocation ends here, its outcome the :class:`ExecutorFailure` sent
    along it (see ``_engine/_failure.py``).

    A provider that turned the call away (``ProviderBusyError``, ``busy``
    times so far) is tried again up to :data:`BUSY_TRIES` times in a row,
    whatever the retry policy says, and the policy counts only the other
    attempts. Its limits were slowed down for ``retry_after`` as the
    attempt ended (``_engine/_handler_call.py``), so the next attempt waits
    for its slot; an executor under no limit waits ``retry_after`` here.

    Raises:
        ExecutorFailedError: ``error`` ends the invocation (no retry left, no route).
    """
    run = invocation.env
    policy = _retry_policy(invocation)
    if isinstance(error, ProviderBusyError) and busy < BUSY_TRIES - 1:
        if run.listening:
            ctx.announce(
                ExecutorFailed, position=ctx.position, error=error, attempt=attempt, retrying=True
            )
        limiting = run.limiting
        limited = limiting is not None and ctx.executor_id in limiting.by_executor
        return 0.0 if limited else error.retry_after
    tries = attempt - busy
    try:
        retrying = policy.should_retry(error, tries) or retries_remote(policy, error, tries)
    except Exception as broken:  # noqa: BLE001 - the policy's own code (retry_on) failed
        error.add_note(f"not retried: the retry policy's retry_on raised {error_text(broken)}")
        retrying = False
    routes = run.router.error_routes
    handler = routes.get(ctx.executor_id) if routes and not retrying else None
    # A batch reports the final failure itself, unless it is routed: then nobody else will.
    if run.listening and (retrying or run.live or handler is not None):
        ctx.announce(
            ExecutorFailed,
            position=ctx.position,
            error=error,
            attempt=attempt,
            retrying=retrying,
            routed_to=handler,
        )
    if handler is not None:
        invocation.outcome = routed_failure(invocation, error, attempt, handler, events)
        return None
    if not retrying:
        failure = ExecutorFailedError(ctx.executor_id, ctx.superstep, error)
        failure.attempt = attempt
        failure.events = events  # for a batch: what this invocation raised
        raise failure from error
    return policy.backoff.delay(tries)


async def _next_attempt(
    invocation: Invocation,
    ctx: WorkflowContext[object],
    events: list[WorkflowEvent],
    error: Exception,
    attempt: int,
    busy: int = 0,
) -> int:
    """After failed ``attempt``: the next one's number, its backoff slept (see :func:`_failed`).

    0: no retry was left and the error route took the failure.

    Raises:
        ExecutorFailedError: no retry was left, and the executor has no error route.
    """
    delay = _failed(invocation, ctx, events, error, attempt, busy)
    if delay is None:
        return 0
    await sleep_for(invocation.env.clock, delay)
    return attempt + 1


def _failure_of(raised: BaseException) -> Exception:
    """What an attempt that raised ``raised`` failed with.

    A ``CancelledError`` while nothing is cancelling this task did not come
    from a cancel of the run: the handler awaited a task or future that
    someone else cancelled, and let it out. That is the handler failing,
    retried and routed as any failure, not the run cancelled.

    Raises:
        CancelledError: ``raised``, when this task is being cancelled.
    """
    if isinstance(raised, Exception):
        return raised
    task = asyncio.current_task()
    if task is None or task.cancelling():
        raise raised
    failure = RuntimeError(
        "the handler raised CancelledError, yet nothing cancelled it "
        "(a task or future it awaited was cancelled elsewhere)"
    )
    failure.__cause__ = raised
    return failure


def _retry_policy(invocation: Invocation) -> RetryPolicy:
    """The most specific retry policy: the handler's, the executor's, the workflow's."""
    spec, executor = invocation.spec, invocation.executor
    retry = (spec.retry if spec else None) or executor.retry or invocation.env.options.retry
    return retry or NO_RETRY
