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

**Inline calls.** Handing a call to the thread and hearing back costs two
thread wake-ups, tens of microseconds, which for one run committing a
superstep at a time is a large part of a durable superstep (its fsync
takes about a hundred). So a caller that will await the call at once and
has nothing to overlap with it may ask for it ``inline``: when the lane is
idle (nothing queued or running) and its recent calls were quick (under
:data:`INLINE_UNDER` on average), the call runs on the caller's thread,
holding the lane, and the event loop waits for it as it would for any short
blocking call. A busy lane (many runs committing: their commits group) or a
slow disk keeps every call on the thread, and so does a database another
process holds locked: the inline attempt raises :class:`Unavailable` rather
than wait, and the call goes to the thread, which waits.

**Groups of a loop's turn.** Many runs committing at once is the other case:
on the thread, every statement of their group hands the GIL back and forth
with the event loop, and each group's callers are woken through the loop's
self-pipe, CPU spent on neither the statements nor the fsync (with 1,000
runs committing, the loop and the thread took turns rather than
overlapping). So a groupable call that can run now (its :class:`Groupable`
has ``run_now``) joins the group of its event loop's current turn instead,
when the lane is idle and its calls have waited little each on the disk
(under :data:`TURN_UNDER` per call, a group's wait divided among its calls:
a quick disk, or a group large enough to share a slow one's fsync). At the
end of the turn, that group runs inline, in one transaction, and the loop
goes on once it is durable. Every call made while a turn's group is open
joins it or, if it cannot (another loop's, or not groupable), sends the
group to the thread first, so the lane's calls still run in the order they
were made; a database locked elsewhere sends the group to the thread too.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

from treadle._stores._fork_gate import guard

_T = TypeVar("_T")
# A call for the lane's thread, with the future that awaits it and that future's loop.
_Job = tuple[Callable[[], Any], asyncio.Future[Any], asyncio.AbstractEventLoop]
# A call's outcome for its caller: the loop to wake, the future, its result or error.
_Reply = tuple[asyncio.AbstractEventLoop, asyncio.Future[Any], Any, "BaseException | None"]

GROUP_MAX = 1024
"""At most this many queued groupable calls are run as one group.

A group is whatever queued while the one before it ran, so it grows with
the number of runs committing at once; the bound only keeps one
transaction from holding the writer (and its callers) for long.
"""

INLINE_UNDER = 0.001
"""Seconds a lane's calls may take on average and still run inline (see the module docstring)."""

TURN_UNDER = 0.00002
"""Seconds a lane's calls may wait on the disk on average, each, for a turn's group to run inline.

About what handing a call to the thread and hearing back costs in CPU (the
GIL going back and forth for each statement, a wake-up of the loop).
"""

_SMOOTHING = 0.2  # weight of the newest call in the lane's running average
_PROBE_EVERY = 64  # while turns are not cheap, one chance in this many is taken anyway


class Unavailable(Exception):  # noqa: N818 - a signal between a lane and its owner, not an error
    """Raised by an inline attempt that would have to wait (a lock held elsewhere).

    Nothing was done; the lane queues the call for its thread instead.
    """


class Groupable:
    """A call that may run as one group with the groupable calls queued right behind it.

    Alone it is ``run_one(work)``; in a group, the lane hands every member's
    ``work`` to the first member's ``run_group`` and gets one ``(result,
    error)`` per member back, in order. (A commit: the group shares one
    transaction and one fsync.)
    """

    __slots__ = ("run_group", "run_now", "run_one", "work")

    def __init__(
        self,
        work: Any,
        run_one: Callable[[Any], Any],
        run_group: Callable[[list[Any]], list[tuple[Any, BaseException | None]]],
        run_now: Callable[[list[Any]], list[tuple[Any, BaseException | None]]] | None = None,
    ) -> None:
        self.work = work
        self.run_one = run_one
        self.run_group = run_group
        # run_group without waiting for a lock held elsewhere (raising Unavailable):
        # what a loop's turn runs inline. None: the call always goes to the thread.
        self.run_now = run_now

    def __call__(self) -> Any:
        return self.run_one(self.work)


class Lane:
    """One thread serving calls one at a time, in the order they were submitted."""

    def __init__(self, owner: object, name: str) -> None:
        self._owner = weakref.ref(owner)
        self._name = name
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        # Held by whoever runs a call: the thread, or a caller running one inline;
        # a fork waits for it (_fork_gate).
        self._holder = threading.Lock()
        guard(self, self._holder)
        self._timing = _Timing()
        self._turn: _Turn | None = None  # the calls of a loop's turn, to run at its end
        self._turns = threading.Lock()  # held while the turn is read, changed, or sent
        self._backlog = _Backlog()  # calls handed to the thread and not yet done

    @property
    def started(self) -> bool:
        """Whether the thread runs (it starts with the first call)."""
        return self._thread is not None

    def submit(
        self, call: Callable[[], _T], *, inline: Callable[[], _T] | None = None
    ) -> asyncio.Future[_T]:
        """Queue ``call``; the future (of the running loop) settles with its outcome.

        A future cancelled before its call starts takes the call out of the
        queue; once started, the call completes either way. With ``inline``
        (the same work, done without waiting), an idle lane whose calls have
        been quick runs that at once on this thread instead, and the future
        is done on return; if it raises :class:`Unavailable`, ``call`` is
        queued after all. A :class:`Groupable` call that can run now may
        join its loop's turn instead (see the module docstring).
        """
        # The future belongs to whichever loop awaits it; none is cached, so the
        # lane serves one loop after another (run_sync) or several at once.
        loop = asyncio.get_running_loop()
        gathers = call if isinstance(call, Groupable) and call.run_now is not None else None
        with self._turns:  # loops in other threads may use the lane too
            turn = self._turn
            if turn is not None:
                if gathers is not None and turn.loop is loop:
                    return turn.join(gathers)
                self._send(turn)  # its calls were made first: they go first
            elif self._jobs.empty():
                alone = inline is not None and self._timing.quick()
                if not alone and gathers is not None and self._cheap():
                    turn = self._turn = _Turn(loop)
                    loop.call_soon(self._run_turn, turn)
                    return turn.join(gathers)
                if inline is not None and alone:
                    ran = self._inline(inline)
                    if ran is not None:
                        return ran
            done: asyncio.Future[_T] = loop.create_future()
            self._put(call, done, loop)
        return done

    def _cheap(self) -> bool:
        """Whether a turn's group may run inline: cheap calls, and none left with the thread."""
        return self._timing.cheap() and self._backlog.idle()

    def _put(
        self, call: Callable[[], Any], done: asyncio.Future[Any], loop: asyncio.AbstractEventLoop
    ) -> None:
        if self._thread is None:
            self._thread = threading.Thread(
                target=_serve,
                args=(self._jobs, self._holder, self._timing, self._backlog),
                name=self._name,
                daemon=True,
            )
            self._thread.start()
            owner = self._owner()
            if owner is not None:  # an owner never closed: stop the thread anyway
                weakref.finalize(owner, self._jobs.put, None)
        self._backlog.add()
        self._jobs.put((call, done, loop))

    def _send(self, turn: _Turn) -> None:
        """Hand a turn's calls to the thread, in order (holding ``_turns``)."""
        if self._turn is turn:
            self._turn = None
        for call, done in turn.calls:
            self._put(call, done, turn.loop)

    def _run_turn(self, turn: _Turn) -> None:
        """At the end of a loop's turn: its calls as one group, inline, or on the thread."""
        with self._turns:
            if self._turn is not turn:
                return  # sent to the thread meanwhile
            self._turn = None
            turn.calls = [(call, done) for call, done in turn.calls if not done.cancelled()]
            if not turn.calls:
                return
            run_now = turn.calls[0][0].run_now
            # Never before a call handed to the thread earlier: it was made first.
            if (
                run_now is None
                or not self._backlog.idle()
                or not self._holder.acquire(blocking=False)
            ):
                self._send(turn)
                return
        outcomes: list[tuple[Any, BaseException | None]] | None
        try:
            with self._timing.of(len(turn.calls), inline=True):
                outcomes = run_now([call.work for call, _ in turn.calls])
        except Unavailable:  # the database is locked elsewhere: the thread waits for it
            outcomes = None
        except BaseException as failed:  # noqa: BLE001 - handed to every awaiting coroutine
            outcomes = [(None, failed)] * len(turn.calls)
        finally:
            self._holder.release()
        if outcomes is None:
            with self._turns:
                self._send(turn)
            return
        for (_, done), (result, error) in zip(turn.calls, outcomes, strict=True):
            _settle(done, result, error)

    def _inline(self, call: Callable[[], _T]) -> asyncio.Future[_T] | None:
        if not self._holder.acquire(blocking=False):
            return None  # the thread is at work after all
        ran: asyncio.Future[_T] = asyncio.get_running_loop().create_future()
        try:
            with self._timing:  # a lone write's fsync is its own: it says nothing of a turn's
                ran.set_result(call())
        except Unavailable:
            return None
        except BaseException as error:  # noqa: BLE001 - handed to the awaiting coroutine
            ran.set_exception(error)
        finally:
            self._holder.release()
        return ran

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


class _Backlog:
    """How many calls were handed to a lane's thread and are not done yet (thread-safe)."""

    __slots__ = ("_count", "_lock")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._count = 0

    def add(self) -> None:
        with self._lock:
            self._count += 1

    def done(self, calls: int) -> None:
        with self._lock:
            self._count -= calls

    def idle(self) -> bool:
        with self._lock:
            return self._count == 0


class _Turn:
    """The groupable calls one event loop made in its current turn, run as one group at its end."""

    __slots__ = ("calls", "loop")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.calls: list[tuple[Groupable, asyncio.Future[Any]]] = []

    def join(self, call: Groupable) -> asyncio.Future[Any]:
        done: asyncio.Future[Any] = self.loop.create_future()
        self.calls.append((call, done))
        return done


class _Timing:
    """Running averages of what a lane's calls take (a context manager times one, or a group).

    ``quick``: a call (a group counting as one) took under :data:`INLINE_UNDER`
    on average. ``cheap``: a turn's group kept its loop waiting, not
    computing (for the disk, mostly its fsync), under :data:`TURN_UNDER` per
    call. Only turns count there: on the thread, a call also waits for the
    GIL the loop holds, which is the cost a turn saves, and a lone call's
    fsync is shared with nobody. With nothing measured yet a turn is tried, and while
    turns are not cheap one in :data:`_PROBE_EVERY` is tried again, so the
    lane follows a disk or a load that changes.
    """

    __slots__ = ("_average", "_cpu", "_inline", "_members", "_passed", "_started", "_waits")

    def __init__(self) -> None:
        self._average: float | None = None  # nothing measured yet: not quick
        self._waits: float | None = None  # nothing measured yet: a turn is tried
        self._members = 1
        self._inline = False
        self._passed = 0
        self._started = 0.0
        self._cpu = 0.0

    def quick(self) -> bool:
        average = self._average
        return average is not None and average < INLINE_UNDER

    def cheap(self) -> bool:
        waits = self._waits
        if waits is None or waits < TURN_UNDER:
            return True
        self._passed += 1
        if self._passed < _PROBE_EVERY:
            return False
        self._passed = 0
        return True

    def of(self, members: int, *, inline: bool = False) -> _Timing:
        """Time a group of ``members`` calls next (``inline``: on the caller's thread)."""
        self._members = members
        self._inline = inline
        return self

    def __enter__(self) -> None:
        self._started = time.perf_counter()
        if self._inline:  # a thread's CPU clock is a system call (~1 us): read only when used
            self._cpu = time.thread_time()

    def __exit__(self, *exc_info: object) -> None:
        took = time.perf_counter() - self._started
        average = self._average
        self._average = took if average is None else average + _SMOOTHING * (took - average)
        if self._inline:
            waited = max(took - (time.thread_time() - self._cpu), 0.0) / self._members
            waits = self._waits
            self._waits = waited if waits is None else waits + _SMOOTHING * (waited - waits)
        self._members, self._inline = 1, False


def _serve(
    jobs: queue.SimpleQueue[_Job | None],
    holder: threading.Lock,
    timing: _Timing,
    backlog: _Backlog,
) -> None:
    # One job at a time in queue order. Groupable calls waiting back to back
    # in the queue run as one group; each caller still hears back only once
    # the group is done, and queue order is kept. Callers hear back once the
    # lane is let go of: a caller woken by its reply and committing again at
    # once then finds the lane free and may run inline.
    job = jobs.get()
    while job is not None:
        replies: list[_Reply] = []
        call: Callable[[], Any] | None
        call, done, loop = job
        job = None
        taken = 1
        with holder:
            if isinstance(call, Groupable):
                group, job, taken = _gather_group(call, done, loop, jobs)
                if len(group) > 1:
                    with timing.of(len(group)):
                        outcomes = call.run_group([queued[0].work for queued in group])
                    for (_, waiting, its_loop), (result, error) in zip(
                        group, outcomes, strict=True
                    ):
                        replies.append((its_loop, waiting, result, error))
                    del group, outcomes
                    call = None  # the group is done
                elif group:  # a group of one: the plain path
                    call, done, loop = group[0]
            if call is not None and not done.cancelled():  # else its caller gave up: skip it
                try:
                    with timing:
                        result, error = call(), None
                except BaseException as raised:  # noqa: BLE001 - handed to the awaiting coroutine
                    result, error = None, raised
                replies.append((loop, done, result, error))
                del result, error
        _reply_all(replies)
        backlog.done(taken)
        del call, done, loop, replies  # hold nothing until the next job arrives
        if job is None:
            job = jobs.get()


_Grouped = tuple[Groupable, asyncio.Future[Any], asyncio.AbstractEventLoop]


def _gather_group(
    first: Groupable,
    done: asyncio.Future[Any],
    loop: asyncio.AbstractEventLoop,
    jobs: queue.SimpleQueue[_Job | None],
) -> tuple[list[_Grouped], _Job | None, int]:
    """The groupable calls queued right behind ``first`` (its group), and the job after them.

    Also how many calls the group took from the queue, ``first`` and cancelled ones included.
    """
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
    return [g for g in group if not g[1].cancelled()], after, len(group)


def _reply_all(replies: list[_Reply]) -> None:
    """Settle the futures of ``replies``, with one wake-up of each loop they belong to.

    Waking a loop from another thread is a write to its self-pipe, and the
    loop reads it back: for a group of commits that is once per loop, not
    once per commit.
    """
    if len(replies) == 1:
        loop, done, result, error = replies[0]
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody is waiting
            loop.call_soon_threadsafe(_settle, done, result, error)
        return
    by_loop: dict[asyncio.AbstractEventLoop, list[_Reply]] = {}
    for reply in replies:
        by_loop.setdefault(reply[0], []).append(reply)
    for loop, settled in by_loop.items():
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(_settle_each, settled)


def _settle_each(replies: list[_Reply]) -> None:
    for _, done, result, error in replies:
        _settle(done, result, error)


def _settle(done: asyncio.Future[Any], result: object, error: BaseException | None) -> None:
    # On the awaiting loop's thread, where the future may be touched.
    if done.cancelled():
        return
    if error is None:
        done.set_result(result)
    else:
        done.set_exception(error)
