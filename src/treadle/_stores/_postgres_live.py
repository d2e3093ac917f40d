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

The follower's side: each follow block opens a connection, ``LISTEN`` s
before it yields (so every event sent after the block began reaches it),
and a task it owns reads the notifications, keeping those of its run and
not sent by this same feed (its own followers had them at once from
:class:`LocalFanOut`).

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
    from collections.abc import AsyncIterator, Sequence

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


class _Reassembly:
    """Notifications back into events: parts of one event joined once all have come."""

    __slots__ = ("_origin", "_partial", "_run_id")

    def __init__(self, run_id: str, origin: str) -> None:
        self._run_id = run_id
        self._origin = origin
        self._partial: dict[tuple[str, str], list[str | None]] = {}

    def event_of(self, payload: str) -> LoggedEvent | None:
        """The event ``payload`` completes (``None``: another run's, our own, or not whole yet)."""
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
        elif f'["{self._run_id}"' not in text[: len(self._run_id) + 3]:
            return None  # another run's: not decoded
        try:
            run_id, superstep, kind, executor_id, when, data = json.loads(text)
        except (ValueError, TypeError):
            return None
        if run_id != self._run_id:
            return None
        return LoggedEvent(run_id, 0, superstep, kind, executor_id, when, json.loads(data))


class PostgresLiveFeed:
    """The live feed of the PostgreSQL store at ``dsn`` (and ``schema``); see the module."""

    __slots__ = (
        "_channel",
        "_connection",
        "_dsn",
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
        self._sender = LiveSender(self._send, self._close_connection, "treadle-postgres-live")

    def publish(self, run_id: str, entry: EventEntry) -> None:
        """Hand the event to followers here at once, and to the sender for other processes."""
        self._local.publish(run_id, entry)
        self._sender.put(run_id, entry)

    @contextlib.asynccontextmanager
    async def follow(self, run_id: str) -> AsyncIterator[LiveFollower]:
        """The run's live events from now on: this process's, and ``NOTIFY`` ed by others."""
        with self._local.following(run_id) as follower:
            listener = _Listener(self, run_id, follower)
            await listener.listen()  # before yielding: nothing sent from now on is missed
            reading = asyncio.get_running_loop().create_task(listener.read())
            try:
                yield follower
            finally:
                await cancel_and_wait(reading)
                await listener.close()

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
    """One follower's listening connection: it reconnects while the follow block lasts."""

    __slots__ = ("_db", "_feed", "_follower", "_reassembly")

    def __init__(self, feed: PostgresLiveFeed, run_id: str, follower: LiveFollower) -> None:
        self._feed = feed
        self._follower = follower
        self._reassembly = _Reassembly(run_id, feed.origin)
        self._db: psycopg.AsyncConnection[Any] | None = None

    async def listen(self) -> bool:
        """Connect and ``LISTEN``; ``False`` if the server cannot be reached (it is retried)."""
        try:
            db, channel = await self._feed.connect()
        except psycopg.Error as error:
            logger.debug("live events: cannot listen: %s", type(error).__name__)
            return False
        try:
            await db.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
        except psycopg.Error:
            await db.close()
            return False
        self._db = db
        return True

    async def read(self) -> None:
        """Notifications into the follower's queue until cancelled; listening again when cut."""
        while True:
            stop_if_cancelled()
            db = self._db
            if db is not None:
                try:
                    async for notify in db.notifies():
                        event = self._reassembly.event_of(notify.payload)
                        if event is not None:
                            self._follower.put(event)
                except psycopg.Error as error:
                    logger.debug("live events: listening stopped: %s", type(error).__name__)
                await self.close()
            await asyncio.sleep(_RECONNECT)
            await self.listen()

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
