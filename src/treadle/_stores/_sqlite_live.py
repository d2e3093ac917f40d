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
whose thread inserts batches. The follower's side: a task owned by the
follow block reads the events of its run written after it started
following, when ``PRAGMA data_version`` says another connection wrote
(every :data:`POLL` seconds; one cheap pragma when nothing changed).
Events this feed wrote itself are skipped there: its own followers had
them at once from :class:`LocalFanOut`.

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
from typing import TYPE_CHECKING

from treadle._stores import _sql_live
from treadle._stores._events import LoggedEvent
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
            opening = asyncio.ensure_future(
                asyncio.to_thread(_Reader.open, self._path, run_id, self._origin)
            )
            try:
                reader = await asyncio.shield(opening)
            except sqlite3.Error:  # no side file to read (a read-only directory): this process's
                yield follower
                return
            except asyncio.CancelledError:
                # The thread opens it all the same: closed once it has (a follower given up
                # while opening, an event stream whose client left at once, held it open).
                opening.add_done_callback(_close_opened)
                raise
            polling = asyncio.get_running_loop().create_task(reader.poll(follower))
            try:
                yield follower
            finally:
                try:
                    await cancel_and_wait(polling)
                finally:
                    reader.close()

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


def _close_opened(opening: asyncio.Future[_Reader]) -> None:
    """Close the reader a cancelled :meth:`SqliteLiveFeed.follow` was opening, if it opened."""
    if not opening.cancelled() and opening.exception() is None:
        opening.result().close()


class _Reader:
    """One follower's connection to the side file, and where it got to."""

    __slots__ = ("_connection", "_last", "_lock", "_origin", "_run_id", "_version")

    def __init__(self, connection: sqlite3.Connection, run_id: str, origin: str) -> None:
        self._connection = connection
        self._lock = threading.Lock()  # a read still on its thread when the follower leaves
        self._run_id = run_id
        self._origin = origin
        self._last = int(
            connection.execute(_sql_live.NEWEST_LIVE).fetchone()[0]
        )  # from now on, not before
        self._version = self._data_version()

    @classmethod
    def open(cls, path: str, run_id: str, origin: str) -> _Reader:
        return cls(_connect(path), run_id, origin)

    def _data_version(self) -> int:
        return int(self._connection.execute("PRAGMA data_version").fetchone()[0])

    def read(self) -> list[LoggedEvent]:
        """The run's events written by others since the last read (none if nothing changed)."""
        with self._lock:
            return self._read()

    def _read(self) -> list[LoggedEvent]:
        version = self._data_version()
        if version == self._version:
            return []
        self._version = version
        rows = self._connection.execute(
            _sql_live.LIVE_AFTER, (self._last, self._run_id, self._origin)
        )
        events = []
        for row_id, run_id, superstep, kind, executor_id, at, data in rows:
            self._last = row_id
            event = LoggedEvent(run_id, 0, superstep, kind, executor_id, at, json.loads(data))
            events.append(event)
        return events

    async def poll(self, follower: LiveFollower) -> None:
        """Every :data:`POLL` seconds, the new events of the run into ``follower``'s queue."""
        while True:
            stop_if_cancelled()
            await asyncio.sleep(POLL)
            try:
                events = await asyncio.to_thread(self.read)
            except sqlite3.Error:  # a busy side file: look again next time
                continue
            for event in events:
                follower.put(event)

    def close(self) -> None:
        with self._lock:
            self._connection.close()
