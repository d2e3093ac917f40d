"""``SqliteStore``: the embedded default store, one SQLite file in WAL mode.

Durability: ``journal_mode=WAL`` with ``synchronous=FULL``, so a commit has
returned only once it is fsync'd into the write-ahead log, and every store
operation is one transaction (a checkpoint, its run row and retention move
together or not at all).

Speed: a commit is one fsync'd transaction of a few statements, prepared once
and cached by the driver, on a thread that never waits for anything but the
disk; commits queued together share one transaction (group commit). Reads go
to threads with connections of their own, so they never wait behind a
commit's fsync: one for reads of a few rows, one for scans (searches, counts,
listings of the whole store), so a read of a run never waits behind a scan
(see ``_sqlite_readers``). The event loop only hands the work over and awaits
the result (see ``_sqlite_lanes``).

Several processes may share one file: writers take SQLite's write lock up
front (``BEGIN IMMEDIATE``), wait up to ``busy_timeout`` for it, and retry the
rare ``database is locked`` that SQLite reports without waiting, so lock
contention surfaces only if some writer holds the lock for longer than that.
"""

from __future__ import annotations

import functools
import os
import sqlite3
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from treadle._exceptions import DurabilityError
from treadle._stores import _control_plans, _sql_ownership, _sql_rules, _write_plans
from treadle._stores import _sqlite_writes as writes
from treadle._stores._search import SqlSearch
from treadle._stores._sql_dialect import SQLITE
from treadle._stores._sql_graphs import KeptGraphs
from treadle._stores._sql_limits import SqliteLimits
from treadle._stores._sql_outboxes import SqliteOutbox
from treadle._stores._sql_reads import SqlReads
from treadle._stores._sql_schedules import SqliteSchedules
from treadle._stores._sql_tokens import SqliteTokens
from treadle._stores._sqlite_lanes import Groupable, Lane, Unavailable
from treadle._stores._sqlite_live import SqliteLiveFeed
from treadle._stores._sqlite_ownership import SqliteOwnership
from treadle._stores._sqlite_readers import Readers
from treadle._stores._sqlite_starts import SqliteAdmissions
from treadle._stores._sqlite_transactions import (
    WroteThenRefused,
    configure,
    each_saved,
    each_together,
    group_now,
    is_busy,
    migrate,
    retrying,
    select,
    transaction,
)
from treadle._stores._sqlite_writes import drive
from treadle._stores._store import DEFAULT_LEASE
from treadle._stores._write_plans import Owned
from treadle._stores._write_steps import SQLITE_WRITES

if TYPE_CHECKING:
    import asyncio

    from treadle._stores._events import EventEntry
    from treadle._stores._live import LiveFeed
    from treadle._stores._store import CheckpointRecord, Lease, RunRecord
    from treadle._values._actors import Actor

_T = TypeVar("_T")
_Row = tuple[Any, ...]  # what the driver returns; the schema fixes each column's type
_Work = Callable[[sqlite3.Connection], _T]  # an operation, given the store's connection

# Each template is rendered once; the driver then caches the prepared statement.
_render = functools.cache(SQLITE.render)


class SqliteStore(
    SqlReads,
    SqliteOwnership,
    SqliteAdmissions,
    SqliteTokens,
    SqliteOutbox,
    SqlSearch,
    SqliteLimits,
    SqliteSchedules,
):
    """Runs and checkpoints in one SQLite file, safe across processes.

    All SQLite work happens on one thread owned by the store, with its own
    connection, opened on first use: the file is created if missing and its
    schema migrated forward to this version of treadle. Coroutines from any
    event loop or thread may use the store; their operations run one at a
    time, in the order they were called.

    Writes run one at a time, in the order they were called, on the store's
    writer thread; reads run on its reader threads (scans on one of their
    own) and see every write that had returned when they were called (not
    one still in flight).

    A coroutine cancelled while its operation runs does not stop it: the
    operation completes (or not) as one transaction. One cancelled while its
    operation still waits for its turn takes it out of the queue.
    """

    search_dialect = SQLITE
    # The run that asked for the last commit: one run committing superstep after
    # superstep may write inline; runs taking turns go to the thread, and group.
    _last_committer: str | None

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        keep_last: int | None = None,
        busy_timeout: float = 30.0,
        lease: float = DEFAULT_LEASE,
    ) -> None:
        """Describe the store; nothing is opened until the first operation.

        Args:
            path: The database file, created on first use if missing.
            keep_last: Retention for every run: after each commit keep only
                this many checkpoints of the run (its latest always among them).
                ``None`` keeps everything; a ``keep_last`` given to ``commit``
                overrides it.
            busy_timeout: Seconds an operation waits for another connection's
                write lock before failing with ``DurabilityError``.
            lease: Seconds a process's lease on a run lasts without a
                heartbeat: how long a run whose owner died waits before a
                timer service or ``resume`` takes it over.

        Raises:
            ValueError: ``keep_last`` is below 1, ``busy_timeout`` negative
                or ``lease`` not positive.
        """
        _sql_rules.check_keep_last(keep_last)
        _sql_ownership.check_lease(lease)
        self.lease = lease
        if busy_timeout < 0:
            raise ValueError(f"busy_timeout must be 0 or more seconds, got {busy_timeout}")
        self._path = os.fspath(path)
        self._keep_last = keep_last
        # A forked child's copies of its parent's connections and lanes (see _start).
        self._inherited: list[object] = []
        self._graphs = KeptGraphs()
        self._busy_timeout = busy_timeout
        self._closed = False
        self._start()
        self.live: LiveFeed = SqliteLiveFeed(self._path)
        """Its runs' live events, across processes (see :mod:`treadle._stores._sqlite_live`)."""

    @property
    def path(self) -> str:
        """The database file."""
        return self._path

    def __repr__(self) -> str:
        """Name the file, which is what tells two stores apart."""
        return f"SqliteStore({self._path!r})"

    async def create_run(
        self, run: RunRecord, graph: bytes, first: CheckpointRecord, *, lease: Lease | None = None
    ) -> None:
        """Insert a new run with its graph description and first checkpoint.

        The stored row names ``first`` as the run's latest checkpoint; with
        ``lease`` it is owned by it (epoch 1).

        Raises:
            RunExistsError: A run with this id exists already.
            ValueError: ``first`` belongs to another run, or its id is taken.
        """
        described = self._graphs.described(graph)

        def work(connection: sqlite3.Connection) -> None:
            drive(_write_plans.create_run(run, described, first, lease, SQLITE_WRITES), connection)

        # Groupable like a commit: runs started together share a transaction and an fsync.
        # Its first commit is then alone (may run inline) unless another run wrote since.
        self._last_committer = run.run_id
        await self._call(work, write=True, group=True)
        self._graphs.committed(described)

    async def commit(self, checkpoint: CheckpointRecord, *, keep_last: int | None = None) -> None:
        """Atomically add a checkpoint, make it the run's latest, and apply retention.

        The run row takes the checkpoint's status, superstep and ``wake_at``,
        its ``created_at`` as ``updated_at``, and loses any ``error``. One
        transaction, one fsync.

        Raises:
            RunNotFoundError: No such run.
            ValueError: The checkpoint's id is taken, or ``keep_last`` is below 1.
        """
        await self.commit_many((checkpoint,), keep_last=keep_last)

    def commit_many(
        self,
        checkpoints: Sequence[CheckpointRecord],
        *,
        keep_last: int | None = None,
        lease: Lease | None = None,
        consumed: int | None = None,
        release: bool = False,
        immediate: bool = False,
    ) -> asyncio.Future[bool]:
        """:meth:`commit` for several checkpoints of one run, in order, as one transaction.

        The run row follows the last of them. The work is queued for the
        store's thread when called, and the future returned settles once it
        is durable, so a caller that awaits it later (background and batched
        durability) has the disk busy meanwhile. With ``lease`` it commits
        only while the lease is current; ``consumed`` and ``release`` mark
        inbox items applied and give the lease up in the same transaction,
        and a pause asked of the run is honoured there too (the future then
        gives ``True``: see the port).
        ``immediate``: the caller awaits it at once, so when the writer is
        idle and quick, and no other run committed since this run's last
        commit (runs taking turns group their commits on the thread), it
        runs on this thread (see ``_sqlite_lanes``).

        Raises:
            RunNotFoundError: No such run (from the future).
            LeaseLostError: ``lease`` is no longer current (from the future).
            ValueError: An id is taken (from the future); the checkpoints are
                none, of several runs, or repeat an id; ``keep_last`` is below 1.
        """
        _sql_rules.last_of_one_run(checkpoints)
        _sql_rules.check_keep_last(keep_last)
        retention = keep_last if keep_last is not None else self._keep_last
        owned = (
            Owned(lease, consumed, release) if lease is not None or consumed is not None else None
        )
        work = functools.partial(writes.commit, tuple(checkpoints), retention, owned)
        run_id = checkpoints[-1].info.run_id
        alone = run_id == self._last_committer  # no other run committed in between
        self._last_committer = run_id
        return self._queue(work, write=True, group=True, inline=immediate and alone)

    async def set_status(
        self,
        run_id: str,
        status: str,
        error: str | None = None,
        *,
        lease: Lease | None = None,
        release: bool = False,
        events: Sequence[EventEntry] = (),
    ) -> None:
        """Change a run's status and error, stamping ``updated_at`` with the wall clock.

        ``events`` go to the run's log in the same transaction.

        Raises:
            RunNotFoundError: No such run.
            LeaseLostError: ``lease`` is no longer current.
        """

        def work(connection: sqlite3.Connection) -> None:
            plan = _write_plans.set_status(
                run_id, status, error, lease, release, events, SQLITE_WRITES
            )
            drive(plan, connection)

        await self._call(work, write=True, group=True)

    async def migrate_run(
        self,
        lease: Lease,
        version: int,
        graph: bytes,
        checkpoint: CheckpointRecord,
        *,
        actor: Actor | None = None,
    ) -> bool:
        """Move a run to another version under ``lease``, in one transaction (see the port).

        Raises:
            RunNotFoundError: No such run.
            LeaseLostError: ``lease`` is no longer current.
        """
        described = self._graphs.described(graph)

        def work(connection: sqlite3.Connection) -> None:
            plan = _write_plans.migrate_run(
                lease, version, described, checkpoint, self._keep_last, actor, SQLITE_WRITES
            )
            drive(plan, connection)

        try:
            await self._call(work, write=True)
        except _sql_rules.Unapplied:
            return False
        self._graphs.committed(described)
        return True

    async def delete_run(self, run_id: str, *, actor: Actor | None = None) -> None:
        """Delete a run: its row, checkpoints, inbox, event log, and pieces only it used.

        Raises:
            RunNotFoundError: No such run.
            RunBusyError: A process holds a current lease on it.
            RunHasForksError: Runs were forked from it (delete them first).
        """
        plan = functools.partial(_control_plans.delete_run, run_id, actor, SQLITE_WRITES)
        await self._call(lambda c: drive(plan(), c), write=True)

    async def prune(self, run_id: str, keep_last: int, *, actor: Actor | None = None) -> int:
        """Delete all but the ``keep_last`` most recently committed checkpoints.

        The run's latest checkpoint is always kept.

        Returns:
            How many checkpoints were deleted.

        Raises:
            RunNotFoundError: No such run.
            ValueError: ``keep_last`` is below 1.
        """
        _sql_rules.check_keep_last(keep_last)
        plan = functools.partial(_control_plans.prune, run_id, keep_last, actor, SQLITE_WRITES)
        return await self._call(lambda c: drive(plan(), c), write=True)

    async def close(self) -> None:
        """Close the connection and stop the store's thread; closing again does nothing.

        Operations already called finish first.
        """
        if self._pid != os.getpid():
            self._forked()
        with self._lock:
            if self._closed:
                return
            self._closed = True
        await self.live.close()
        await self._readers.stop()
        await self._writer.stop(self._close_writer)

    # --- the store's threads --------------------------------------------------------

    async def _select(
        self, template: str, parameters: tuple[Any, ...], *, scan: bool = False
    ) -> list[Sequence[Any]]:
        return list(await self._read(_render(template), parameters, scan=scan))

    async def _read(
        self, query: str, parameters: tuple[Any, ...], *, scan: bool = False
    ) -> list[_Row]:
        # One SELECT is one consistent read, so reads need no explicit transaction.
        work = functools.partial(select, query, parameters)
        if self._pid != os.getpid():
            self._forked()
        if not self._migrated.is_set():  # the first use opens the file, on the writer
            return await self._call(work, write=False)
        with self._lock:
            self._check_open()
            done: asyncio.Future[list[_Row]] = self._readers.submit(work, scan=scan)
        return await done

    async def _call(self, work: _Work[_T], *, write: bool, group: bool = False) -> _T:
        return await self._queue(work, write=write, group=group)

    def _queue(
        self, work: _Work[_T], *, write: bool, group: bool = False, inline: bool = False
    ) -> asyncio.Future[_T]:
        """Hand ``work`` to the writer thread now (or run it ``inline``, if the writer lets it)."""
        if self._pid != os.getpid():
            self._forked()
        with self._lock:
            self._check_open()
            if group:
                now = self._run_now if self._migrated.is_set() else None
                groupable = Groupable(work, self._run_write, self._run_group, now)
                if inline and self._migrated.is_set():
                    return self._writer.submit(
                        groupable, inline=functools.partial(self._run_inline, work)
                    )
                return self._writer.submit(groupable)
            return self._writer.submit(functools.partial(self._run, work, write))

    def _start(self) -> None:
        """This process's lanes, lock and connections, made again in a forked child.

        The parent's threads did not come along, its lock may be held, and a
        connection may not be used in a child, nor closed (that would remove
        the write-ahead log the parent writes): those copies are kept, unused.
        """
        self._pid = os.getpid()
        self._last_committer = None  # one run committing alone may write inline
        self._writer = Lane(self, "treadle-sqlite")  # threads start with their first call
        self._readers = Readers(self, self._path, self._busy_timeout)
        self._lock = threading.Lock()  # guards _closed and the lanes' queues
        self._connection: sqlite3.Connection | None = None  # the writer thread's
        self._migrated = threading.Event()  # set once the writer has opened the file

    def _forked(self) -> None:
        inherited = (self._writer, self._readers, self._connection)
        self._inherited.append(inherited)
        self._start()

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"{self!r} is closed")

    def _run(self, work: _Work[_T], write: bool) -> _T:
        try:
            connection = self._open() if self._connection is None else self._connection
            return self._retrying(connection, work, write=write)
        except sqlite3.Error as error:
            raise DurabilityError(f"SQLite store {self._path}: {error}") from error

    def _run_write(self, work: _Work[_T]) -> _T:
        return self._run(work, write=True)

    def _run_inline(self, work: _Work[_T]) -> _T:
        """``work`` in a transaction on the caller's thread, if no other process holds the lock.

        Raises:
            Unavailable: the database is locked (the writer thread waits for it instead).
        """
        connection = self._connection
        assert connection is not None  # noqa: S101 - inline only once the writer opened the file
        try:
            return transaction(connection, work, write=True)
        except sqlite3.OperationalError as error:
            if is_busy(error):
                raise Unavailable from error
            raise DurabilityError(f"SQLite store {self._path}: {error}") from error
        except sqlite3.Error as error:
            raise DurabilityError(f"SQLite store {self._path}: {error}") from error

    def _run_now(self, works: list[_Work[Any]]) -> list[tuple[Any, BaseException | None]]:
        assert self._connection is not None  # noqa: S101 - only once the writer opened the file
        return group_now(self._connection, works, f"SQLite store {self._path}")

    def _run_group(self, works: list[_Work[Any]]) -> list[tuple[Any, BaseException | None]]:
        """Several writes in one transaction: one fsync for all.

        A write that refuses (unknown run, lost lease, a taken id) fails
        alone (see :mod:`treadle._stores._sqlite_transactions`); a database
        error fails the whole group, which then committed nothing.
        """
        try:
            connection = self._open() if self._connection is None else self._connection
            try:
                return self._retrying(
                    connection, functools.partial(each_together, works), write=True
                )
            except WroteThenRefused:  # rolled back: again, one savepoint each
                return self._retrying(connection, functools.partial(each_saved, works), write=True)
        except sqlite3.Error as error:
            failure = DurabilityError(f"SQLite store {self._path}: {error}")
            failure.__cause__ = error
            return [(None, failure)] * len(works)
        except BaseException as error:  # noqa: BLE001 - handed to every awaiting coroutine
            return [(None, error)] * len(works)

    def _open(self) -> sqlite3.Connection:
        # isolation_level=None: the driver starts no transactions; we do, explicitly.
        # The writer lane's lock, not the thread, makes its use exclusive: a commit
        # may run inline on a caller's thread (see _sqlite_lanes). timeout=0: SQLite
        # never sleeps on a lock held elsewhere, which would block a caller's event
        # loop; the writer thread waits instead, in _retrying, up to busy_timeout.
        connection = sqlite3.connect(
            self._path, timeout=0, isolation_level=None, check_same_thread=False
        )
        try:
            self._retrying(connection, lambda c: configure(c, self._path), write=False)
            self._retrying(connection, lambda c: migrate(c, repr(self)), write=True)
        except BaseException:
            connection.close()
            raise
        self._connection = connection
        self._migrated.set()
        return connection

    def _retrying(self, connection: sqlite3.Connection, work: _Work[_T], *, write: bool) -> _T:
        return retrying(connection, work, write, self._busy_timeout, f"SQLite store {self._path}")

    def _close_writer(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None
