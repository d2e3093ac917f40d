"""Durable polling of an external job, built on a context's steps and timers.

Each poll is a journaled step and each pause a durable timer, so a run that
polls is checkpointed between polls, holds no thread while it waits, and
survives restarts; re-executed after a timer, the handler replays the polls
made so far from its journal and goes on with the next.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

from treadle._exceptions import PollTimeout
from treadle._graph._policies import ExponentialBackoff

if TYPE_CHECKING:
    from collections.abc import Callable

    from treadle._engine._context import WorkflowContext


async def poll_until_complete(
    ctx: WorkflowContext[Any],
    check: Callable[[], Any],
    is_complete: Callable[[Any], bool],
    backoff: ExponentialBackoff | None,
    max_duration: dt.timedelta | float | None,
) -> Any:
    """``ctx.poll_until_complete``: see there.

    Raises:
        PollTimeout: the job was still incomplete after ``max_duration``.
    """
    backoff = backoff or ExponentialBackoff(initial=1.0, maximum=60.0)
    limit = max_duration.total_seconds() if isinstance(max_duration, dt.timedelta) else max_duration
    started = await ctx.step("poll:started", ctx.now)
    attempt = 0
    while True:
        attempt += 1
        fresh = not ctx.replaying
        result = await ctx.step(f"poll:{attempt}", check)
        if fresh:
            ctx.report_progress(attempt, None, f"poll {attempt}")
        if is_complete(result):
            return result
        expired = await ctx.step(
            f"poll:{attempt}:expired",
            lambda: limit is not None and ctx.now() - started >= limit,
        )
        if expired:
            msg = f"executor {ctx.executor_id!r}: job incomplete after {attempt} polls"
            raise PollTimeout(msg)
        await ctx.sleep(backoff.delay(attempt))
