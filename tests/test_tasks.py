"""Stopping a child task absorbs the child's cancellation, never the caller's own.

Each test stops a child that takes a moment to wind down (it catches its
cancellation, then sleeps), and cancels the *stopping* task during that
wait: the stopping task must end cancelled, not run on. Before
``treadle._tasks``, ``Runtime``'s exit and the lease keeper suppressed
``CancelledError`` around such waits, and a test cancelled by its timeout
went on to read a closed store.

``each_at_most`` runs jobs a few at a time, each in a task (and a context)
of its own, and stops the rest as a task group does when one raises.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools

import pytest

from treadle._tasks import (
    cancel_and_wait,
    close_group,
    each_at_most,
    stop_if_cancelled,
    wait_cancelled,
)


async def _winds_down(ended: asyncio.Event) -> None:
    try:
        await asyncio.sleep(3600)
    except asyncio.CancelledError:
        await asyncio.sleep(0.05)  # cleanup that takes a moment
        ended.set()
        raise


async def test_cancel_and_wait_absorbs_the_childs_end():
    ended = asyncio.Event()
    child = asyncio.create_task(_winds_down(ended))
    await asyncio.sleep(0)
    await cancel_and_wait(child)  # no error: the child's cancellation was asked for
    assert ended.is_set()
    assert child.cancelled()


async def test_cancel_and_wait_passes_on_a_cancellation_of_the_caller():
    ended = asyncio.Event()

    async def stopper():
        child = asyncio.create_task(_winds_down(ended))
        await asyncio.sleep(0)
        await cancel_and_wait(child)
        return "ran on"

    stopping = asyncio.create_task(stopper())
    await asyncio.sleep(0.01)  # the stopper waits for its child to wind down
    stopping.cancel()
    with pytest.raises(asyncio.CancelledError):
        await stopping
    assert stopping.cancelled()


async def test_wait_cancelled_passes_on_a_cancellation_of_the_caller():
    ended = asyncio.Event()

    async def waiter():
        child = asyncio.create_task(_winds_down(ended))
        await asyncio.sleep(0)
        child.cancel()
        await wait_cancelled(child)
        return "ran on"

    waiting = asyncio.create_task(waiter())
    await asyncio.sleep(0.01)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting


async def test_close_group_waits_for_its_tasks_and_passes_on_a_cancellation_of_the_caller():
    ended = asyncio.Event()

    async def driver():
        group = asyncio.TaskGroup()
        await group.__aenter__()
        group.create_task(_winds_down(ended))
        await asyncio.sleep(0)
        await close_group(group)  # waits: the child sleeps for an hour
        return "ran on"

    driving = asyncio.create_task(driver())
    await asyncio.sleep(0.01)
    driving.cancel()  # the group cancels its child, which winds down, then the driver ends
    with pytest.raises(asyncio.CancelledError):
        await driving
    assert ended.is_set()


async def test_close_group_returns_once_its_tasks_have_ended():
    group = asyncio.TaskGroup()
    await group.__aenter__()
    done = []
    group.create_task(asyncio.sleep(0.01, result=None)).add_done_callback(done.append)
    await close_group(group)
    assert len(done) == 1


async def test_stop_if_cancelled_ends_a_loop_whose_cancellation_was_lost_below():
    rounds = 0

    async def loses_a_cancellation() -> None:
        # What asyncio.wait_for does on 3.11 when its inner future completes as the
        # task is cancelled: the result is returned, the cancellation is gone (once here).
        if rounds == 1:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.sleep(3600)
        else:
            await asyncio.sleep(3600)

    async def service() -> None:
        nonlocal rounds
        while True:
            stop_if_cancelled()
            rounds += 1
            await loses_a_cancellation()

    serving = asyncio.create_task(service())
    await asyncio.sleep(0.01)
    serving.cancel()
    await asyncio.wait({serving}, timeout=5)  # without stop_if_cancelled it would never end
    assert serving.cancelled()
    assert rounds == 1  # the round whose wait lost the cancellation, and no other


_SEEN: contextvars.ContextVar[int | None] = contextvars.ContextVar("seen", default=None)


async def test_each_at_most_runs_jobs_in_order_a_few_at_once_each_in_a_context_of_its_own():
    started: list[tuple[int, int | None]] = []
    running: list[int] = []
    most = 0

    async def job(i: int) -> None:
        nonlocal most
        started.append((i, _SEEN.get()))  # what an earlier job of this worker set: nothing
        _SEEN.set(i)
        running.append(i)
        most = max(most, len(running))
        await asyncio.sleep(0.01 * (i % 3))
        running.remove(i)

    await each_at_most(3, [functools.partial(job, i) for i in range(10)])
    assert [i for i, _ in started] == list(range(10))
    assert {seen for _, seen in started} == {None}
    assert most == 3
    assert _SEEN.get() is None


async def test_each_at_most_stops_the_running_and_starts_no_more_once_one_raises():
    started: list[int] = []
    cancelled: list[int] = []

    async def job(i: int) -> None:
        started.append(i)
        if i == 1:
            raise ValueError("job 1 failed")
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.append(i)
            raise

    with pytest.raises(ExceptionGroup) as raised:
        await each_at_most(2, [functools.partial(job, i) for i in range(5)])
    assert raised.value.subgroup(ValueError) is not None
    assert started == [0, 1]
    assert cancelled == [0]
