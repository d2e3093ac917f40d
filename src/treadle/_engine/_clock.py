"""Time, injected: the runtime never reads the wall clock directly.

Durable timers, retry backoff, handler timeouts and run deadlines all ask a
:class:`Clock`. Production uses :class:`SystemClock`; tests use
``treadle.testing.FakeClock``, which only moves when told to, so no test
sleeps for real and every timing is exact.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol


class Clock(Protocol):
    """Where the runtime gets the time and waits for it."""

    def now(self) -> float:
        """Seconds since the epoch."""
        ...

    async def sleep_until(self, deadline: float) -> None:
        """Return once :meth:`now` has reached ``deadline``."""
        ...


class SystemClock:
    """The real wall clock."""

    def now(self) -> float:
        """Seconds since the epoch, from ``time.time()``."""
        return time.time()

    async def sleep_until(self, deadline: float) -> None:
        """Sleep on the event loop until ``deadline``."""
        delay = deadline - time.time()
        if delay > 0:
            await asyncio.sleep(delay)


async def sleep_for(clock: Clock, seconds: float) -> None:
    """Sleep ``seconds`` on ``clock``."""
    await clock.sleep_until(clock.now() + seconds)
