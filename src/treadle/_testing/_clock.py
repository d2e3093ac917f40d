"""FakeClock: a clock you move by hand (re-exported by :mod:`treadle.testing`)."""

from __future__ import annotations

import asyncio
import heapq
import itertools
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from collections.abc import Awaitable

T = TypeVar("T")


class FakeClock:
    """A clock that only moves when :meth:`advance` or :meth:`advance_to` says so.

    Args:
        start: The initial time, in seconds since the epoch.
    """

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        """Start the fake time at ``start``."""
        self._now = start
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._order = itertools.count()

    def now(self) -> float:
        """The fake time."""
        return self._now

    async def sleep_until(self, deadline: float) -> None:
        """Wait until the fake time reaches ``deadline``."""
        if deadline <= self._now:
            await asyncio.sleep(0)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (deadline, next(self._order), future))
        await future

    @property
    def next_deadline(self) -> float | None:
        """The earliest time someone is sleeping until, if anyone is."""
        while self._sleepers and self._sleepers[0][2].done():
            heapq.heappop(self._sleepers)  # cancelled sleepers
        return self._sleepers[0][0] if self._sleepers else None

    async def advance(self, seconds: float) -> None:
        """Move time forward by ``seconds``, waking every sleeper due by then."""
        if seconds < 0:
            msg = f"time only moves forward; got {seconds}"
            raise ValueError(msg)
        await self.advance_to(self._now + seconds)

    async def advance_to(self, when: float) -> None:
        """Move time to ``when``, waking sleepers in deadline order.

        Each woken sleeper gets a turn of the event loop before time moves
        on to the next deadline, so code that sleeps again from a woken
        sleeper sees the time it expects.
        """
        if when < self._now:
            msg = f"time only moves forward: {when} is before {self._now}"
            raise ValueError(msg)
        while self._sleepers and self._sleepers[0][0] <= when:
            deadline, _, future = heapq.heappop(self._sleepers)
            if future.done():
                continue
            self._now = max(self._now, deadline)
            future.set_result(None)
            for _ in range(5):
                await asyncio.sleep(0)
        self._now = when
        for _ in range(5):
            await asyncio.sleep(0)

    async def run(self, awaitable: Awaitable[T], *, step_limit: int = 100_000) -> T:
        """Await ``awaitable`` while jumping time to each next deadline.

        Whenever the awaited work is waiting only on this clock, time jumps
        straight to the earliest deadline (trio's autojump, by hand). Use it
        to drive a run through retries, timeouts and timers in no real time.
        """
        task = asyncio.ensure_future(awaitable)
        seen: tuple[float | None, int] = (None, -1)
        for _ in range(step_limit):
            for _ in range(20):
                if task.done():
                    return task.result()
                await asyncio.sleep(0)
            deadline = self.next_deadline
            # Jump only when the same earliest deadline is seen twice in a row
            # with nothing else registering meanwhile: a task that has just
            # woken from real I/O may be about to set an earlier timer.
            state = (deadline, len(self._sleepers))
            if deadline is None or state != seen:
                seen = state
                await asyncio.sleep(0.001)  # real I/O, or a settling task: give it real time
            else:
                await self.advance_to(max(deadline, self._now))
                seen = (None, -1)
        task.cancel()
        msg = f"FakeClock.run gave up after {step_limit} steps"
        raise RuntimeError(msg)
