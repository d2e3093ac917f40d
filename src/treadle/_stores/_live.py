"""Live events: what a run raises between its barriers, carried to followers in any process.

A run's log holds what committed, written at each barrier; between two
barriers a long superstep says nothing there. Some events are worth seeing
while it runs: an agent's token deltas (never logged at all) and progress
(logged at the barrier). The process driving the run hands each one to its
store's :class:`LiveFeed` the moment it is raised; followers of the run (in
this process or another) get it from there.

The feed is best-effort by design, and the log stays the source of truth:

* :meth:`LiveFeed.publish` never blocks and never raises: it queues the
  event and returns. A follower that is slow, gone or absent never slows
  the run; when the queues are full the oldest live events are dropped.
* A follower gets the live events raised after it started following, never
  those before (they are not kept to replay); a reconnecting follower reads
  what committed meanwhile from the log, and the live events it missed are
  gone.
* Live events carry no ``seq`` (it is 0): they are not in the log, so
  nothing resumes from them.

Each backend carries them its own way: :class:`LocalFanOut` within one
process (all that a ``MemoryStore`` needs), a small side file of recent
events on SQLite (:mod:`treadle._stores._sqlite_live`), ``NOTIFY`` on
PostgreSQL (:mod:`treadle._stores._postgres_live`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import threading
from collections import deque
from typing import TYPE_CHECKING, Protocol

from treadle._stores._events import EventEntry, LoggedEvent

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator

FOLLOWER_BUFFER = 10_000
"""Live events a follower holds unread before the oldest are dropped."""


class LiveFollower:
    """One follower's live events of one run, in the order they arrived.

    Filled from the thread of the follower's event loop only (see
    :meth:`LocalFanOut.publish`); when ``size`` wait unread, the oldest goes.
    """

    __slots__ = ("_queue", "dropped", "run_id")

    def __init__(self, run_id: str, size: int = FOLLOWER_BUFFER) -> None:
        self.run_id = run_id
        self._queue: asyncio.Queue[LoggedEvent] = asyncio.Queue(size)
        self.dropped = 0
        """Live events dropped because this follower fell behind."""

    def put(self, event: LoggedEvent) -> None:
        """Queue ``event``, dropping the oldest if the follower fell behind."""
        queue = self._queue
        if queue.full():
            queue.get_nowait()
            self.dropped += 1
        queue.put_nowait(event)

    @property
    def waiting(self) -> int:
        """Live events queued here, not yet read."""
        return self._queue.qsize()

    async def get(self) -> LoggedEvent:
        """The next live event, once one arrives."""
        return await self._queue.get()

    def get_nowait(self) -> LoggedEvent | None:
        """The next live event if one waits, else ``None``."""
        try:
            return self._queue.get_nowait()
        except asyncio.QueueEmpty:
            return None


class LiveFeed(Protocol):
    """A store's role for live events: publish them as a run raises them, follow a run's.

    Every store has one (``store.live``): ``MemoryStore`` within its
    process, ``SqliteStore`` and ``PostgresStore`` across processes.
    """

    def publish(self, run_id: str, entry: EventEntry) -> None:
        """Hand one live event of ``run_id`` to its followers; never blocks, never raises."""
        ...

    def follow(self, run_id: str) -> contextlib.AbstractAsyncContextManager[LiveFollower]:
        """The run's live events raised from now on, until the block ends."""
        ...

    async def close(self) -> None:
        """Stop what the feed runs (its sender); what it had not sent yet is dropped."""
        ...


class LiveEvents(Protocol):
    """A store's role: the feed its runs' live events go out on, and are followed from.

    Attributes:
        live: Where its runs' live events (token deltas, progress) go to
            followers in any process, before their barrier commits them.
    """

    live: LiveFeed


def live_event(run_id: str, entry: EventEntry) -> LoggedEvent:
    """A live event as followers get it: in the log's form, ``seq`` 0 (it is not in the log)."""
    return LoggedEvent(
        run_id, 0, entry.superstep, entry.kind, entry.executor_id, entry.at, json.loads(entry.data)
    )


def new_origin() -> str:
    """A feed's own mark (its process and a random part), so it skips its own events read back."""
    return f"{os.getpid()}:{os.urandom(6).hex()}"


class LocalFanOut:
    """Live events handed to this process's followers at once (a ``MemoryStore``'s whole feed).

    Followers register their run and their event loop; :meth:`publish` puts
    each event in the queue of each follower of its run, on the follower's
    loop (directly when called from that loop's thread, else through
    ``call_soon_threadsafe``). A run nobody follows here costs one lookup.
    """

    __slots__ = ("_followers", "_lock")

    def __init__(self) -> None:
        self._followers: dict[str, list[tuple[LiveFollower, asyncio.AbstractEventLoop, int]]] = {}
        self._lock = threading.Lock()

    def publish(self, run_id: str, entry: EventEntry) -> None:
        """Hand the event to each follower of its run in this process."""
        if not self._followers:
            return
        followers = self._followers.get(run_id)
        if followers:
            self.deliver(followers, live_event(run_id, entry))

    def deliver_remote(self, event: LoggedEvent) -> None:
        """Hand an event read from another process to this process's followers of its run."""
        followers = self._followers.get(event.run_id)
        if followers:
            self.deliver(followers, event)

    @staticmethod
    def deliver(
        followers: list[tuple[LiveFollower, asyncio.AbstractEventLoop, int]], event: LoggedEvent
    ) -> None:
        """Put ``event`` in each follower's queue, on its own loop."""
        here = threading.get_ident()
        for follower, loop, thread in tuple(followers):
            if thread == here:
                follower.put(event)
            else:
                with contextlib.suppress(RuntimeError):  # its loop has closed: nobody to tell
                    loop.call_soon_threadsafe(follower.put, event)

    @contextlib.contextmanager
    def following(self, run_id: str) -> Iterator[LiveFollower]:
        """A follower of ``run_id`` registered here until the block ends."""
        follower = LiveFollower(run_id)
        entry = (follower, asyncio.get_running_loop(), threading.get_ident())
        with self._lock:
            self._followers.setdefault(run_id, []).append(entry)
        try:
            yield follower
        finally:
            with self._lock:
                followers = self._followers[run_id]
                followers.remove(entry)
                if not followers:
                    del self._followers[run_id]

    def followed(self) -> frozenset[str]:
        """The runs someone in this process follows now."""
        return frozenset(self._followers)


class MemoryLiveFeed:
    """A ``MemoryStore``'s live feed: its runs are driven and followed in this process only."""

    __slots__ = ("_local",)

    def __init__(self) -> None:
        self._local = LocalFanOut()

    def publish(self, run_id: str, entry: EventEntry) -> None:
        """Hand the event to the run's followers here."""
        self._local.publish(run_id, entry)

    @contextlib.asynccontextmanager
    async def follow(self, run_id: str) -> AsyncIterator[LiveFollower]:
        """The run's live events from now on, until the block ends."""
        with self._local.following(run_id) as follower:
            yield follower

    async def close(self) -> None:
        """Nothing runs on its own: nothing to stop."""


def dropping_queue(size: int) -> deque[tuple[str, EventEntry]]:
    """The queue a sender drains: appending to a full one drops the oldest (never blocks)."""
    return deque(maxlen=size)
