"""One psycopg connection pool per event loop, for ``PostgresStore``.

psycopg's async connections and its pool belong to the event loop that
opened them, while a store may outlive a loop (``run_sync`` runs every call in
a fresh one) or serve loops in several threads at once. So :class:`LoopPools`
keeps one pool per event loop using it, opened by that loop's first operation
and closed by :meth:`LoopPools.close` or, when the loop ends first, as the
loop shuts down: ``asyncio.run`` and ``asyncio.Runner`` cancel what is left
on it, and that is the pool's cue to close. (A loop closed without that
shutdown leaves its connections to the garbage collector.)
"""

from __future__ import annotations

import asyncio
import functools
import select
import threading
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg_pool import AsyncConnectionPool

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

Connection = psycopg.AsyncConnection[Any]
Pool = AsyncConnectionPool[Connection]


@dataclass(eq=False)
class _LoopPool:
    """The pool serving one event loop, and what it takes to close it with the loop."""

    opening: asyncio.Lock = field(default_factory=asyncio.Lock)
    pool: Pool | None = None
    keeper: asyncio.Task[None] | None = None  # closes the pool when cancelled
    # Every connection the pool made, so none is left open if the pool cannot close.
    connections: weakref.WeakSet[Connection] = field(default_factory=weakref.WeakSet)


class LoopPools:
    """A pool for each event loop that asks, until :meth:`close`.

    Connections are in autocommit mode: a statement is a transaction of its
    own unless the caller opens one with ``connection.transaction()``.
    """

    def __init__(
        self,
        dsn: str,
        *,
        min_size: int,
        max_size: int,
        configure: Callable[[Connection], Awaitable[None]],
        before_open: Callable[[], Awaitable[None]],
        owner: str,
    ) -> None:
        """Describe the pools; none is opened before :meth:`get`.

        Args:
            dsn: The libpq connection string.
            min_size: Connections each pool keeps open.
            max_size: Connections each pool may open at most.
            configure: Prepares every new connection (``SET search_path``).
            before_open: Awaited before each pool opens; failing, it fails
                that :meth:`get`, and the next one tries again.
            owner: Names the owner in the error raised once closed.
        """
        self._dsn = dsn
        self._sizes = (min_size, max_size)
        self._configure = configure
        self._before_open = before_open
        self._owner = owner
        self._lock = threading.Lock()  # guards _pools and _closed
        self._pools: dict[asyncio.AbstractEventLoop, _LoopPool] = {}
        self._closed = False

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    async def get(self) -> Pool:
        """The running loop's pool, opened now if it has none.

        Raises:
            RuntimeError: The pools are closed.
            psycopg.Error: ``before_open`` or the pool failed to open.
        """
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._closed:
                raise RuntimeError(f"{self._owner} is closed")
            loop_pool = self._pools.get(loop)
            if loop_pool is None:
                for gone in [other for other in self._pools if other.is_closed()]:
                    del self._pools[gone]  # its keeper closed its pool, if it had one
                loop_pool = self._pools[loop] = _LoopPool()
        if (pool := loop_pool.pool) is not None:
            return pool
        async with loop_pool.opening:  # the loop's other first operations wait for this one
            if (pool := loop_pool.pool) is not None:
                return pool
            return await self._open(loop, loop_pool)

    async def close(self) -> None:
        """Close every pool; closing again does nothing.

        Operations holding a connection finish first; those waiting for one
        fail with ``PoolClosed``. The pool of another event loop that is still
        running closes on that loop, soon after.
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
            pools = list(self._pools.items())
            self._pools.clear()
        current = asyncio.get_running_loop()
        for loop, loop_pool in pools:
            keeper = loop_pool.keeper
            if keeper is None:
                continue  # never opened; one still opening sees the pools closed
            if loop is current:
                keeper.cancel()
                await asyncio.wait([keeper])  # the keeper closes the pool even if we are cancelled
            elif not loop.is_closed():
                loop.call_soon_threadsafe(keeper.cancel)

    async def _open(self, loop: asyncio.AbstractEventLoop, loop_pool: _LoopPool) -> Pool:
        await self._before_open()
        min_size, max_size = self._sizes
        pool: Pool = AsyncConnectionPool(
            self._dsn,
            kwargs={"autocommit": True},
            min_size=min_size,
            max_size=max_size,
            open=False,
            # A connection that died while idle (the server restarted, a proxy
            # cut it) is replaced at checkout rather than handed to an operation.
            check=check_idle,
            configure=functools.partial(_configure, self._configure, loop_pool.connections),
            name="treadle",
        )
        # Waiting for min_size connections leaves none half-open should the loop
        # end soon: one cut short by its loop lingers until garbage collection.
        try:
            await pool.open(wait=True)
        except BaseException:
            await pool.close()
            raise
        with self._lock:
            closed = self._closed
            if not closed:
                loop_pool.pool = pool
                loop_pool.keeper = loop.create_task(_keep(loop_pool), name="treadle-pool-keeper")
        if closed:  # close() ran while this loop's pool was opening
            await pool.close()
            raise RuntimeError(f"{self._owner} is closed")
        return pool


class StallLimit:
    """How long a transaction of these connections may stall before the server ends it.

    A process stopped in the middle of a transaction (SIGSTOP, a long pause
    of its event loop, a frozen VM) keeps the rows it locked locked until it
    goes on, and claims skip locked rows: however long ago its lease ran
    out, a run whose row it locked could not be taken over. So the server
    ends a transaction left idle this long (``idle_in_transaction_session_timeout``,
    which closes its connection), and a statement waiting this long for a
    lock (``lock_timeout``): the process's other transactions may be queued
    behind the stopped one (inserting a piece it inserted, say) while
    holding their own runs' rows, and would otherwise become idle, and start
    their own wait, only once it ended. A process that goes on afterwards
    finds its transaction or connection ended and its lease gone, and
    commits nothing. A live process never stalls a transaction for
    anything like a lease: it would lose its leases first, its heartbeats
    stalled too.

    Args:
        seconds: The limit; lowered, never raised, by :meth:`lower`.
    """

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._set: weakref.WeakKeyDictionary[Connection, float] = weakref.WeakKeyDictionary()

    def lower(self, seconds: float) -> None:
        """Lower the limit to ``seconds`` (a worker's lease shorter than the store's)."""
        self.seconds = min(self.seconds, seconds)

    async def apply(self, connection: Connection) -> None:
        """Set the limit on ``connection`` unless it has it already (a dictionary look-up)."""
        if self._set.get(connection) == self.seconds:
            return
        milliseconds = f"{max(round(self.seconds * 1000), 1)}ms"
        await connection.execute(
            "SELECT set_config('idle_in_transaction_session_timeout', %s, false),"
            " set_config('lock_timeout', %s, false)",
            (milliseconds, milliseconds),
        )
        self._set[connection] = self.seconds


async def check_idle(connection: Connection) -> None:
    """Check a connection leaving the pool; quiet unless the server said something meanwhile.

    An idle connection's server sends nothing unasked, except as it ends
    the session (it restarted, the backend was terminated, a proxy cut it):
    then its last words, or the end of the stream, wait on the socket. So
    the socket is polled without waiting, and only when something is there
    is the connection asked a round trip (psycopg's own check), which fails
    for a dead one. Asking every checkout cost a round trip before each of
    the store's operations, a third of a worker's round trips per superstep.

    Raises:
        psycopg.OperationalError: The connection is closed.
    """
    if connection.closed:
        raise psycopg.OperationalError("the connection is closed")
    if _quiet(connection.fileno()):
        return
    await AsyncConnectionPool.check_connection(connection)


def _quiet(fd: int) -> bool:
    """Whether nothing waits to be read on ``fd`` (``False`` where that cannot be told)."""
    poll = getattr(select, "poll", None)
    if poll is None:  # Windows: ask the server, as psycopg's check does
        return False
    poller = poll()
    poller.register(fd, select.POLLIN | select.POLLPRI)
    return not poller.poll(0)


async def _configure(
    configure: Callable[[Connection], Awaitable[None]],
    connections: weakref.WeakSet[Connection],
    connection: Connection,
) -> None:
    connections.add(connection)
    await configure(connection)


async def _keep(loop_pool: _LoopPool) -> None:
    # Owns an open pool until cancelled: by close(), or by its loop shutting down
    # (or by whoever cancels every task; then the loop's next operation reopens).
    try:
        await asyncio.get_running_loop().create_future()
    finally:
        await _close_pool(loop_pool)
        loop_pool.pool = loop_pool.keeper = None


async def _close_pool(loop_pool: _LoopPool) -> None:
    assert loop_pool.pool is not None  # noqa: S101 - a keeper starts with an open pool
    try:
        await loop_pool.pool.close()
    except asyncio.CancelledError:
        # The loop is shutting down and has cancelled the pool's own tasks too, so
        # close() gave up waiting for them before closing the idle connections.
        for connection in list(loop_pool.connections):
            if not connection.closed:
                await connection.close()
