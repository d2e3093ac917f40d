"""``PostgresStore``: runs and checkpoints in PostgreSQL, for many workers.

Durability is PostgreSQL's: a commit has returned once the server has
committed its transaction. Every write is one transaction (a checkpoint, its
run row and retention move together or not at all); a read is one statement,
so one consistent snapshot. The SQL is the shared templates
(:mod:`treadle._stores._sql_schema`, :mod:`treadle._stores._sql_statements`)
in the :data:`~treadle._stores._sql_dialect.POSTGRES` dialect, so the store
behaves as ``SqliteStore`` does, row for row.

Ownership (leases, the inbox, claims) follows the port, with what only
PostgreSQL adds: see :mod:`treadle._stores._postgres_ownership`.

Event loops: a store may outlive an event loop (``run_sync`` runs every call
in a fresh one) or serve loops in several threads at once, while psycopg's
async pool belongs to one loop; so the store keeps a pool per loop, closed with
the store or with its loop (see :mod:`treadle._stores._postgres_pools`).
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg
from psycopg import sql
from psycopg_pool import PoolClosed

from treadle._exceptions import DurabilityError
from treadle._stores import (
    _control_plans,
    _sql_ownership,
    _sql_rules,
    _sql_schema,
    _write_plans,
)
from treadle._stores._postgres_dsn import HIDDEN, redact
from treadle._stores._postgres_group import GroupCommit
from treadle._stores._postgres_live import PostgresLiveFeed
from treadle._stores._postgres_ownership import PostgresOwnership
from treadle._stores._postgres_pools import Connection, LoopPools, StallLimit
from treadle._stores._postgres_starts import PostgresAdmissions
from treadle._stores._postgres_writes import drive
from treadle._stores._search import SqlSearch
from treadle._stores._sql_dialect import POSTGRES
from treadle._stores._sql_graphs import KeptGraphs
from treadle._stores._sql_limits import PostgresLimits
from treadle._stores._sql_outboxes import PostgresOutbox, remake_old_feed
from treadle._stores._sql_reads import SqlReads
from treadle._stores._sql_schedules import PostgresSchedules
from treadle._stores._sql_tokens import PostgresTokens
from treadle._stores._store import DEFAULT_LEASE
from treadle._stores._write_plans import Owned
from treadle._stores._write_steps import POSTGRES_WRITES

if TYPE_CHECKING:
    from psycopg.rows import TupleRow

    from treadle._stores._events import EventEntry
    from treadle._stores._live import LiveFeed
    from treadle._stores._postgres_group import Sender
    from treadle._stores._store import CheckpointRecord, Lease, RunRecord
    from treadle._stores._write_steps import Plan
    from treadle._values._actors import Actor

_T = TypeVar("_T")
_Work = Callable[[Connection], Awaitable[_T]]  # an operation, given a pooled connection

_render = functools.cache(POSTGRES.render)

# Held while a store migrates, so that stores opening one new database at once
# take turns: concurrent CREATE ... IF NOT EXISTS can otherwise collide.
_MIGRATION_LOCK = int.from_bytes(b"treadle", "big")


class PostgresStore(
    SqlReads,
    PostgresOwnership,
    PostgresAdmissions,
    PostgresTokens,
    PostgresOutbox,
    SqlSearch,
    PostgresLimits,
    PostgresSchedules,
):
    """Runs and checkpoints in a PostgreSQL database, shared by many processes.

    Nothing is opened until the first operation, which creates the schema
    (when ``schema`` is given) and the tables if missing and migrates them
    forward to this version of treadle. Coroutines from any event loop or
    thread may use the store: each loop gets its own pool of connections
    (see :mod:`treadle._stores._postgres_pools`), so ``max_size`` bounds one
    loop's share.

    A coroutine cancelled while its operation runs cancels the statement on
    the server and rolls its transaction back: an operation happens whole or
    not at all. (Commits of several runs made at once go to the server
    together, in one transaction, each still fenced by its own lease: a
    commit cancelled once its group is under way completes with the group;
    see :mod:`treadle._stores._postgres_group`.)
    """

    search_dialect = POSTGRES

    def __init__(
        self,
        dsn: str,
        *,
        keep_last: int | None = None,
        schema: str | None = None,
        min_size: int = 1,
        max_size: int = 10,
        lease: float = DEFAULT_LEASE,
    ) -> None:
        """Describe the store; nothing is opened until the first operation.

        Args:
            dsn: A libpq connection string: a URI such as
                ``postgresql://user:password@host/db`` or ``key=value`` pairs.
                Its password appears in no message, repr or error.
            keep_last: Retention for every run: after each commit keep only
                this many checkpoints of the run (its latest always among them).
                ``None`` keeps everything; a ``keep_last`` given to ``commit``
                overrides it.
            schema: The PostgreSQL schema holding treadle's tables, created if
                missing and set as each connection's ``search_path``; ``None``
                keeps the server's ``search_path``.
            min_size: Connections each event loop's pool keeps open.
            max_size: Connections each event loop's pool may open at most.

            lease: Seconds an in-process owner's lease on a run lasts
                without a heartbeat (workers set their own with ``Worker(lease=)``).

        Raises:
            ValueError: ``dsn`` is not a connection string, ``schema`` is
                empty, ``keep_last`` is below 1, the sizes do not fit, or
                ``lease`` is not positive.
        """
        _sql_rules.check_keep_last(keep_last)
        _sql_ownership.check_lease(lease)
        self.lease = lease
        if schema is not None and not schema:
            raise ValueError("schema must be a non-empty name, or None for the search_path")
        if not 0 <= min_size <= max_size or max_size < 1:
            raise ValueError(
                f"need 0 <= min_size <= max_size and max_size >= 1, got {min_size}, {max_size}"
            )
        self._dsn = dsn
        self._shown_dsn, self._secrets = redact(dsn)
        self._where = f"PostgreSQL store {self._shown_dsn}" + (
            "" if schema is None else f" (schema {schema!r})"
        )
        self._keep_last = keep_last
        self._schema = schema
        self._migrated = False  # at worst two loops at once both find nothing to migrate
        self._stall_limit = StallLimit(lease)  # frees the rows of a process stopped mid-transaction
        self.live: LiveFeed = PostgresLiveFeed(dsn, schema)
        """Its runs' live events, across processes (see :mod:`treadle._stores._postgres_live`)."""
        self.kept_graphs = KeptGraphs()
        """The graph descriptions its writes (and its workers') need not send again."""
        # Not write=True: a group opens its transaction itself, inside a pipeline.
        self._commits = GroupCommit(functools.partial(self._run, write=False))
        self._pools = LoopPools(
            dsn,
            min_size=min_size,
            max_size=max_size,
            configure=self._configure,
            before_open=self._migrate_once,
            owner=repr(self),
        )

    @property
    def schema(self) -> str | None:
        """The PostgreSQL schema holding the tables; ``None``: the ``search_path``'s."""
        return self._schema

    def __repr__(self) -> str:
        """Name the database (password hidden) and the schema."""
        schema = "" if self._schema is None else f", schema={self._schema!r}"
        return f"PostgresStore({self._shown_dsn!r}{schema})"

    async def create_run(
        self, run: RunRecord, graph: bytes, first: CheckpointRecord, *, lease: Lease | None = None
    ) -> None:
        """Insert a new run with its graph description and first checkpoint.

        The stored row names ``first`` as the run's latest checkpoint; with
        ``lease`` it is owned by it (epoch 1), so no timer service or worker
        takes a run up between its creation and its owner's first commit.

        Raises:
            RunExistsError: A run with this id exists already.
            ValueError: ``first`` belongs to another run, or its id is taken.
        """
        described = self.kept_graphs.described(graph)
        plan = functools.partial(
            _write_plans.create_run, run, described, first, lease, POSTGRES_WRITES
        )
        await self.alone(plan)
        self.kept_graphs.committed(described)

    async def commit(self, checkpoint: CheckpointRecord, *, keep_last: int | None = None) -> None:
        """Atomically add a checkpoint, make it the run's latest, and apply retention.

        The run row takes the checkpoint's status, superstep and ``wake_at``,
        its ``created_at`` as ``updated_at``, and loses any ``error``. One
        transaction; it locks the run row first, so one run's commits queue.

        Raises:
            RunNotFoundError: No such run.
            ValueError: The checkpoint's id is taken, or ``keep_last`` is below 1.
        """
        await self.commit_many((checkpoint,), keep_last=keep_last)

    async def commit_many(
        self,
        checkpoints: Sequence[CheckpointRecord],
        *,
        keep_last: int | None = None,
        lease: Lease | None = None,
        consumed: int | None = None,
        release: bool = False,
        immediate: bool = False,  # noqa: ARG002 - a server: always a round trip
    ) -> bool:
        """:meth:`commit` for several checkpoints of one run, in order, as one transaction.

        With ``lease`` it commits only while the lease is current; ``consumed``
        marks the run's inbox items up to that ``seq`` applied and ``release``
        gives the lease up, in the same transaction, so an item is applied
        exactly once and a run at rest is free the moment its last barrier is.
        A pause asked of the run meanwhile is honoured there too: ``True``
        when this commit paused it (see the store port).

        Raises:
            RunNotFoundError: No such run.
            LeaseLostError: ``lease`` is no longer current; nothing was written.
            ValueError: An id is taken; the checkpoints are none, of several
                runs, or repeat an id; ``keep_last`` is below 1.
        """
        _sql_rules.last_of_one_run(checkpoints)
        _sql_rules.check_keep_last(keep_last)
        retention = keep_last if keep_last is not None else self._keep_last
        owned = Owned(lease, consumed, release)
        # Commits of several runs made at once share transactions (see _postgres_group).
        return await self._commits.commit(
            functools.partial(
                _write_plans.commit, tuple(checkpoints), retention, owned, POSTGRES_WRITES
            )
        )

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

        With ``lease``, only while it is current; ``release`` gives it up and
        ``events`` go to the run's log, in the same transaction.

        Raises:
            RunNotFoundError: No such run.
            LeaseLostError: ``lease`` is no longer current.
        """
        plan = _write_plans.set_status(
            run_id, status, error, lease, release, events, POSTGRES_WRITES
        )
        # One statement alone is a transaction of its own.
        await self._run(
            functools.partial(drive, plan), write=(lease is not None and release) or bool(events)
        )

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
        described = self.kept_graphs.described(graph)
        plan = _write_plans.migrate_run(
            lease, version, described, checkpoint, self._keep_last, actor, POSTGRES_WRITES
        )
        try:
            await self._run(functools.partial(drive, plan), write=True)
        except _sql_rules.Unapplied:
            return False
        self.kept_graphs.committed(described)
        return True

    async def delete_run(self, run_id: str, *, actor: Actor | None = None) -> None:
        """Delete a run: its row, checkpoints, inbox, event log, and pieces only it used.

        Raises:
            RunNotFoundError: No such run.
            RunBusyError: A process holds a current lease on it.
            RunHasForksError: Runs were forked from it (delete them first).
        """
        plan = _control_plans.delete_run(run_id, actor, POSTGRES_WRITES)
        await self._run(functools.partial(drive, plan), write=True)

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
        plan = _control_plans.prune(run_id, keep_last, actor, POSTGRES_WRITES)
        return await self._run(functools.partial(drive, plan), write=True)

    async def close(self) -> None:
        """Close every pool; closing again does nothing.

        Operations holding a connection finish first; those waiting for one
        fail as the store is closed. The pool of another event loop that is
        still running closes on that loop, soon after.
        """
        await self._commits.settled()
        await self.live.close()
        await self._pools.close()

    async def notifications(self, channel: str) -> AsyncIterator[str]:
        """Payloads ``NOTIFY``-ed on ``channel`` by writers using this store's schema.

        Runs on a connection of its own, outside the pools, for as long as the
        caller iterates. Writers send ``pg_notify(channel, current_schema())``,
        so stores on other schemas of the database do not wake each other.

        Raises:
            DurabilityError: The connection failed or was lost (the server
                restarted), or no schema of the ``search_path`` exists;
                iterate again to listen again.
        """
        try:
            # The schema first: asked before it exists, current_schema() is NULL,
            # which no writer's notification would ever match.
            await self._pools.get()
            async with await psycopg.AsyncConnection.connect(self._dsn, autocommit=True) as db:
                await self._configure(db)
                found = await (await db.execute("SELECT current_schema()")).fetchone()
                mine = found[0] if found else None
                if mine is None:
                    msg = f"{self._where}: no schema of the search_path exists to listen for"
                    raise DurabilityError(msg)
                await db.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
                async for notify in db.notifies():
                    if notify.payload == mine:
                        yield notify.payload
        except psycopg.Error as error:
            failure = DurabilityError(f"{self._where}: {self._hide(error)}")
            if any(secret in str(error) for secret in self._secrets):
                raise failure from None
            raise failure from error

    # --- connections ------------------------------------------------------------

    def limit_stalls(self, seconds: float) -> None:
        """End a transaction of this store's stalled ``seconds`` (only ever lowered).

        Stalled: idle in the transaction, or waiting for a lock. It starts at
        the store's ``lease``; a worker lowers it to its own, so a worker
        stopped in the middle of a commit holds its runs' rows no longer than
        its lease (see :class:`~treadle._stores._postgres_pools.StallLimit`).
        """
        self._stall_limit.lower(seconds)

    async def grouped(self, make: Callable[[], Plan[_T]]) -> _T:
        """Drive the write plan ``make`` makes with the commits of the other runs in flight.

        For the run queue and the worker's view (a claim's release, a run's
        start): each plan stays fenced by its own statements, and joins the
        next group transaction instead of paying one of its own (see
        :mod:`treadle._stores._postgres_group`).
        """
        return await self._commits.commit(make)

    async def alone(self, make: Callable[[], Plan[_T]]) -> _T:
        """Drive the write plan ``make`` makes in a transaction of its own, a query per answer.

        For a write that extends the audit chain (a run's creation, a start
        recorded): see :meth:`GroupCommit.alone`.
        """
        return await self._commits.alone(make)

    async def batched(self, work: Callable[[Sender], Awaitable[_T]]) -> _T:
        """Run ``work`` in one transaction whose rounds are one query each (with ``BEGIN``).

        For the run queue's claim (see :meth:`GroupCommit.batched`).
        """
        return await self._commits.batched(work)

    async def transact(self, work: _Work[_T], *, write: bool = True) -> _T:
        """Run ``work`` on a pooled connection, in one transaction when ``write``.

        For the run queue (:mod:`treadle._stores._postgres_queue`), which adds
        its own statements to this store's tables; errors come out as this
        store's (``DurabilityError`` naming the database, password hidden).
        """
        return await self._run(work, write=write)

    # A scan (see SqlReads) takes a pooled connection like any read: it holds up no other.
    async def _select(
        self, template: str, parameters: tuple[Any, ...], **_: bool
    ) -> list[Sequence[Any]]:
        return list(await self._read(_render(template), parameters))

    async def _read(self, query: str, parameters: tuple[Any, ...], **_: bool) -> list[TupleRow]:
        async def work(connection: Connection) -> list[TupleRow]:
            return await (await connection.execute(query, parameters)).fetchall()

        return await self._run(work, write=False)

    async def _run(self, work: _Work[_T], *, write: bool) -> _T:
        try:
            pool = await self._pools.get()
            async with pool.connection() as connection:
                await self._stall_limit.apply(connection)
                if not write:
                    return await work(connection)
                async with connection.transaction():
                    return await work(connection)
        except PoolClosed:
            if self._pools.closed:  # else the loop's pool closed under us: report it below
                raise RuntimeError(f"{self!r} is closed") from None
            raise
        except psycopg.Error as error:
            failure = DurabilityError(f"{self._where}: {self._hide(error)}")
            if any(secret in str(error) for secret in self._secrets):
                raise failure from None  # the original would show the password
            raise failure from error

    async def _migrate_once(self) -> None:
        if not self._migrated:
            await self._migrate()
            self._migrated = True

    async def _configure(self, connection: Connection) -> None:
        if self._schema is not None:
            await connection.execute(
                sql.SQL("SET search_path TO {}").format(sql.Identifier(self._schema))
            )

    async def _migrate(self) -> None:
        async with await psycopg.AsyncConnection.connect(self._dsn, autocommit=True) as connection:
            await self._configure(connection)
            async with connection.transaction():
                await connection.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
                if self._schema is not None:
                    # Checked first: CREATE ... IF NOT EXISTS needs the CREATE
                    # privilege even when there is nothing to create.
                    found = await connection.execute(
                        "SELECT 1 FROM pg_namespace WHERE nspname = %s", (self._schema,)
                    )
                    if await found.fetchone() is None:
                        create = sql.SQL(_sql_schema.CREATE_NAMED_SCHEMA).format(
                            sql.Identifier(self._schema)
                        )
                        await connection.execute(create)
                table = await connection.execute("SELECT to_regclass('treadle_schema')")
                versions: list[TupleRow] = []
                if (await table.fetchone()) == (None,):
                    await connection.execute(_render(_sql_schema.CREATE_SCHEMA_TABLE))
                else:
                    selected = await connection.execute(_render(_sql_schema.SELECT_SCHEMA_VERSION))
                    versions = await selected.fetchall()
                found_version = int(versions[0][0]) if versions else None
                # MIGRATIONS is read at open, so a test can stand in a newer treadle's list.
                for template, parameters in _sql_schema.upgrade(
                    found_version, repr(self), _sql_schema.MIGRATIONS
                ):
                    await connection.execute(_render(template), parameters)
                await remake_old_feed(connection)

    def _hide(self, error: psycopg.Error) -> str:
        message = str(error).strip()
        for secret in self._secrets:
            message = message.replace(secret, HIDDEN)
        return message
