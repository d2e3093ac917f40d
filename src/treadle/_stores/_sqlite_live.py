"""A ``SqliteStore``'s live feed: recent live events in a small side file, polled by followers.

Why a side file (``<database>-live``) rather than a table of the store's
own database: SQLite has one writer at a time per file, so live events
written beside the run's commits would take the write lock the run's
checkpoints need, and a run would wait on its own token deltas. The side
file has a writer lock of its own, is written with ``synchronous=OFF``
(no fsync: live events need not survive a crash), and holds only recent
events: each write prunes events older than :data:`KEEP_SECONDS` or beyond
the newest :data:`KEEP_ROWS`. Why not a socket per follower: it needs a
rendezvous for drivers to find followers (a directory of sockets, stale
ones after a crash) and is not there for every file system a database can
sit on; a file beside the database is wherever the database is.

The driver's side: the run hands each event to a :class:`LiveSender`,
whose thread inserts batches. The follower's side: one reader per event
loop, shared by every follow block on that loop (opened by the first,
closed with the last), reads the events of the runs followed, when
``PRAGMA data_version`` says another connection wrote (every :data:`POLL`
seconds; one cheap pragma when nothing changed), and hands each to the
followers of its run that began before it was written. Events this feed
wrote itself are skipped there: its own followers had them at once from
:class:`LocalFanOut`. Why shared: with a connection and a poll per follow
block, each event stream of ``treadle serve`` held three more open files
(the side file, its log, its shared memory) and a thread hand-off every
:data:`POLL` seconds; 120 streams used up a limit of 256 open files, and
the server could accept no connection at all.

A store on ``:memory:`` has no file beside it: its feed stays in its process.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sqlite3
import threading
import time
from typing import TYPE_CHECKING, Any

from treadle._stores import _sql_live
from treadle._stores._events import LoggedEvent
from treadle._stores._fork_gate import guard
from treadle._stores._live import LiveFollower, LocalFanOut, new_origin
from treadle._stores._live_sender import LiveSender
from treadle._tasks import cancel_and_wait, stop_if_cancelled

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Sequence

    from treadle._stores._events import EventEntry

POLL = 0.05
"""Seconds between a follower's looks at the side file."""

KEEP_SECONDS = 60.0
"""Live events older than this are pruned from the side file."""

KEEP_ROWS = 10_000
"""At most this many of the newest live events are kept in the side file."""

_PRUNE_EVERY = 1.0  # seconds between prunes by one writer


def side_file(path: str) -> str | None:
    """Where a database's live events are kept (``None``: an in-memory database has none)."""
    if not path or path == ":memory:" or path.startswith("file:"):
        return None
    return f"{path}-live"


def _connect(path: str) -> sqlite3.Connection:
    connection = sqlite3.connect(path, timeout=1.0, isolation_level=None, check_same_thread=False)
    try:
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA synchronous=OFF")
        connection.executescript(_sql_live.SIDE_FILE_SCHEMA)
    except BaseException:
        connection.close()
        raise
    return connection


class SqliteLiveFeed:
    """The live feed of the SQLite database at ``path`` (see the module)."""

    __slots__ = (
        "_connection",
        "_inherited",
        "_last_prune",
        "_local",
        "_origin",
        "_path",
        "_pid",
        "_readers",
        "_sender",
    )

    def __init__(self, path: str) -> None:
        self._path = side_file(path)
        self._inherited: list[object] = []  # a forked child's copies (see _forked)
        self._start()

    def _start(self) -> None:
        self._pid = os.getpid()
        self._local = LocalFanOut()
        self._origin = new_origin()
        self._connection: sqlite3.Connection | None = None  # the sender thread's
        self._last_prune = 0.0
        self._readers: dict[asyncio.AbstractEventLoop, _Reader] = {}  # one per event loop
        self._sender = LiveSender(self._write, self._close_connection, "treadle-sqlite-live")

    def _forked(self) -> None:
        """Start over in a forked child, the parent's sender and connection kept untouched.

        As ``SqliteStore`` does (its ``_forked``); a new origin too, or the
        parent's followers would skip the child's events as their own.
        """
        self._inherited.append((self._sender, self._connection))
        self._start()

    def publish(self, run_id: str, entry: EventEntry) -> None:
        """Hand the event to followers here at once, and to the side file's writer."""
        if self._pid != os.getpid():
            self._forked()
        self._local.publish(run_id, entry)
        if self._path is not None:
            self._sender.put(run_id, entry)

    @contextlib.asynccontextmanager
    async def follow(self, run_id: str) -> AsyncIterator[LiveFollower]:
        """The run's live events from now on, from this process and from the side file."""
        if self._pid != os.getpid():
            self._forked()
        with self._local.following(run_id) as follower:
            if self._path is None:
                yield follower
                return
            loop = asyncio.get_running_loop()
            reader = self._readers.get(loop)
            if reader is None:
                reader = self._readers[loop] = _Reader(self._path, self._origin)
            reader.add(follower)
            try:
                # Nothing written from here on is missed: the block yields once the
                # reader knows where the side file stood when it began.
                with contextlib.suppress(sqlite3.Error):  # none to read: this process's only
                    await reader.started(follower)
                yield follower
            finally:
                if reader.remove(follower):  # the last follower here: nobody reads any more
                    if self._readers.get(loop) is reader:
                        del self._readers[loop]
                    await reader.stop()

    async def close(self) -> None:
        """Stop the writer thread; what it had not written is dropped."""
        if self._pid != os.getpid():
            self._forked()
        await asyncio.to_thread(self._sender.close)

    def _write(self, batch: Sequence[tuple[str, EventEntry]]) -> None:
        """On the sender's thread: one transaction for the batch, and a prune now and then."""
        assert self._path is not None  # noqa: S101 - only queued when there is a side file
        connection = self._connection
        if connection is None:
            connection = self._connection = _connect(self._path)
        now = time.time()
        origin = self._origin
        rows = [
            (origin, run_id, e.superstep, e.kind, e.executor_id, e.at, e.data, now)
            for run_id, e in batch
        ]
        connection.execute("BEGIN IMMEDIATE")
        try:
            connection.executemany(_sql_live.INSERT_LIVE, rows)
            if now - self._last_prune > _PRUNE_EVERY:
                connection.execute(_sql_live.PRUNE_LIVE, (now - KEEP_SECONDS, KEEP_ROWS))
                self._last_prune = now
            connection.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                connection.execute("ROLLBACK")
            raise

    def _close_connection(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None


class _Reader:
    """The connection of one event loop's followers to the side file, and where each got to.

    Who follows what is kept under the reader's lock, and a follower's start
    is read on the reader's thread: a read that ran between a follower's
    start and its being counted in would have passed its first events by.
    """

    __slots__ = (
        "__weakref__",
        "_connecting",
        "_connection",
        "_cursors",
        "_followers",
        "_lock",
        "_opening",
        "_origin",
        "_path",
        "_polling",
        "_stopped",
        "_version",
    )

    def __init__(self, path: str, origin: str) -> None:
        self._path = path
        self._origin = origin
        # Each run's followers, with the newest row of the side file when each began
        # (None: not yet read): a follower is handed the rows after its own start only.
        self._followers: dict[str, dict[LiveFollower, int | None]] = {}
        # Each run followed, and the row its reading got to (from its first follower's start).
        self._cursors: dict[str, int] = {}
        self._lock = threading.Lock()
        self._connecting = threading.Lock()  # held while the connection is opened or closed
        guard(self, self._lock, self._connecting)  # held in SQLite: a fork waits for them
        self._connection: sqlite3.Connection | None = None
        self._version = 0
        self._opening: asyncio.Task[None] | None = None
        self._polling: asyncio.Task[None] | None = None
        self._stopped = False  # the last follower has gone: a connection opened late is closed

    def add(self, follower: LiveFollower) -> None:
        """One more follower, handed nothing until :meth:`started` has read where it began."""
        with self._lock:
            self._followers.setdefault(follower.run_id, {})[follower] = None

    def remove(self, follower: LiveFollower) -> bool:
        """One follower fewer; whether it was the last."""
        with self._lock:
            followers = self._followers[follower.run_id]
            del followers[follower]
            if not followers:
                del self._followers[follower.run_id]
                self._cursors.pop(follower.run_id, None)
            return not self._followers

    async def started(self, follower: LiveFollower) -> None:
        """Once the side file is open and the follower's start is read.

        Raises:
            sqlite3.Error: the side file cannot be opened (a read-only directory).
        """
        loop = asyncio.get_running_loop()
        if self._opening is None:
            self._opening = loop.create_task(asyncio.to_thread(self._open))
            self._opening.add_done_callback(_heard)  # its error is each follower's, or nobody's
        await asyncio.shield(self._opening)  # a follower given up leaves it to the others
        await asyncio.to_thread(self._begin, follower)
        if self._polling is None:
            self._polling = loop.create_task(self._poll())

    async def stop(self) -> None:
        """Stop polling and close the connection (the last follower has gone).

        An opening still on its thread (the only follower's client left at
        once) is not waited for: it closes what it opened itself, seeing the
        reader stopped.
        """
        try:
            if self._polling is not None:
                await cancel_and_wait(self._polling)
        finally:
            with self._lock:
                self._stopped = True
                if self._connection is not None:
                    self._connection.close()
                    self._connection = None

    def _open(self) -> None:
        # Not under _lock: the connect may wait up to a second for the side file,
        # and the event loop takes _lock as followers come and go.
        with self._connecting:
            connection = _connect(self._path)
        with self._lock:
            if not self._stopped:
                self._version = _data_version(connection)
                self._connection = connection
                return
        with self._connecting:
            connection.close()

    def _begin(self, follower: LiveFollower) -> None:
        """On a thread: the follower begins at the side file's newest row, now."""
        with self._lock:
            if self._connection is None:  # stopped meanwhile: nobody is left to begin
                return
            newest = int(self._connection.execute(_sql_live.NEWEST_LIVE).fetchone()[0])
            followers = self._followers.get(follower.run_id)
            if followers is None or follower not in followers:
                return  # it left meanwhile
            followers[follower] = newest
            self._cursors.setdefault(follower.run_id, newest)

    def _read(self) -> list[tuple[LoggedEvent, list[LiveFollower]]]:
        """On a thread: the followed runs' events written by others since they were read.

        Their data is decoded once the lock is let go: the event loop takes
        the lock too, as a follower comes or goes.
        """
        with self._lock:
            connection = self._connection
            if connection is None or not self._cursors:
                return []
            version = _data_version(connection)
            if version == self._version:
                return []
            self._version = version
            reading = json.dumps(list(self._cursors.items()))
            rows = connection.execute(_sql_live.LIVE_AFTER_FOR, (reading, self._origin))
            found: list[tuple[tuple[Any, ...], list[LiveFollower]]] = []
            for row in rows:
                row_id, run_id = row[0], row[1]
                self._cursors[run_id] = max(self._cursors[run_id], row_id)
                began = self._followers.get(run_id, {})
                to = [f for f, start in began.items() if start is not None and row_id > start]
                if to:
                    found.append((row, to))
        delivered: list[tuple[LoggedEvent, list[LiveFollower]]] = []
        for (_, run_id, superstep, kind, executor_id, at, data), to in found:
            event = LoggedEvent(run_id, 0, superstep, kind, executor_id, at, json.loads(data))
            delivered.append((event, to))
        return delivered

    async def _poll(self) -> None:
        """Every :data:`POLL` seconds, the new events of the runs followed to their followers."""
        while True:
            stop_if_cancelled()
            await asyncio.sleep(POLL)
            try:
                delivered = await asyncio.to_thread(self._read)
            except sqlite3.Error:  # a busy side file: look again next time
                continue
            for event, followers in delivered:  # on the loop: a follower's queue is its
                for follower in followers:
                    follower.put(event)


def _heard(opening: asyncio.Task[None]) -> None:
    """Take an opening's outcome, which no follower may be left to await."""
    if not opening.cancelled():
        opening.exception()


def _data_version(connection: sqlite3.Connection) -> int:
    return int(connection.execute("PRAGMA data_version").fetchone()[0])
