"""``PostgresStore``: runs and checkpoints in PostgreSQL, for many workers.

Durability is PostgreSQL's: a commit has returned once the server has
committed its transaction. Every write is one transaction (a checkpoint, its
run row and retention move together or not at all); a read is one statement,
so one consistent snapshot. The SQL is :mod:`treadle._durable._sql`'s, in
the :data:`~treadle._durable._sql.POSTGRES` dialect, so the store behaves as
``SqliteStore`` does, row for row.

Ownership (leases, the inbox) follows the port, with what only PostgreSQL
adds: a delivery locks its run row, so deliveries from any number of
processes take turns and exactly one answer to a request is accepted; claims
lock their candidates ``FOR UPDATE SKIP LOCKED``, so concurrent timer
services never take one run twice nor wait on each other; and whatever makes
a run ready (a delivery, a release leaving items unapplied) tells idle
workers at once (``NOTIFY``, see :mod:`treadle._durable._postgres_queue`).
In-process owners keep their leases on their wall clock, as the port says;
workers keep theirs on the database's.

Event loops: a store may outlive an event loop (``run_sync`` runs every call
in a fresh one) or serve loops in several threads at once, while psycopg's
async pool belongs to one loop; so the store keeps a pool per loop, closed with
the store or with its loop (see :mod:`treadle._durable._postgres_pools`).
"""

from __future__ import annotations

import dataclasses
import functools
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import PoolClosed

from treadle._durable import _sql
from treadle._durable._postgres_pools import Connection, LoopPools
from treadle._durable._postgres_writes import NOTIFY_READY, insert_checkpoints
from treadle._durable._sql import POSTGRES
from treadle._durable._sql_reads import SqlReads
from treadle._durable._store import Claimed, InboxItem, Lease
from treadle._exceptions import (
    DurabilityError,
    LeaseLostError,
    RequestAlreadyAnsweredError,
    RunBusyError,
    RunExistsError,
    RunNotFoundError,
)

if TYPE_CHECKING:
    from psycopg.rows import TupleRow

    from treadle._durable._store import CheckpointRecord, RunRecord

_T = TypeVar("_T")
_Work = Callable[[Connection], Awaitable[_T]]  # an operation, given a pooled connection

_render = functools.cache(POSTGRES.render)

# PostgreSQL's additions to the shared templates, where only it can do better.
# Locking the run row first serialises everything that decides about one run
# (an acquire that found it busy, a delivery, a release) in one order: the
# run's, then its inbox's, so two of them never deadlock.
_LOCK_OWNER = _sql.SELECT_OWNER + " FOR UPDATE"
_LOCK_LEASE = _sql.SELECT_RUN_EXISTS + _sql.FENCE + " FOR UPDATE"
_LOCK_STATUS = _sql.SELECT_STATUS + " FOR UPDATE"
# Whether the released run is left ready (its inbox holds unapplied items): if
# so, idle workers are told at once, as a delivery would have told them.
_RELEASE = _sql.RELEASE + " RETURNING ready_at"
_FENCED_ADVANCE = _sql.ADVANCE_RUN + _sql.FENCE
_FENCED_SET_STATUS = _sql.SET_STATUS + _sql.FENCE
# Concurrent claimers skip each other's candidates rather than wait for them,
# and never take one run twice: a row locked here is leased before commit.
_SKIP_LOCKED = " FOR UPDATE SKIP LOCKED"
_CLAIMABLE = tuple(
    query + _SKIP_LOCKED
    for query in (_sql.CLAIMABLE_DUE, _sql.CLAIMABLE_READY, _sql.CLAIMABLE_ORPHANS)
)

# Held while a store migrates, so that stores opening one new database at once
# take turns: concurrent CREATE ... IF NOT EXISTS can otherwise collide.
_MIGRATION_LOCK = int.from_bytes(b"treadle", "big")

# What hides a password in a DSN: in a URI's user info or query, or as a keyword.
_URI_USER_INFO = re.compile(r"^(?P<head>[a-z][a-z0-9+.-]*://[^:@/]*):[^@/]*@", re.IGNORECASE)
_URI_SECRET = re.compile(r"(?P<head>[?&](?:ssl)?password=)[^&#]*", re.IGNORECASE)
_KEYWORD_SECRET = re.compile(r"(?P<head>\b(?:ssl)?password\s*=\s*)('(?:[^'\\]|\\.)*'|\S*)")
_HIDDEN = "***"


class PostgresStore(SqlReads):
    """Runs and checkpoints in a PostgreSQL database, shared by many processes.

    Nothing is opened until the first operation, which creates the schema
    (when ``schema`` is given) and the tables if missing and migrates them
    forward to this version of treadle. Coroutines from any event loop or
    thread may use the store: each loop gets its own pool of connections
    (see :mod:`treadle._durable._postgres_pools`), so ``max_size`` bounds one
    loop's share.

    A coroutine cancelled while its operation runs cancels the statement on
    the server and rolls its transaction back: an operation happens whole or
    not at all.
    """

    def __init__(
        self,
        dsn: str,
        *,
        keep_last: int | None = None,
        schema: str | None = None,
        min_size: int = 1,
        max_size: int = 10,
        lease: float = 30.0,
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
        _sql.check_keep_last(keep_last)
        _sql.check_lease(lease)
        self.lease = lease
        if schema is not None and not schema:
            raise ValueError("schema must be a non-empty name, or None for the search_path")
        if not 0 <= min_size <= max_size or max_size < 1:
            raise ValueError(
                f"need 0 <= min_size <= max_size and max_size >= 1, got {min_size}, {max_size}"
            )
        self._dsn = dsn
        self._shown_dsn, self._secrets = _redact(dsn)
        self._where = f"PostgreSQL store {self._shown_dsn}" + (
            "" if schema is None else f" (schema {schema!r})"
        )
        self._keep_last = keep_last
        self._schema = schema
        self._migrated = False  # at worst two loops at once both find nothing to migrate
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
        _sql.first_checkpoint_id(run, first.info)
        if lease is not None:
            run = dataclasses.replace(run, owner=lease.owner, lease_until=lease.until)
        run_row = _sql.run_parameters(run, first.info, graph)

        async def work(connection: Connection) -> None:
            inserted = await connection.execute(_render(_sql.INSERT_RUN), run_row)
            if inserted.rowcount == 0:
                raise RunExistsError(run.run_id)
            await insert_checkpoints(connection, (first,))

        await self._run(work, write=True)

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
    ) -> None:
        """:meth:`commit` for several checkpoints of one run, in order, as one transaction.

        With ``lease`` it commits only while the lease is current; ``consumed``
        marks the run's inbox items up to that ``seq`` applied and ``release``
        gives the lease up, in the same transaction, so an item is applied
        exactly once and a run at rest is free the moment its last barrier is.

        Raises:
            RunNotFoundError: No such run.
            LeaseLostError: ``lease`` is no longer current; nothing was written.
            ValueError: An id is taken; the checkpoints are none, of several
                runs, or repeat an id; ``keep_last`` is below 1.
        """
        _sql.last_of_one_run(checkpoints)
        _sql.check_keep_last(keep_last)
        retention = keep_last if keep_last is not None else self._keep_last
        owned = _Owned(lease, consumed, release)
        await self._run(
            functools.partial(_commit, tuple(checkpoints), retention, owned), write=True
        )

    async def set_status(
        self,
        run_id: str,
        status: str,
        error: str | None = None,
        *,
        lease: Lease | None = None,
        release: bool = False,
    ) -> None:
        """Change a run's status and error, stamping ``updated_at`` with the wall clock.

        With ``lease``, only while it is current; ``release`` gives it up in
        the same transaction.

        Raises:
            RunNotFoundError: No such run.
            LeaseLostError: ``lease`` is no longer current.
        """

        async def work(connection: Connection) -> None:
            now = time.time()
            stamped: tuple[Any, ...] = (status, error, now, run_id)
            query = _sql.SET_STATUS
            if lease is not None:
                query, stamped = _FENCED_SET_STATUS, (*stamped, lease.owner, lease.epoch)
            if (await connection.execute(_render(query), stamped)).rowcount == 0:
                raise await _refused(connection, run_id, lease)
            if lease is not None and release:
                await _release(connection, lease, now)

        # One statement alone is a transaction of its own.
        await self._run(work, write=lease is not None and release)

    # --- ownership ------------------------------------------------------------------

    async def acquire(
        self, run_id: str, owner: str, duration: float, *, replacing: str | None = None
    ) -> Lease:
        """Take the run's lease for ``duration`` seconds if no one holds a current one.

        With ``replacing``, take it from that owner whatever its lease says
        (the caller knows it is dead). The lease runs on this process's wall
        clock, as every in-process owner's does (workers keep theirs on the
        database's).

        Raises:
            RunNotFoundError: No such run.
            RunBusyError: Another owner's lease is current.
        """

        async def work(connection: Connection) -> Lease:
            now = time.time()
            until = now + duration
            taken = await _try_acquire(connection, run_id, owner, until, now, replacing)
            if taken is None:
                # Busy, or released just after the attempt: decide again under
                # the row lock, so the owner named is the one holding it now.
                locked = await connection.execute(_render(_LOCK_OWNER), (run_id,))
                found = await locked.fetchone()
                if found is None:
                    raise RunNotFoundError(run_id)
                taken = await _try_acquire(connection, run_id, owner, until, now, replacing)
                if taken is None:
                    raise RunBusyError(run_id, found[0], found[1])
            return Lease(run_id, owner, taken, until)

        return await self._run(work, write=True)

    async def renew(self, lease: Lease, duration: float) -> Lease:
        """Extend a current lease by ``duration`` seconds from now (a heartbeat).

        Raises:
            LeaseLostError: The lease is no longer current.
        """

        async def work(connection: Connection) -> Lease:
            until = time.time() + duration
            renewed = (until, lease.run_id, lease.owner, lease.epoch)
            if (await connection.execute(_render(_sql.RENEW), renewed)).rowcount == 0:
                raise LeaseLostError(lease.run_id, lease.epoch)
            return dataclasses.replace(lease, until=until)

        return await self._run(work, write=False)

    async def release(self, lease: Lease) -> bool:
        """Give a lease up; ``False`` when it was no longer current (nothing changed)."""

        async def work(connection: Connection) -> bool:
            held = (lease.run_id, lease.owner, lease.epoch)
            if await (await connection.execute(_render(_LOCK_LEASE), held)).fetchone() is None:
                return False
            return await _release(connection, lease, time.time())

        return await self._run(work, write=True)

    async def deliver(self, run_id: str, items: Sequence[tuple[str, str | None, bytes]]) -> None:
        """Put items in the run's inbox, all or none; the first answer to a request wins.

        The run row is locked first, so deliveries to one run (from any
        number of processes) take turns and each sees the answers of those
        before it: exactly one answer to a request is ever accepted. The run
        is marked ready and idle workers are told, when the transaction commits.

        Raises:
            RunNotFoundError: No such run.
            RequestError: The run has ended.
            RequestAlreadyAnsweredError: A request was answered already
                (names the answer kept); nothing was delivered.
        """
        batch = list(items)

        async def work(connection: Connection) -> None:
            locked = await connection.execute(_render(_LOCK_STATUS), (run_id,))
            (status,) = _sql.check_found(run_id, await locked.fetchone())
            now = time.time()
            for kind, target, payload in batch:
                if kind == "answer":
                    kept = await connection.execute(_render(_sql.SELECT_ANSWER), (run_id, target))
                    answer = await kept.fetchone()
                    if answer is not None:
                        raise RequestAlreadyAnsweredError(
                            run_id, str(target), _sql.answer_preview(answer[0]), answer[1]
                        )
                delivered = (run_id, kind, target, payload, now)
                await connection.execute(_render(_sql.INSERT_INBOX), delivered)
            _sql.check_not_ended(run_id, status)  # rolls the inserts back
            await connection.execute(_render(_sql.MAKE_READY), (now, run_id))
            await connection.execute(NOTIFY_READY)

        await self._run(work, write=True)

    async def inbox(self, run_id: str) -> list[InboxItem]:
        """The run's inbox items not yet applied, in delivery order."""
        rows = await self._select(_sql.SELECT_INBOX, (run_id,))
        return [InboxItem(seq, kind, target, bytes(payload)) for seq, kind, target, payload in rows]

    async def answer_of(self, run_id: str, request_id: str) -> tuple[str, float] | None:
        """The answer kept for a request (its JSON, cut short, and when it came), or ``None``."""
        rows = await self._select(_sql.SELECT_ANSWER, (run_id, request_id))
        return (_sql.answer_preview(rows[0][0]), rows[0][1]) if rows else None

    async def cancel(self, run_id: str) -> None:
        """Mark the run ``cancelled`` wherever it is, fencing out any owner or worker.

        Its unapplied inbox items are marked applied: nobody will apply them.

        Raises:
            RunNotFoundError: No such run.
            RequestError: It has ended already.
        """

        async def work(connection: Connection) -> None:
            now = time.time()
            if (await connection.execute(_render(_sql.CANCEL), (now, run_id))).rowcount == 0:
                found = await connection.execute(_render(_sql.SELECT_STATUS), (run_id,))
                raise _sql.not_cancellable(run_id, await found.fetchone())
            await connection.execute(_render(_sql.CONSUME_ALL), (now, run_id))

        await self._run(work, write=True)

    async def park(self, lease: Lease, reason: str) -> None:
        """Set a run aside with ``reason`` and give its lease up: services stop waking it.

        Raises:
            LeaseLostError: The lease is no longer current.
            RunNotFoundError: No such run.
        """

        async def work(connection: Connection) -> None:
            parked = (reason, lease.run_id, lease.owner, lease.epoch)
            if (await connection.execute(_render(_sql.PARK), parked)).rowcount == 0:
                raise await _refused(connection, lease.run_id, lease)

        await self._run(work, write=True)

    async def claim(self, owner: str, duration: float, now: float, *, limit: int) -> list[Claimed]:
        """Lease up to ``limit`` runs a timer service should take up (see the port).

        Due runs first, then ready ones, then orphans. Candidates are locked
        with ``SKIP LOCKED``: concurrent claimers (other processes' timer
        services) pass over each other's rather than wait, and a run is
        leased to one of them only.

        Raises:
            ValueError: ``limit`` is negative.
        """
        _sql.check_limit(limit)

        async def work(connection: Connection) -> list[Claimed]:
            wall = time.time()
            chosen: dict[str, None] = {}
            for query, first in zip(_CLAIMABLE, (now, wall, 1), strict=True):
                found = await connection.execute(_render(query), (first, wall, limit))
                for (run_id,) in await found.fetchall():
                    chosen.setdefault(run_id)
            claimed: list[Claimed] = []
            until = wall + duration
            for run_id in list(chosen)[:limit]:
                taking = await connection.execute(_render(_sql.CLAIM), (owner, until, run_id, wall))
                row = await taking.fetchone()
                if row is not None:
                    claimed.append(
                        Claimed(Lease(run_id, owner, row[0], until), row[1], row[2] is not None)
                    )
            return claimed

        return await self._run(work, write=True)

    async def prune(self, run_id: str, keep_last: int) -> int:
        """Delete all but the ``keep_last`` most recently committed checkpoints.

        The run's latest checkpoint is always kept.

        Returns:
            How many checkpoints were deleted.

        Raises:
            RunNotFoundError: No such run.
            ValueError: ``keep_last`` is below 1.
        """
        _sql.check_keep_last(keep_last)

        async def work(connection: Connection) -> int:
            found = await connection.execute(_render(_sql.SELECT_RUN_EXISTS), (run_id,))
            if await found.fetchone() is None:
                raise RunNotFoundError(run_id)
            return await _delete_old(connection, run_id, keep_last)

        return await self._run(work, write=True)

    async def close(self) -> None:
        """Close every pool; closing again does nothing.

        Operations holding a connection finish first; those waiting for one
        fail as the store is closed. The pool of another event loop that is
        still running closes on that loop, soon after.
        """
        await self._pools.close()

    async def notifications(self, channel: str) -> AsyncIterator[str]:
        """Payloads ``NOTIFY``-ed on ``channel`` by writers using this store's schema.

        Runs on a connection of its own, outside the pools, for as long as the
        caller iterates. Writers send ``pg_notify(channel, current_schema())``,
        so stores on other schemas of the database do not wake each other.

        Raises:
            DurabilityError: The connection failed or was lost (the server
                restarted); iterate again to listen again.
        """
        try:
            async with await psycopg.AsyncConnection.connect(self._dsn, autocommit=True) as db:
                await self._configure(db)
                found = await (await db.execute("SELECT current_schema()")).fetchone()
                mine = found[0] if found else None
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

    async def transact(self, work: _Work[_T], *, write: bool = True) -> _T:
        """Run ``work`` on a pooled connection, in one transaction when ``write``.

        For the run queue (:mod:`treadle._durable._postgres_queue`), which adds
        its own statements to this store's tables; errors come out as this
        store's (``DurabilityError`` naming the database, password hidden).
        """
        return await self._run(work, write=write)

    async def _select(self, template: str, parameters: tuple[Any, ...]) -> list[Sequence[Any]]:
        return list(await self._read(_render(template), parameters))

    async def _read(self, query: str, parameters: tuple[Any, ...]) -> list[TupleRow]:
        async def work(connection: Connection) -> list[TupleRow]:
            return await (await connection.execute(query, parameters)).fetchall()

        return await self._run(work, write=False)

    async def _run(self, work: _Work[_T], *, write: bool) -> _T:
        try:
            pool = await self._pools.get()
            async with pool.connection() as connection:
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
                        create = sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(self._schema))
                        await connection.execute(create)
                table = await connection.execute("SELECT to_regclass('treadle_schema')")
                versions: list[TupleRow] = []
                if (await table.fetchone()) == (None,):
                    await connection.execute(_render(_sql.CREATE_SCHEMA_TABLE))
                else:
                    selected = await connection.execute(_render(_sql.SELECT_SCHEMA_VERSION))
                    versions = await selected.fetchall()
                found_version = int(versions[0][0]) if versions else None
                # MIGRATIONS is read at open, so a test can stand in a newer treadle's list.
                for template, parameters in _sql.upgrade(
                    found_version, repr(self), _sql.MIGRATIONS
                ):
                    await connection.execute(_render(template), parameters)

    def _hide(self, error: psycopg.Error) -> str:
        message = str(error).strip()
        for secret in self._secrets:
            message = message.replace(secret, _HIDDEN)
        return message


def _redact(dsn: str) -> tuple[str, tuple[str, ...]]:
    """``dsn`` with its passwords hidden, and the passwords, to hide them anywhere.

    Raises:
        ValueError: ``dsn`` is not a libpq connection string.
    """
    try:
        parameters = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        # libpq's complaint quotes the DSN, and so possibly its password.
        raise ValueError(
            "dsn is not a PostgreSQL connection string (a URI such as "
            "postgresql://user@host/db, or key=value pairs); it is not repeated "
            "here as it may hold a password"
        ) from None
    secrets = tuple(
        str(parameters[key]) for key in ("password", "sslpassword") if parameters.get(key)
    )
    if "://" in dsn:
        shown = _URI_SECRET.sub(
            rf"\g<head>{_HIDDEN}", _URI_USER_INFO.sub(rf"\g<head>:{_HIDDEN}@", dsn)
        )
    else:
        shown = _KEYWORD_SECRET.sub(rf"\g<head>{_HIDDEN}", dsn)
    for secret in secrets:  # whatever spelling the patterns missed
        shown = shown.replace(secret, _HIDDEN)
    return shown, secrets


@dataclasses.dataclass(frozen=True, slots=True)
class _Owned:
    """What a commit does besides committing: fence by a lease, mark items applied, release."""

    lease: Lease | None
    consumed: int | None
    release: bool


async def _commit(
    checkpoints: Sequence[CheckpointRecord],
    keep_last: int | None,
    owned: _Owned,
    connection: Connection,
) -> None:
    info = checkpoints[-1].info
    lease = owned.lease
    # The run row first: its lock makes concurrent commits to one run take turns.
    if lease is None:
        advanced = await connection.execute(
            _render(_sql.ADVANCE_RUN), _sql.advance_parameters(info)
        )
    else:
        fenced = (*_sql.advance_parameters(info), lease.owner, lease.epoch)
        advanced = await connection.execute(_render(_FENCED_ADVANCE), fenced)
    if advanced.rowcount == 0:
        raise await _refused(connection, info.run_id, lease)
    await insert_checkpoints(connection, checkpoints)
    now = time.time()
    if owned.consumed is not None:
        consumed = (now, info.run_id, owned.consumed)
        await connection.execute(_render(_sql.CONSUME_INBOX), consumed)
    if lease is not None and owned.release:
        await _release(connection, lease, now)
    if keep_last is not None:
        await _delete_old(connection, info.run_id, keep_last)


async def _try_acquire(
    connection: Connection,
    run_id: str,
    owner: str,
    until: float,
    now: float,
    replacing: str | None,
) -> int | None:
    """The new lease's epoch if the run was free (or held by ``replacing``); else ``None``."""
    found = await connection.execute(_render(_sql.ACQUIRE), (owner, until, run_id, now))
    taken = await found.fetchone()
    if taken is None and replacing is not None:
        taking = (owner, until, run_id, replacing)
        taken = await (await connection.execute(_render(_sql.ACQUIRE_FROM), taking)).fetchone()
    return None if taken is None else int(taken[0])


async def _release(connection: Connection, lease: Lease, now: float) -> bool:
    """Give ``lease`` up; tell idle workers when items delivered meanwhile leave the run ready.

    The caller's transaction must hold the run row's lock already (an earlier
    statement of it wrote or locked the row): only then does this statement's
    snapshot hold every item a delivery committed before it. Were the lock
    taken here, by this very UPDATE, a delivery it waited for would be
    missing from its inbox check, and the run left not ready with an item
    nobody applies.
    """
    released = (now, lease.run_id, lease.owner, lease.epoch)
    row = await (await connection.execute(_render(_RELEASE), released)).fetchone()
    if row is None:
        return False
    if row[0] is not None:
        await connection.execute(NOTIFY_READY)
    return True


async def _refused(connection: Connection, run_id: str, lease: Lease | None) -> DurabilityError:
    """Why a write changed no row: no such run, or (under a lease) the lease is gone."""
    if lease is not None:
        found = await connection.execute(_render(_sql.SELECT_RUN_EXISTS), (run_id,))
        if await found.fetchone() is not None:
            return LeaseLostError(run_id, lease.epoch)
    return RunNotFoundError(run_id)


async def _delete_old(connection: Connection, run_id: str, keep_last: int) -> int:
    parameters = (run_id, run_id, keep_last - 1, run_id)
    return (await connection.execute(_render(_sql.DELETE_OLD_CHECKPOINTS), parameters)).rowcount
