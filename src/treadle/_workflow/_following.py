"""Following a run's event log as it grows: ``treadle watch``, the server's streams, the client.

The log lives in the store (:mod:`treadle._stores._events`), so a run is
followed the same way wherever it runs: this process, another one, a
worker. Following polls: the store is the only thing every such process
shares. Each look reads the run's row *before* its events, so when the row
says the run has ended, the events read after it include every event of
the commit that ended it, and following can stop with nothing missed.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

from treadle._engine._result import ENDED, RunStatus

if TYPE_CHECKING:
    from collections.abc import AsyncGenerator, Awaitable, Callable

    from treadle._stores._live import LiveFollower
    from treadle._stores._store import EventLog, LoggedEvent, RunRecord, Store

ENDED_STATUSES = frozenset(status.value for status in ENDED)
"""Statuses a run never leaves."""

RESTING_STATUSES = frozenset(
    {status.value for status in RunStatus if status.is_resting} | {RunStatus.PAUSED.value}
)
"""Statuses a run stays in until someone (an answer, a timer, an unpause) moves it."""

SETTLED_STATUSES = ENDED_STATUSES | RESTING_STATUSES
"""Where a run that was moving comes to a stop: ended, or resting."""

POLL_INTERVAL = 0.25
"""Seconds between looks at a run whose log has nothing new."""

_FIRST_PAGE = 1000  # events read at the first look, so a long log streams out in pieces
_LARGEST_PAGE = 32_768  # and at most at a later one


def stops_here(run: RunRecord, *, stop_at_rest: bool) -> bool:
    """Whether following ends at this run row: it has ended, or (if asked) it rests."""
    if run.status in ENDED_STATUSES:
        return True
    return stop_at_rest and run.status in RESTING_STATUSES


async def follow(
    store: Store,
    run_id: str,
    *,
    after: int = 0,
    poll: float = POLL_INTERVAL,
    stop_at_rest: bool = False,
    idle: Callable[[RunRecord], Awaitable[None]] | None = None,
    live: bool = False,
) -> AsyncGenerator[LoggedEvent, None]:
    """Every event of the run after ``after``, as it commits, until the run ends.

    With ``stop_at_rest`` it also ends once the run rests (waits for an
    answer, a timer or an unpause) with every event read. A run that never
    ends is followed until the caller stops iterating. ``idle`` is given the
    run's row after each look that found the run going on, with every event
    read: what a follower can say of a superstep whose events are not in the
    log yet (they are written when it commits).

    With ``live``, the run's live events (token deltas, progress: ``seq``
    0) raised from now on, wherever it runs, come between the logged ones
    as they are raised (see :mod:`treadle._stores._live`); those raised
    before following began are not replayed.

    Raises:
        RunNotFoundError: no such run (or it was deleted meanwhile).
    """
    if not live:
        async with contextlib.aclosing(
            _follow(store, run_id, after, poll, stop_at_rest, idle, None)
        ) as events:
            async for event in events:
                yield event
        return
    # A caller that stops iterating must aclose() this (contextlib.aclosing): the live
    # follower (on SQLite, a connection to the store's live file) is released then.
    async with (
        store.live.follow(run_id) as follower,
        contextlib.aclosing(
            _follow(store, run_id, after, poll, stop_at_rest, idle, follower)
        ) as events,
    ):
        async for event in events:
            yield event


async def _follow(
    store: Store,
    run_id: str,
    after: int,
    poll: float,
    stop_at_rest: bool,
    idle: Callable[[RunRecord], Awaitable[None]] | None,
    live: LiveFollower | None,
) -> AsyncGenerator[LoggedEvent, None]:
    last = after
    while True:
        run = await store.get_run(run_id)  # first: see the module docstring
        async for event in logged_after(store, run_id, last):
            yield event
            last = event.seq
        if stops_here(run, stop_at_rest=stop_at_rest):
            return
        if idle is not None:
            await idle(run)
        if live is None:
            await asyncio.sleep(poll)
            continue
        async for event in _live_until(live, poll):
            yield event


async def _live_until(live: LiveFollower, seconds: float) -> AsyncGenerator[LoggedEvent, None]:
    """The live events that arrive in the next ``seconds`` (the wait between two looks)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while (left := deadline - loop.time()) > 0:
        try:
            async with asyncio.timeout(left):  # never around a yield: the consumer's awaits
                event = await live.get()
        except TimeoutError:
            return
        yield event


async def logged_after(
    store: EventLog, run_id: str, after: int
) -> AsyncGenerator[LoggedEvent, None]:
    """Every event the run's log holds now after ``after``, read a page at a time.

    Each page is twice the last while they come back full (up to
    ``_LARGEST_PAGE``): a store reads a commit's events, one row, whole,
    so a superstep of 80,000 events read 1,000 at a time was read whole
    eighty times (28 s, where one read takes 0.07).

    Raises:
        RunNotFoundError: no such run.
    """
    page = _FIRST_PAGE
    while True:
        events = await store.read_events(run_id, after=after, limit=page)
        for event in events:
            yield event
        if len(events) < page:
            return
        after = events[-1].seq
        page = min(page * 2, _LARGEST_PAGE)
