"""``SqliteStore``'s ownership part: leases, the inbox, cancelling, parking and claims.

A mixin, as :class:`~treadle._stores._sql_reads.SqlReads` gives the store
its reads: each operation is one transaction on the store's writer thread
(see :mod:`treadle._stores._sqlite`), made of the statements of
:mod:`treadle._stores._sql_ownership`.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, TypeVar

from treadle._exceptions import (
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
)
from treadle._stores._sql_dialect import SQLITE
from treadle._stores._sqlite_writes import drive, record, refusal
from treadle._stores._store import Claimed, InboxItem, Lease
from treadle._stores._write_steps import SQLITE_WRITES

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Callable, Sequence

    from treadle._values._actors import Actor

_T = TypeVar("_T")

# Each template is rendered once; the driver then caches the prepared statement.
_render = functools.cache(SQLITE.render)


class SqliteOwnership(ABC):
    """What the store port asks of ``SqliteStore`` about who owns a run, and its inbox.

    ``acquire``, ``renew``, ``release``, ``deliver``, ``inbox``,
    ``answer_of``, ``cancel``, ``pause``, ``unpause``, ``park`` and ``claim``.
    """

    @abstractmethod
    async def _call(
        self, work: Callable[[sqlite3.Connection], _T], *, write: bool, group: bool = False
    ) -> _T:
        """Run ``work`` on the store's writer thread (one transaction when ``write``)."""

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

        Raises:
            RunNotFoundError: No such run.
            RunBusyError: Another owner's lease is current.
        """

        def work(connection: sqlite3.Connection) -> Lease:
            now = time.time()
            until = now + duration
            if replacing is None:
                taken = connection.execute(
                    _render(_sql_ownership.ACQUIRE), (owner, until, run_id, now)
                )
            else:
                taken = connection.execute(
                    _render(_sql_ownership.ACQUIRE_FROM), (owner, until, run_id, replacing)
                )
            row = taken.fetchone()
            if row is None:
                found = connection.execute(
                    _render(_sql_ownership.SELECT_OWNER), (run_id,)
                ).fetchone()
                if found is None:
                    raise RunNotFoundError(run_id)
                if found[2] == _pausing.PAUSED:
                    raise RunPausedError(run_id)
                raise RunBusyError(run_id, found[0], found[1])
            if actor is not None and row[1] not in _sql_ownership.NOTHING_TO_RESUME:
                record(connection, [_audit.Recorded(run_id, "run_resumed", actor, {})], now)
            return Lease(run_id, owner, row[0], until)

        return await self._call(work, write=True, group=True)

    async def renew(self, lease: Lease, duration: float) -> Lease:
        """Extend a current lease by ``duration`` seconds from now.

        Raises:
            LeaseLostError: The lease is no longer current.
        """

        def work(connection: sqlite3.Connection) -> Lease:
            until = time.time() + duration
            renewed = (until, lease.run_id, lease.owner, lease.epoch)
            if connection.execute(_render(_sql_ownership.RENEW), renewed).rowcount == 0:
                raise LeaseLostError(lease.run_id, lease.epoch)
            return dataclasses.replace(lease, until=until)

        return await self._call(work, write=True, group=True)

    async def release(self, lease: Lease, *, seen: int = 0) -> bool:
        """Give a lease up; ``False`` when it was no longer current (``seen``: see the port)."""
        plan = functools.partial(_control_plans.release, lease, SQLITE_WRITES, seen)
        return await self._call(lambda c: drive(plan(), c), write=True, group=True)

    async def deliver(
        self,
        run_id: str,
        items: Sequence[tuple[str, str | None, bytes]],
        *,
        version: int | None = None,
        actor: Actor | None = None,
    ) -> None:
        """Put items in the run's inbox, all or none; the first answer to a request wins.

        Raises:
            RunNotFoundError: No such run.
            RequestError: The run has ended.
            RequestAlreadyAnsweredError: A request was answered already.
            ValueError, TypeError: An item no owner could apply (see ``check_items``).
        """
        _sql_ownership.check_items(run_id, items)

        def work(connection: sqlite3.Connection) -> None:
            query = _render(_sql_ownership.SELECT_DELIVERABLE)
            found = connection.execute(query, (run_id,)).fetchone()
            status, workflow, held = _sql_ownership.check_found(run_id, found)
            _sql_ownership.check_version(run_id, workflow, held, version)
            now = time.time()
            for kind, target, payload in items:
                if kind == "answer":
                    answer = connection.execute(
                        _render(_sql_ownership.SELECT_ANSWER), (run_id, target)
                    ).fetchone()
                    if answer is not None:
                        raise RequestAlreadyAnsweredError(
                            run_id, str(target), _sql_ownership.answer_preview(answer[0]), answer[1]
                        )
                connection.execute(
                    _render(_sql_ownership.INSERT_INBOX), (run_id, kind, target, payload, now)
                )
            _sql_ownership.check_not_ended(run_id, status)  # rolls the inserts back
            connection.execute(_render(_sql_ownership.MAKE_READY), (now, run_id))
            if actor is not None:
                record(connection, _audit.delivered(run_id, items, actor), now)

        await self._call(work, write=True, group=True)

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
        """Mark the run ``cancelled`` wherever it is, fencing out any owner.

        Raises:
            RunNotFoundError: No such run.
            RequestError: It has ended already.
        """
        plan = functools.partial(_control_plans.cancel, run_id, actor, SQLITE_WRITES)
        await self._call(lambda c: drive(plan(), c), write=True, group=True)

    async def pause(self, run_id: str, *, actor: Actor | None = None) -> _pausing.PauseOutcome:
        """Pause the run now, or ask its owner to at its next commit (see the port).

        Raises:
            RunNotFoundError: No such run.
            RequestError: It has ended.
        """
        plan = functools.partial(_control_plans.pause, run_id, actor, SQLITE_WRITES)
        return await self._call(lambda c: drive(plan(), c), write=True, group=True)

    async def unpause(
        self,
        run_id: str,
        *,
        owner: str | None = None,
        duration: float = 0.0,
        actor: Actor | None = None,
    ) -> _pausing.Unpaused:
        """Let a paused run go on (leased to ``owner``, if given), or withdraw a pause asked.

        Raises:
            RunNotFoundError: No such run.
            RunBusyError: With ``owner``, another owner's lease is current.
            RequestError: It has ended, or is neither paused nor asked to pause.
        """
        plan = functools.partial(
            _control_plans.unpause, run_id, owner, duration, actor, SQLITE_WRITES
        )
        return await self._call(lambda c: drive(plan(), c), write=True, group=True)

    async def refuse_inbox(
        self, lease: Lease, refusals: Sequence[tuple[int, str]], actor: Actor
    ) -> None:
        """Take inbox items the owner cannot apply out of the inbox, recorded (see the port).

        Raises:
            LeaseLostError: The lease is no longer current; nothing was written.
        """
        plan = functools.partial(
            _control_plans.refuse_inbox, lease, tuple(refusals), actor, SQLITE_WRITES
        )
        await self._call(lambda c: drive(plan(), c), write=True, group=True)

    async def park(self, lease: Lease, reason: str) -> None:
        """Set a run aside with ``reason`` and give its lease up.

        Raises:
            LeaseLostError: The lease is no longer current.
        """

        def work(connection: sqlite3.Connection) -> None:
            parked = (reason, lease.run_id, lease.owner, lease.epoch)
            if connection.execute(_render(_sql_ownership.PARK), parked).rowcount == 0:
                raise refusal(connection, lease.run_id, lease)

        await self._call(work, write=True, group=True)

    async def claim(self, owner: str, duration: float, now: float, *, limit: int) -> list[Claimed]:
        """Lease up to ``limit`` runs a timer service should take up (see the port)."""
        _sql_rules.check_limit(limit)

        def work(connection: sqlite3.Connection) -> list[Claimed]:
            wall = time.time()
            chosen: dict[str, None] = {}
            for query, first in (
                (_sql_ownership.CLAIMABLE_DUE, now),
                (_sql_ownership.CLAIMABLE_READY, wall),
                (_sql_ownership.CLAIMABLE_ORPHANS, 1),
            ):
                for (run_id,) in connection.execute(_render(query), (first, wall, limit)):
                    chosen.setdefault(run_id)
            ids = list(chosen)[:limit]
            if not ids:
                return []
            until = wall + duration
            rows = connection.execute(
                _render(_sql_ownership.claim_many(len(ids))), (owner, until, *ids, wall)
            ).fetchall()
            taken = {row[0]: row[1:] for row in rows}
            claimed: list[Claimed] = []
            for run_id in ids:  # in claim order: due first
                if run_id in taken:
                    epoch, workflow, ready, version = taken[run_id]
                    lease = Lease(run_id, owner, epoch, until)
                    claimed.append(Claimed(lease, workflow, ready is not None, version))
            return claimed

        return await self._call(work, write=True)
