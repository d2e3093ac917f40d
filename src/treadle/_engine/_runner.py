"""Running the invocations of one superstep.

Every executor with messages runs concurrently (bounded by the run's
``max_concurrency``); each executor handles its own inbox one message at a
time, in delivery order, unless it declared ``concurrency=n``. Plain ``def``
handlers run in a worker thread, so a blocking handler never stalls the
async executors of the same superstep.

Failure is structured: the first handler to raise cancels its siblings
(``asyncio.TaskGroup``), and of the failures collected the one of lowest
(rank, position) is reported, so the error does not depend on timing.

A task costs more than most handlers, so none is made that is not needed:
that is the one policy choosing inline or task. A superstep of one
invocation is that invocation's coroutine alone; one with a single
executor, or in a deterministic run, awaits its invocations inline, one
after the other. Otherwise each executor's share starts eagerly, in a
context of its own: it runs right here up to its first wait, and only a
share that waits goes on as a task. On Python 3.12 and later that is the
standard library's eager task (``asyncio.Task(..., eager_start=True)``),
joined by the superstep's task group. Python 3.11 has none, so there the
shares are started by hand (see ``_engine/_eager.py``): the one that
suspends is run to the end by the task that started it, and the shares
after it move on to a new task. Either way a superstep whose handlers
never wait creates no task of the runner's, and one whose handlers all
wait creates about one per executor.
"""

from __future__ import annotations

import asyncio
import contextvars
import sys
from typing import TYPE_CHECKING, TypeAlias

from treadle._engine._eager import start
from treadle._engine._errors import ExecutorFailedError
from treadle._engine._invocation import Invocation
from treadle._engine._invoke import invoke, start_invocation
from treadle._tasks import group_leaves

if TYPE_CHECKING:
    from collections.abc import Awaitable, Coroutine, Sequence
    from typing import Any

    from treadle._engine._env import RunEnv
    from treadle._engine._invocation import PlannedSuperstep

Share: TypeAlias = "Invocation | list[Invocation]"
"""One executor's part of a superstep: its one invocation, or its inbox's."""


def run_superstep(env: RunEnv, plan: PlannedSuperstep) -> Awaitable[None]:
    """What runs every invocation of ``plan``, to await; each one's ``outcome`` is set once it ends.

    A superstep of one invocation is that invocation's own coroutine, with
    nothing around it (the common case).

    Raises:
        ExecutorFailedError: a handler raised (the lowest-ranked failure).
    """
    invocations = plan.invocations
    if len(invocations) == 1:
        return invoke(invocations[0])
    return _run_shares(env, _shares(plan))


async def _run_shares(env: RunEnv, shares: Sequence[Share]) -> None:
    """Run the executors' shares: one after the other, or each started inline (see above)."""
    if len(shares) == 1 or env.options.deterministic:
        for share in shares:
            await _run_share(share)
        return
    failure: ExecutorFailedError | None = None
    try:
        await _run_eagerly(shares)
    except BaseExceptionGroup as errors:
        failures = _handler_failures(errors)
        if failures is None:
            raise
        failure = min(failures, key=lambda e: env.ranks[e.executor_id])
    if failure is not None:
        raise failure


def _handler_failures(
    errors: BaseExceptionGroup[BaseException],
) -> list[ExecutorFailedError] | None:
    """The handlers' failures a task group raised, or ``None`` if it raised anything else too."""
    leaves = group_leaves(errors)
    failures = [e for e in leaves if isinstance(e, ExecutorFailedError)]
    return failures if failures and len(failures) == len(leaves) else None


def _shares(plan: PlannedSuperstep) -> Sequence[Share]:
    """The plan's invocations, grouped by executor (they are adjacent)."""
    invocations = plan.invocations
    if len(plan.order) == len(invocations):  # one message each
        return invocations
    shares: list[Share] = []
    first, end = 0, len(invocations)
    while first < end:
        executor = invocations[first].executor
        stop = first + 1
        while stop < end and invocations[stop].executor is executor:
            stop += 1
        shares.append(invocations[first] if stop == first + 1 else invocations[first:stop])
        first = stop
    return shares


def _run_share(share: Share) -> Coroutine[Any, Any, None]:
    """The coroutine that runs one executor's share."""
    return invoke(share) if isinstance(share, Invocation) else _drain(share)


if sys.version_info >= (3, 12):

    async def _run_eagerly(shares: Sequence[Share]) -> None:
        """Each share an eager task; the first failure cancels the rest, as a task group would.

        A share that fails before waiting stops the start: the shares after
        it never start, and those that wait are cancelled. What failed is
        raised as a group, as ``asyncio.TaskGroup`` raises it.
        """
        loop = asyncio.get_running_loop()
        tasks: list[asyncio.Task[None]] = []
        try:
            failed = False
            for share in shares:
                task = asyncio.Task(_run_share(share), loop=loop, eager_start=True)
                tasks.append(task)
                if task.done() and task.exception() is not None:
                    failed = True  # before it waited: the rest never start
                    break
            waiting = [task for task in tasks if not task.done()]
            if failed and waiting:
                # The others are cancelled a turn later, as a task group's abort comes in
                # a callback: one woken meanwhile may fail too (the lower rank is reported).
                await asyncio.sleep(0)
            elif waiting:
                await asyncio.wait(waiting, return_when=asyncio.FIRST_EXCEPTION)
        finally:
            unfinished = [task for task in tasks if not task.done()]
            for task in unfinished:
                task.cancel()
            if unfinished:
                await asyncio.wait(unfinished)
        errors = [t.exception() for t in tasks if not t.cancelled() and t.exception() is not None]
        if errors:
            msg = "unhandled errors in a superstep"
            raise BaseExceptionGroup(msg, [e for e in errors if e is not None])

else:

    async def _run_eagerly(shares: Sequence[Share]) -> None:
        """Start the shares by hand, as eager tasks would (Python 3.11), in one task group."""
        async with asyncio.TaskGroup() as group:
            await _start_from(shares, 0, group)


async def _start_from(shares: Sequence[Share], first: int, group: asyncio.TaskGroup) -> None:
    """Start the shares from ``first`` on, inline, until one suspends.

    Each starts in a copy of the current context, as in a task of its own.
    The one that suspends is run to the end in this task; the shares after
    it go on in a new task of ``group``, started the same way.
    """
    copy_context = contextvars.copy_context
    for index in range(first, len(shares)):
        share = shares[index]
        context = copy_context()
        started = (
            context.run(start_invocation, share)
            if isinstance(share, Invocation)
            else context.run(start, _drain(share))
        )
        if started is None:  # done already, with no task of its own
            continue
        if index + 1 < len(shares):
            group.create_task(_start_from(shares, index + 1, group))
        await started.resumed(context)
        return


async def _drain(invocations: list[Invocation]) -> None:
    """Handle one executor's inbox: in order, or ``concurrency`` at a time.

    Each invocation reads the state its executor's earlier ones wrote (the
    ``earlier`` list they share), once those have ended.
    """
    concurrency = invocations[0].executor.concurrency
    if concurrency == 1:
        for invocation in invocations:
            await invoke(invocation)
            _pass_on_writes(invocation)
        return
    slots = asyncio.Semaphore(concurrency)
    places: dict[int, int] = {}  # each failure's invocation's place in the inbox, by its id

    async def one(place: int, invocation: Invocation) -> None:
        try:
            async with slots:
                await invoke(invocation)
        except ExecutorFailedError as error:
            places[id(error)] = place
            raise
        _pass_on_writes(invocation)

    failure: ExecutorFailedError | None = None
    try:
        async with asyncio.TaskGroup() as group:
            for place, invocation in enumerate(invocations):
                group.create_task(one(place, invocation))
    except BaseExceptionGroup as errors:
        # A handler's failure is raised as itself (the earliest delivered, if several), as
        # when the inbox is handled in order: the group said only "unhandled errors".
        failures = _handler_failures(errors)
        if failures is None:
            raise
        failure = min(failures, key=lambda e: places.get(id(e), len(invocations)))
    if failure is not None:
        raise failure


def _pass_on_writes(invocation: Invocation) -> None:
    """Let the executor's later invocations read what this one wrote."""
    writes = invocation.outcome.writes  # a suspended invocation writes nothing
    if writes and isinstance(invocation.earlier, list):
        invocation.earlier.append(writes)
