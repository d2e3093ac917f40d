"""``PostgresStore``'s ownership part: leases, the inbox, cancelling, parking and claims.

Ownership (leases, the inbox) follows the port, with what only PostgreSQL
adds: a delivery locks its run row, so deliveries from any number of
processes take turns and exactly one answer to a request is accepted; claims
lock their candidates ``FOR UPDATE SKIP LOCKED``, so concurrent timer
services never take one run twice nor wait on each other; and whatever makes
a run ready (a delivery, a release leaving items unapplied) tells idle
workers at once (``NOTIFY``, see :mod:`treadle._stores._postgres_queue`).
In-process owners keep their leases on their wall clock, as the port says;
workers keep theirs on the database's.

A mixin, as :class:`~treadle._stores._sql_reads.SqlReads` gives the store
its reads: each operation is one transaction on a pooled connection (see
:mod:`treadle._stores._postgres`).
"""

from __future__ import annotations

import dataclasses
import functools
import time
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, TypeVar

from treadle._exceptions import (
    DurabilityError,
    LeaseLostError,
    RequestAlreadyAnsweredError,
    RunBusyError,
    RunNotFoundError,
    RunPausedError,
)
from treadle._stores import (
    _audit,
    _control_plans,
    _pausing,
    _sql_ownership,
    _sql_rules,
    _write_parts,
)
from treadle._stores._postgres_writes import NOTIFY_READY, drive, record
from treadle._stores._sql_dialect import POSTGRES
from treadle._stores._store import Claimed, InboxItem, Lease
from treadle._stores._write_steps import POSTGRES_WRITES

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from treadle._stores._postgres_pools import Connection
    from treadle._values._actors import Actor

_T = TypeVar("_T")

_render = functools.cache(POSTGRES.render)

# PostgreSQL's additions to the shared templates, where only it can do better.
# Locking the run row first serialises everything that decides about one run
# (an acquire that found it busy, a delivery, a release) in one order: the
# run's, then its inbox's, so two of them never deadlock.
_LOCK_OWNER = _sql_ownership.SELECT_OWNER + " FOR UPDATE"
_LOCK_DELIVERABLE = _sql_ownership.SELECT_DELIVERABLE + " FOR UPDATE"
# Concurrent claimers skip each other's candidates rather than wait for them,
# and never take one run twice: a row locked here is leased before commit.
_SKIP_LOCKED = " FOR UPDATE SKIP LOCKED"
_CLAIMABLE = tuple(
    query + _SKIP_LOCKED
    for query in (
        _sql_ownership.CLAIMABLE_DUE,
        _sql_ownership.CLAIMABLE_READY,
        _sql_ownership.CLAIMABLE_ORPHANS,
    )
)


class PostgresOwnership(ABC):
    """What the store port asks of ``PostgresStore`` about who owns a run, and its inbox.

    ``acquire``, ``renew``, ``release``, ``deliver``, ``inbox``,
    ``answer_of``, ``cancel``, ``pause``, ``unpause``, ``park`` and ``claim``.
    """

    @abstractmethod
    async def _run(self, work: Callable[[Connection], Awaitable[_T]], *, write: bool) -> _T:
        """Run ``work`` on a pooled connection, in one transaction when ``write``."""

    @abstractmethod
    async def _select(self, template: str, parameters: tuple[Any, ...]) -> list[Sequence[Any]]:
        """Run one SELECT written in the neutral SQL dialect; return its rows."""

    async def acquire(
        self,
        run_id: str,
        owner: str,
        duration: float,
        *,
        replacing: str | None = None,
        actor: Actor | None = None,
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
                if found[2] == _pausing.PAUSED:
                    raise RunPausedError(run_id)
                taken = await _try_acquire(connection, run_id, owner, until, now, replacing)
                if taken is None:
                    raise RunBusyError(run_id, found[0], found[1])
            epoch, status = taken
            if actor is not None and status not in _sql_ownership.NOTHING_TO_RESUME:
                await record(connection, [_audit.Recorded(run_id, "run_resumed", actor, {})], now)
            return Lease(run_id, owner, epoch, until)

        return await self._run(work, write=True)

    async def renew(self, lease: Lease, duration: float) -> Lease:
        """Extend a current lease by ``duration`` seconds from now (a heartbeat).

        Raises:
            LeaseLostError: The lease is no longer current.
        """

        async def work(connection: Connection) -> Lease:
            until = time.time() + duration
            renewed = (until, lease.run_id, lease.owner, lease.epoch)
            if (await connection.execute(_render(_sql_ownership.RENEW), renewed)).rowcount == 0:
                raise LeaseLostError(lease.run_id, lease.epoch)
            return dataclasses.replace(lease, until=until)

        return await self._run(work, write=False)

    async def release(self, lease: Lease, *, seen: int = 0) -> bool:
        """Give a lease up; ``False`` when it was no longer current (``seen``: see the port)."""
        plan = _control_plans.release(lease, POSTGRES_WRITES, seen)
        return await self._run(functools.partial(drive, plan), write=True)

    async def deliver(
        self,
        run_id: str,
        items: Sequence[tuple[str, str | None, bytes]],
        *,
        version: int | None = None,
        actor: Actor | None = None,
    ) -> None:
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
            ValueError, TypeError: An item no owner could apply (see ``check_items``).
        """
        batch = list(items)
        _sql_ownership.check_items(run_id, batch)

        async def work(connection: Connection) -> None:
            locked = await connection.execute(_render(_LOCK_DELIVERABLE), (run_id,))
            status, workflow, held = _sql_ownership.check_found(run_id, await locked.fetchone())
            _sql_ownership.check_version(run_id, workflow, held, version)
            now = time.time()
            for kind, target, payload in batch:
                if kind == "answer":
                    kept = await connection.execute(
                        _render(_sql_ownership.SELECT_ANSWER), (run_id, target)
                    )
                    answer = await kept.fetchone()
                    if answer is not None:
                        raise RequestAlreadyAnsweredError(
                            run_id, str(target), _sql_ownership.answer_preview(answer[0]), answer[1]
                        )
                delivered = (run_id, kind, target, payload, now)
                await connection.execute(_render(_sql_ownership.INSERT_INBOX), delivered)
            _sql_ownership.check_not_ended(run_id, status)  # rolls the inserts back
            await connection.execute(_render(_sql_ownership.MAKE_READY), (now, run_id))
            await connection.execute(NOTIFY_READY)
            if actor is not None:
                await record(connection, _audit.delivered(run_id, batch, actor), now)

        await self._run(work, write=True)

    async def inbox(self, run_id: str) -> list[InboxItem]:
        """The run's inbox items not yet applied, in delivery order."""
        rows = await self._select(_sql_ownership.SELECT_INBOX, (run_id,))
        return [
            InboxItem(seq, kind, target, bytes(payload), at)
            for seq, kind, target, payload, at in rows
        ]

    async def answer_of(self, run_id: str, request_id: str) -> tuple[str, float] | None:
        """The answer kept for a request (its JSON, cut short, and when it came), or ``None``."""
        rows = await self._select(_sql_ownership.SELECT_ANSWER, (run_id, request_id))
        return (_sql_ownership.answer_preview(rows[0][0]), rows[0][1]) if rows else None

    async def answered_payload(self, run_id: str, request_id: str) -> bytes | None:
        """The answer kept for a request, whole, as delivered (``None``: none was kept)."""
        rows = await self._select(_sql_ownership.SELECT_ANSWER, (run_id, request_id))
        return bytes(rows[0][0]) if rows else None

    async def cancel(self, run_id: str, *, actor: Actor | None = None) -> None:
        """Mark the run ``cancelled`` wherever it is, fencing out any owner or worker.

        Its unapplied inbox items are marked applied: nobody will apply them.

        Raises:
            RunNotFoundError: No such run.
            RequestError: It has ended already.
        """
        plan = _control_plans.cancel(run_id, actor, POSTGRES_WRITES)
        await self._run(functools.partial(drive, plan), write=True)

    async def pause(self, run_id: str, *, actor: Actor | None = None) -> _pausing.PauseOutcome:
        """Pause the run now, or ask its owner (a worker, a process) to at its next commit.

        The run row is locked first, so a pause and a commit of the run take
        turns: the commit either lands before the pause (which then asks the
        owner, or finds the run at rest and pauses it) or honours it.

        Raises:
            RunNotFoundError: No such run.
            RequestError: It has ended.
        """
        plan = _control_plans.pause(run_id, actor, POSTGRES_WRITES)
        return await self._run(functools.partial(drive, plan), write=True)

    async def unpause(
        self,
        run_id: str,
        *,
        owner: str | None = None,
        duration: float = 0.0,
        actor: Actor | None = None,
    ) -> _pausing.Unpaused:
        """Let a paused run go on (leased to ``owner``, if given), or withdraw a pause asked.

        Idle workers are told at once when the run is left for them to take up.

        Raises:
            RunNotFoundError: No such run.
            RunBusyError: With ``owner``, another owner's lease is current.
            RequestError: It has ended, or is neither paused nor asked to pause.
        """
        plan = _control_plans.unpause(run_id, owner, duration, actor, POSTGRES_WRITES)
        return await self._run(functools.partial(drive, plan), write=True)

    async def refuse_inbox(
        self, lease: Lease, refusals: Sequence[tuple[int, str]], actor: Actor
    ) -> None:
        """Take inbox items the owner cannot apply out of the inbox, recorded (see the port).

        Raises:
            LeaseLostError: The lease is no longer current; nothing was written.
        """
        plan = _control_plans.refuse_inbox(lease, tuple(refusals), actor, POSTGRES_WRITES)
        await self._run(functools.partial(drive, plan), write=True)

    async def park(self, lease: Lease, reason: str) -> None:
        """Set a run aside with ``reason`` and give its lease up: services stop waking it.

        Raises:
            LeaseLostError: The lease is no longer current.
            RunNotFoundError: No such run.
        """

        async def work(connection: Connection) -> None:
            parked = (reason, lease.run_id, lease.owner, lease.epoch)
            if (await connection.execute(_render(_sql_ownership.PARK), parked)).rowcount == 0:
                raise await refusal(connection, lease.run_id, lease)

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
        _sql_rules.check_limit(limit)

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
                taking = await connection.execute(
                    _render(_sql_ownership.CLAIM), (owner, until, run_id, wall)
                )
                row = await taking.fetchone()
                if row is not None:
                    lease = Lease(run_id, owner, row[0], until)
                    claimed.append(Claimed(lease, row[1], row[2] is not None, row[3]))
            return claimed

        return await self._run(work, write=True)


async def _try_acquire(
    connection: Connection,
    run_id: str,
    owner: str,
    until: float,
    now: float,
    replacing: str | None,
) -> tuple[int, str] | None:
    """The new lease's epoch and the run's status if it was free (or held by ``replacing``)."""
    found = await connection.execute(_render(_sql_ownership.ACQUIRE), (owner, until, run_id, now))
    taken = await found.fetchone()
    if taken is None and replacing is not None:
        taking = (owner, until, run_id, replacing)
        taken = await (
            await connection.execute(_render(_sql_ownership.ACQUIRE_FROM), taking)
        ).fetchone()
    return None if taken is None else (int(taken[0]), str(taken[1]))


async def refusal(connection: Connection, run_id: str, lease: Lease | None) -> DurabilityError:
    """Why a write changed no row: no such run, or (under a lease) the lease is gone."""
    return await drive(_write_parts.refusal(run_id, lease), connection)
