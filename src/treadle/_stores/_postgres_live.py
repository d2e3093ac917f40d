"""A ``PostgresStore``'s live feed: ``NOTIFY`` from the driver, ``LISTEN`` in each follower.

The driver's side: a :class:`LiveSender` thread with a connection of its
own (autocommit, so each batch is notified at once, never held back by a
transaction of the run) sends a batch of events in one statement
(``pg_notify`` over an array). ``NOTIFY`` payloads are limited to 8,000
bytes: an event's text is ASCII JSON (``ensure_ascii``), so it is cut into
parts of :data:`PART` characters, each sent with the event's number, its
index and the count, and a follower puts the parts back together (an event
with a part lost is dropped). A full notification queue on the server
(followers that stopped reading) makes ``pg_notify`` fail: the sender
drops that batch and goes on; the run never notices.

The follower's side: one listening connection per event loop, shared by
every follow block on that loop, opened by the first block and closed when
the last one ends. A block waits until it is listening before it yields (so
every event sent after the block began reaches it); a task reads the
notifications and hands each to the followers of its run on that loop,
skipping those sent by this same feed (its own followers had them at once
from :class:`LocalFanOut`). Why shared: with a connection per block, a
server's 100 open event streams used up the database's ``max_connections``,
and every other client of the database (the store's pool, each worker) was
refused until the streams closed.

The channel is ``treadle_live_`` and a digest of the store's schema, so
stores on other schemas of the same database never see each other's events.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import itertools
import json
import logging
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import sql

from treadle._stores._events import LoggedEvent
from treadle._stores._live import LiveFollower, LocalFanOut, new_origin
from treadle._stores._live_sender import LiveSender
from treadle._tasks import cancel_and_wait, stop_if_cancelled

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Container, Sequence

    from treadle._stores._events import EventEntry

logger = logging.getLogger("treadle.live")

PART = 7_000
"""Characters of an event's text per notification (``NOTIFY`` takes under 8,000 bytes)."""

_NOTIFY = (
    "SELECT pg_notify(%s, payload)"
    " FROM unnest(%s::text[]) WITH ORDINALITY AS p(payload, n) ORDER BY n"
)
_PARTIAL_LIMIT = 1000  # events half reassembled kept at most (parts lost are never completed)
_RECONNECT = 1.0  # seconds before a follower listens again after its connection failed


def channel_of(schema: str) -> str:
    """The channel of a schema's live events (a digest: any schema name fits in 63 bytes)."""
    return "treadle_live_" + hashlib.sha256(schema.encode()).hexdigest()[:24]


def payloads(origin: str, number: int, run_id: str, entry: EventEntry) -> list[str]:
    """One event as the notifications that carry it: ``origin number index count text``."""
    text = json.dumps(
        [run_id, entry.superstep, entry.kind, entry.executor_id, entry.at, entry.data],
        separators=(",", ":"),
    )
    parts = [text[i : i + PART] for i in range(0, len(text), PART)] or [""]
    return [f"{origin} {number} {i} {len(parts)} {part}" for i, part in enumerate(parts)]


def _unfollowed(text: str, followed: Container[str]) -> bool:
    """Whether an event's text is surely of a run nobody follows, read without decoding it."""
    if not text.startswith('["'):
        return False
    end = text.find('"', 2)
    if end < 0:
        return False
    run_id = text[2:end]
    return "\\" not in run_id and run_id not in followed  # an escape: decoded to be sure


class _Reassembly:
    """Notifications back into events: parts of one event joined once all have come."""

    __slots__ = ("_origin", "_partial")

    def __init__(self, origin: str) -> None:
        self._origin = origin
        self._partial: dict[tuple[str, str], list[str | None]] = {}

    def event_of(self, payload: str, followed: Container[str]) -> LoggedEvent | None:
        """The event ``payload`` completes; ``None``: not followed here, our own, not whole yet."""
        try:
            origin, number, index, count, text = payload.split(" ", 4)
            at, of = int(index), int(count)
        except ValueError:
            return None
        if origin == self._origin:
            return None
        if of > 1:
            key = (origin, number)
            parts = self._partial.get(key)
            if parts is None:
                if len(self._partial) >= _PARTIAL_LIMIT:  # parts never completed: forget the oldest
                    del self._partial[next(iter(self._partial))]
                parts = self._partial[key] = [None] * of
            parts[at] = text
            if any(part is None for part in parts):
                return None
            del self._partial[key]
            text = "".join(part or "" for part in parts)
        elif _unfollowed(text, followed):
            return None  # not decoded
        try:
            run_id, superstep, kind, executor_id, when, data = json.loads(text)
        except (ValueError, TypeError):
            return None
        if not isinstance(run_id, str) or run_id not in followed:
            return None
        return LoggedEvent(run_id, 0, superstep, kind, executor_id, when, json.loads(data))


class PostgresLiveFeed:
    """The live feed of the PostgreSQL store at ``dsn`` (and ``schema``); see the module."""

    __slots__ = (
        "_channel",
        "_connection",
        "_dsn",
        "_listeners",
        "_local",
        "_numbers",
        "_origin",
        "_schema",
        "_sender",
    )

    def __init__(self, dsn: str, schema: str | None) -> None:
        self._dsn = dsn
        self._schema = schema
        self._local = LocalFanOut()
        self._origin = new_origin()
        self._numbers = itertools.count()
        self._connection: psycopg.Connection[Any] | None = None  # the sender thread's
        self._channel: str | None = None
        self._listeners: dict[asyncio.AbstractEventLoop, _Listener] = {}  # one per event loop
        self._sender = LiveSender(self._send, self._close_connection, "treadle-postgres-live")

    def publish(self, run_id: str, entry: EventEntry) -> None:
        """Hand the event to followers here at once, and to the sender for other processes."""
        self._local.publish(run_id, entry)
        self._sender.put(run_id, entry)

    @contextlib.asynccontextmanager
    async def follow(self, run_id: str) -> AsyncIterator[LiveFollower]:
        """The run's live events from now on: this process's, and ``NOTIFY`` ed by others."""
        loop = asyncio.get_running_loop()
        with self._local.following(run_id) as follower:
            listener = self._listeners.get(loop)
            if listener is None:
                listener = self._listeners[loop] = _Listener(self)
            listener.add(follower)
            try:
                await listener.started()  # before yielding: nothing sent from now on is missed
                yield follower
            finally:
                if listener.remove(follower):  # the last follower here: nobody listens any more
                    if self._listeners.get(loop) is listener:
                        del self._listeners[loop]
                    await listener.stop()

    async def close(self) -> None:
        """Stop the sender thread; what it had not sent is dropped."""
        await asyncio.to_thread(self._sender.close)

    async def connect(self) -> tuple[psycopg.AsyncConnection[Any], str]:
        """A listening connection's start: connected, on the schema, and its channel."""
        db = await psycopg.AsyncConnection.connect(self._dsn, autocommit=True)
        try:
            channel = await _channel(db, self._schema)
        except BaseException:
            await db.close()
            raise
        return db, channel

    @property
    def origin(self) -> str:
        """This feed's mark on what it sends."""
        return self._origin

    def _send(self, batch: Sequence[tuple[str, EventEntry]]) -> None:
        """On the sender's thread: the batch's notifications in one statement."""
        connection = self._connection
        if connection is None or connection.closed:
            connection = self._connection = psycopg.connect(self._dsn, autocommit=True)
            self._channel = _channel_sync(connection, self._schema)
        numbers, origin = self._numbers, self._origin
        texts = [
            text
            for run_id, entry in batch
            for text in payloads(origin, next(numbers), run_id, entry)
        ]
        try:
            connection.execute(_NOTIFY, (self._channel, texts))
        except psycopg.Error:
            self._close_connection()  # connected afresh for the next batch
            raise

    def _close_connection(self) -> None:
        if self._connection is not None:
            with contextlib.suppress(psycopg.Error):
                self._connection.close()
            self._connection = None


class _Listener:
    """The listening connection of one event loop's followers; it reconnects while they last."""

    __slots__ = ("_db", "_feed", "_followers", "_listened", "_reading", "_reassembly")

    def __init__(self, feed: PostgresLiveFeed) -> None:
        self._feed = feed
        self._followers: dict[str, list[LiveFollower]] = {}
        self._reassembly = _Reassembly(feed.origin)
        self._db: psycopg.AsyncConnection[Any] | None = None
        self._listened: asyncio.Task[bool] | None = None
        self._reading: asyncio.Task[None] | None = None

    def add(self, follower: LiveFollower) -> None:
        """One more follower to hand its run's events to."""
        self._followers.setdefault(follower.run_id, []).append(follower)

    def remove(self, follower: LiveFollower) -> bool:
        """One follower fewer; whether it was the last."""
        followers = self._followers[follower.run_id]
        followers.remove(follower)
        if not followers:
            del self._followers[follower.run_id]
        return not self._followers

    async def started(self) -> None:
        """Once the first ``LISTEN`` is done (or failed: then it is retried while reading)."""
        if self._listened is None:
            loop = asyncio.get_running_loop()
            self._listened = loop.create_task(self.listen())
            self._reading = loop.create_task(self.read())
        await asyncio.shield(self._listened)  # a follower given up leaves it to the others

    async def stop(self) -> None:
        """Stop reading and close the connection (the last follower has gone)."""
        try:
            for task in (self._reading, self._listened):
                if task is not None:
                    await cancel_and_wait(task)
        finally:
            await self.close()

    async def listen(self) -> bool:
        """Connect and ``LISTEN``; ``False`` if the server cannot be reached (it is retried)."""
        try:
            db, channel = await self._feed.connect()
        except psycopg.Error as error:
            logger.debug("live events: cannot listen: %s", type(error).__name__)
            return False
        try:
            await db.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
        except BaseException as error:
            with contextlib.suppress(psycopg.Error):
                await db.close()
            if isinstance(error, psycopg.Error):
                return False
            raise
        self._db = db
        return True

    async def read(self) -> None:
        """Notifications to their run's followers until cancelled; listening again when cut."""
        assert self._listened is not None  # noqa: S101 - started() makes both
        await self._listened
        while True:
            stop_if_cancelled()
            db = self._db
            if db is not None:
                try:
                    async for notify in db.notifies():
                        self._deliver(notify.payload)
                except psycopg.Error as error:
                    logger.debug("live events: listening stopped: %s", type(error).__name__)
                await self.close()
            await asyncio.sleep(_RECONNECT)
            await self.listen()

    def _deliver(self, payload: str) -> None:
        """A notification to the followers of its run here (once its event is whole)."""
        event = self._reassembly.event_of(payload, self._followers)
        if event is not None:
            for follower in self._followers.get(event.run_id, ()):
                follower.put(event)

    async def close(self) -> None:
        db, self._db = self._db, None
        if db is not None:
            with contextlib.suppress(psycopg.Error):
                await db.close()


# A named schema's channel comes from its name, never from the server: asked
# before the schema exists, current_schema() is NULL, and every store whose
# schema was not yet made would share one channel (two such stores' followers
# of the same run id then got each other's events).


async def _channel(db: psycopg.AsyncConnection[Any], schema: str | None) -> str:
    if schema is not None:
        return channel_of(schema)
    found = await (await db.execute("SELECT current_schema()")).fetchone()
    return channel_of(found[0] if found and found[0] else "")


def _channel_sync(db: psycopg.Connection[Any], schema: str | None) -> str:
    if schema is not None:
        return channel_of(schema)
    found = db.execute("SELECT current_schema()").fetchone()
    return channel_of(found[0] if found and found[0] else "")
