"""Threads that run a store's blocking work in order, off the event loop.

``SqliteStore`` has two lanes: one writer (every write, in call order, with
group commit) and one reader (reads, on a connection of their own). WAL
lets the reader see every committed transaction while the writer is busy,
so a read never waits behind another caller's fsync.

A lane is one daemon thread and a queue of calls. Each call comes with the
future that awaits it and that future's loop; the outcome goes back through
``call_soon_threadsafe``, so any event loop (or several, or one after
another) may use a lane. A daemonic thread cannot keep the process alive: a
transaction cut short at exit is undone by SQLite's journal as if it had
never begun.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

_T = TypeVar("_T")
# A call for the lane's thread, with the future that awaits it and that future's loop.
_Job = tuple[Callable[[], Any], asyncio.Future[Any], asyncio.AbstractEventLoop]

GROUP_MAX = 64
"""At most this many queued groupable calls are run as one group."""


class Groupable:
    """A call that may run as one group with the groupable calls queued right behind it.

    Alone it is ``run_one(work)``; in a group, the lane hands every member's
    ``work`` to the first member's ``run_group`` and gets one ``(result,
    error)`` per member back, in order. (A commit: the group shares one
    transaction and one fsync.)
    """

    __slots__ = ("run_group", "run_one", "work")

    def __init__(
        self,
        work: Any,
        run_one: Callable[[Any], Any],
        run_group: Callable[[list[Any]], list[tuple[Any, BaseException | None]]],
    ) -> None:
        self.work = work
        self.run_one = run_one
        self.run_group = run_group

    def __call__(self) -> Any:
        return self.run_one(self.work)


class Lane:
    """One thread serving calls one at a time, in the order they were submitted."""

    def __init__(self, owner: object, name: str) -> None:
        self._owner = weakref.ref(owner)
        self._name = name
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    @property
    def started(self) -> bool:
        """Whether the thread runs (it starts with the first call)."""
        return self._thread is not None

    def submit(self, call: Callable[[], _T]) -> asyncio.Future[_T]:
        """Queue ``call``; the future (of the running loop) settles with its outcome.

        A future cancelled before its call starts takes the call out of the
        queue; once started, the call completes either way.
        """
        if self._thread is None:
            self._thread = threading.Thread(
                target=_serve, args=(self._jobs,), name=self._name, daemon=True
            )
            self._thread.start()
            owner = self._owner()
            if owner is not None:  # an owner never closed: stop the thread anyway
                weakref.finalize(owner, self._jobs.put, None)
        # The future belongs to whichever loop awaits it; none is cached, so the
        # lane serves one loop after another (run_sync) or several at once.
        loop = asyncio.get_running_loop()
        done: asyncio.Future[_T] = loop.create_future()
        self._jobs.put((call, done, loop))
        return done

    async def stop(self, last: Callable[[], object]) -> None:
        """Run ``last`` (closing the connection), then end the thread; nothing runs after.

        The caller makes sure nothing is submitted once it has called this.
        """
        thread = self._thread
        if thread is None:
            return
        done = self.submit(last)
        self._jobs.put(None)
        await asyncio.shield(done)  # even if the stop is cancelled, the connection closes
        thread.join()  # at once: the stop is the thread's last job


def _serve(jobs: queue.SimpleQueue[_Job | None]) -> None:
    # One job at a time in queue order. Groupable calls waiting back to back
    # in the queue run as one group; each caller still hears back only once
    # the group is done, and queue order is kept.
    job = jobs.get()
    while job is not None:
        call, done, loop = job
        job = None
        if isinstance(call, Groupable):
            group, job = _gather_group(call, done, loop, jobs)
            if len(group) > 1:
                outcomes = call.run_group([queued[0].work for queued in group])
                for (_, waiting, its_loop), (result, error) in zip(group, outcomes, strict=True):
                    _reply(its_loop, waiting, result, error)
                del group, outcomes
                job = job if job is not None else jobs.get()
                continue
            if group:  # a group of one: the plain path
                call, done, loop = group[0]
        if not done.cancelled():  # else its caller gave up before it started: skip it
            try:
                result, error = call(), None
            except BaseException as raised:  # noqa: BLE001 - handed to the awaiting coroutine
                result, error = None, raised
            _reply(loop, done, result, error)
            del result, error
        del call, done, loop  # hold nothing until the next job arrives
        if job is None:
            job = jobs.get()


_Grouped = tuple[Groupable, asyncio.Future[Any], asyncio.AbstractEventLoop]


def _gather_group(
    first: Groupable,
    done: asyncio.Future[Any],
    loop: asyncio.AbstractEventLoop,
    jobs: queue.SimpleQueue[_Job | None],
) -> tuple[list[_Grouped], _Job | None]:
    """The groupable calls queued right behind ``first`` (its group), and the job after them."""
    group: list[_Grouped] = [(first, done, loop)]
    after: _Job | None = None
    while len(group) < GROUP_MAX:
        if jobs.empty():  # the usual case for one run: asked first, as raising Empty costs
            break
        try:
            after = jobs.get_nowait()
        except queue.Empty:  # taken by no one else (one consumer), but never assume
            after = None
            break
        if after is None:  # the stop, queued last: back in the queue, to end the thread next
            jobs.put(None)
            break
        call, waiting, its_loop = after
        if not isinstance(call, Groupable):
            break  # handled next, after the group
        group.append((call, waiting, its_loop))
        after = None
    return [g for g in group if not g[1].cancelled()], after


def _reply(
    loop: asyncio.AbstractEventLoop,
    done: asyncio.Future[Any],
    result: object,
    error: BaseException | None,
) -> None:
    with contextlib.suppress(RuntimeError):  # the loop is closed: nobody is waiting
        loop.call_soon_threadsafe(_settle, done, result, error)


def _settle(done: asyncio.Future[Any], result: object, error: BaseException | None) -> None:
    # On the awaiting loop's thread, where the future may be touched.
    if done.cancelled():
        return
    if error is None:
        done.set_result(result)
    else:
        done.set_exception(error)
