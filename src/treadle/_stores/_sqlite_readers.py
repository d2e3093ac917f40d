"""``SqliteStore``'s two read lanes: one for reads of a few rows, one for scans.

A read names its rows (a run, a checkpoint, a request, a token) or takes a
limit's worth from the front of an index that holds them in order: it reads
a few pages and is done in microseconds. A *scan* reads rows in proportion
to the store instead: a search by filter, which no index may serve
(``fields.a != "x" && fields.a != "y" && ...`` probes every run: about a
second over 35,000 runs), a count, a listing without a limit or one sorted
after it is read. On one reader thread, every read called while a scan ran
waited for it, so one client repeating a search held up every other
client's ``get_run``, answer and page by up to a scan each. So scans have a
lane of their own, with its own thread and connection (WAL lets readers
read at once, each from its own snapshot): a read of a few rows never
queues behind a scan, and writes never did (they have the writer's lane).

Scans queue behind scans, in the order they were called: a caller
repeating one delays another caller's scan by the scans called before it,
no more. One scan lane, not a pool: a scan keeps a core busy (SQLite lets
go of the GIL while it steps), and several at once would take the cores
the writer's group commits and the event loop need, for scans that end no
sooner in all.

Why not bound a scan instead (a step budget through SQLite's
``set_progress_handler``, or ``interrupt``)? What a scan costs is the
store's size, not its caller's input: the filter's reader already bounds
the input (length, comparisons, depth: ``treadle._values._filter``) and
refuses what is over in bounded time. A budget would refuse a legal search
of a store that grew, however rarely it ran, and would only shorten, never
end, the wait of the reads queued behind it. Keeping scans off the short
reads' lane ends that wait, and a search still gets its whole answer.
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from treadle._exceptions import DurabilityError
from treadle._stores._sqlite_lanes import Lane
from treadle._stores._sqlite_transactions import retrying

if TYPE_CHECKING:
    import asyncio

_T = TypeVar("_T")
_Work = Callable[[sqlite3.Connection], _T]


class Readers:
    """The read lanes of one store in one process: reads of a few rows, and scans.

    Each lane's thread starts, and opens its connection, with its first
    read (the writer has made and migrated the file by then).
    """

    __slots__ = ("_keyed", "_scans")

    def __init__(self, owner: object, path: str, busy_timeout: float) -> None:
        self._keyed = _Reader(Lane(owner, "treadle-sqlite-reader"), path, busy_timeout)
        self._scans = _Reader(Lane(owner, "treadle-sqlite-scanner"), path, busy_timeout)

    def submit(self, work: _Work[_T], *, scan: bool) -> asyncio.Future[_T]:
        """Queue ``work`` on the scans' lane (``scan``) or the other; the future has its rows."""
        reader = self._scans if scan else self._keyed
        return reader.lane.submit(functools.partial(reader.run, work))

    async def stop(self) -> None:
        """Let each lane finish what it was given, close its connection, and end its thread."""
        await self._keyed.stop()
        await self._scans.stop()


class _Reader:
    """One read lane and the connection its thread reads through."""

    __slots__ = ("_busy_timeout", "_connection", "_path", "lane")

    def __init__(self, lane: Lane, path: str, busy_timeout: float) -> None:
        self.lane = lane
        self._path = path
        self._busy_timeout = busy_timeout
        self._connection: sqlite3.Connection | None = None  # the lane's thread's alone

    def run(self, work: _Work[_T]) -> _T:
        """On the lane's thread: ``work`` on its connection, opened at first use."""
        where = f"SQLite store {self._path}"
        try:
            connection = self._connection
            if connection is None:
                connection = sqlite3.connect(
                    self._path, timeout=self._busy_timeout, isolation_level=None
                )
                self._connection = connection
            return retrying(
                connection, work, write=False, busy_timeout=self._busy_timeout, where=where
            )
        except sqlite3.Error as error:
            raise DurabilityError(f"{where}: {error}") from error

    async def stop(self) -> None:
        await self.lane.stop(self._close)

    def _close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None
