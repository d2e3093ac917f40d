"""Stopping a task one started without swallowing a stop meant for oneself.

A driver stops its children by cancelling them and waiting for them to
end, and their end is a ``CancelledError``: expected, so not raised. The
usual spelling, ``contextlib.suppress(asyncio.CancelledError)`` around the
wait, also swallows the cancellation of the *waiting* task when it comes
during that wait: the task then runs on after it was asked to stop (a test
timed out and then went on reading a closed store). These helpers tell
the two apart by the waiting task's own pending cancellations
(``Task.cancelling``): the child's end is absorbed, the caller's own stop
propagates.

A cancellation can also be lost below, in code that is not ours: on
Python 3.11, ``asyncio.wait_for`` returns the result when its inner future
completes as the waiting task is cancelled (fixed in 3.12), and
psycopg_pool waits for a free connection with it. A service loop, which
runs until it is cancelled, would then poll on forever and the driver
stopping it would wait forever. :func:`stop_if_cancelled`, at the top of
each round of such a loop, ends it all the same.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine, Sequence


def _stopping() -> bool:
    """Whether the task running this has been asked to stop (and has not taken it back)."""
    current = asyncio.current_task()
    return current is not None and current.cancelling() > 0


def stop_if_cancelled() -> None:
    """Raise ``CancelledError`` if this task was asked to stop and the request was lost below.

    Raises:
        asyncio.CancelledError: the task was cancelled (and has not taken it back).
    """
    if _stopping():
        raise asyncio.CancelledError


async def cancel_and_wait(task: asyncio.Future[Any]) -> None:
    """Cancel ``task`` and wait for it to end; its cancellation is not an error here.

    Raises:
        asyncio.CancelledError: the calling task was cancelled meanwhile.
    """
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        if _stopping():
            raise


async def wait_cancelled(task: asyncio.Future[Any]) -> None:
    """Wait for ``task``, which was cancelled already, to end (see :func:`cancel_and_wait`)."""
    try:
        await task
    except asyncio.CancelledError:
        if _stopping():
            raise


async def close_group(group: asyncio.TaskGroup) -> None:
    """Leave ``group`` (wait for its tasks) as a block would that ended without an error.

    The group is not given the block's error, which it would wrap in an
    exception group of its own; a cancellation of the caller during the wait
    propagates once the group's tasks have ended.
    """
    try:
        await group.__aexit__(None, None, None)
    except asyncio.CancelledError:
        if _stopping():
            raise


async def each_at_most(limit: int, jobs: Sequence[Callable[[], Coroutine[Any, Any, None]]]) -> None:
    """Run ``jobs`` in order, each in a task of its own, at most ``limit`` at once.

    ``limit`` workers each take the next job as theirs ends, so a thousand
    jobs make a thousand short tasks, never a thousand at once waiting for
    a slot (each a coroutine, a context and a semaphore's future, which
    every pass of the garbage collector walks). Each job's task (in its
    worker's group) copies the context the workers started in, so what one
    job sets there the next does not see. A job that raises stops the rest
    as a task group does: those running are cancelled, no other starts, and
    the error comes in an exception group (its worker's, in the call's).
    No more workers start than there are jobs: none for none (a timer
    service's idle round).
    """
    queue = iter(jobs)

    async def worker() -> None:
        async with asyncio.TaskGroup() as job_group:
            for job in queue:
                await job_group.create_task(job())

    if not jobs:
        return
    async with asyncio.TaskGroup() as group:
        for _ in range(min(limit, len(jobs))):
            group.create_task(worker())


def group_leaves(group: BaseExceptionGroup[BaseException]) -> list[BaseException]:
    """The errors a task group raised, however deeply its groups nest, in their order.

    A task group's error is a group of its tasks' errors, some groups in
    turn (a task that ran a task group of its own): what each caller asks
    of them (one handler's failure, a refusal, a suspension) is asked of
    the errors themselves.
    """
    found: list[BaseException] = []
    stack: list[BaseException] = [group]
    while stack:
        error = stack.pop()
        if isinstance(error, BaseExceptionGroup):
            stack.extend(reversed(error.exceptions))
        else:
            found.append(error)
    return found
