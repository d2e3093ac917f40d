"""Call limits on the SQL stores: :class:`~treadle._stores._limit_roles.LimitSlots`, written once.

Each limit has a row in ``treadle_limits`` (its last terms, its arrival
counter, the turn being served, a slow-down) and its line in
``treadle_limit_slots``: a row per call waiting, holding, or released but
still inside the rate's window. Every change to a line first updates its
limit's row, which locks it (PostgreSQL) or takes the writer's lock
(SQLite): the processes deciding about one limit take turns, and each sees
what the last one granted.

The statements are this module's (neutral dialect). Each change is a
:class:`Batch` of them, sans I/O, whose statements never wait for an
earlier one's answer: ``_sqlite_writes.run_batch`` executes it in one
transaction on the store's writer, ``_postgres_writes.run_batch`` sends it
as one query, one implicit transaction and one round trip.
"""

from __future__ import annotations

import json
import time
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from treadle._exceptions import LeaseLostError
from treadle._stores._limit_roles import Admission, LineWait, within_budget
from treadle._stores._sql_limit_statements import (
    DROP_ENDED,
    ENSURE_LINE,
    ENTER,
    FIRST_COST,
    FREE_LOST,
    GRANT,
    KEEP_GRANT,
    LEAVE,
    LOCK_LINE,
    NONE,
    NOTICE,
    PRUNE,
    REENTER,
    RELEASE,
    RETELL,
    SERVE,
    SLOW,
    SPENT,
    STATE,
    WAITS,
)
from treadle._stores._write_steps import ALL, NOTHING, ONE

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Awaitable, Callable, Sequence

    from treadle._stores._limit_roles import LimitTerms, SlotEntry
    from treadle._stores._records import Lease
    from treadle._stores._write_steps import Step

_T = TypeVar("_T")


# --- batches ----------------------------------------------------------------------------
class Batch(NamedTuple):
    """One change to a line: its statements, sent at once, and what their answers mean.

    Attributes:
        steps: The statements (:data:`~treadle._stores._write_steps.Step`), in order.
        outcome: Turns their answers, in the same order, into the change's outcome.
    """

    steps: list[Step]
    outcome: Callable[[list[Any]], Any]


def _lock(terms: LimitTerms, now: float) -> list[Step]:
    name = terms.name
    return [
        (ENSURE_LINE, (name,), NOTHING, False),
        (LOCK_LINE, (terms.concurrency, terms.calls, terms.per, now, now, name), NOTHING, False),
    ]


def _lease(lease: Lease | None, now: float) -> tuple[Any, ...]:
    if lease is None:
        return ("", "", -1, now)
    return (lease.run_id, lease.owner, lease.epoch, now)


def _admit(terms: LimitTerms, gate: str, lease: Lease | None, now: float) -> list[Step]:
    """Free the lost, prune the old, grant the head, and read what the asker must know."""
    name = terms.name
    window = terms.per if terms.calls is not None else 0.0
    budget = terms.tokens_per if terms.tokens is not None else 0.0
    steps: list[Step] = [
        (FREE_LOST, (name, name, name), NOTHING, False),
        (DROP_ENDED, (name,), NOTHING, False),
        (PRUNE, (name, name, terms.window), NOTHING, False),
        (
            GRANT,
            (
                name,
                name,
                name,
                name,
                NONE if terms.concurrency is None else terms.concurrency,
                name,
                NONE if terms.calls is None else terms.calls,
                name,
                name,
                window,
                NONE if terms.tokens is None else terms.tokens,
                name,
                name,
                budget,
                name,
                name,
            ),
            NOTHING,
            False,
        ),
        (SERVE, (name, name, name, name, name), NOTHING, False),
        (NOTICE, (name, gate), ALL, False),
        (STATE, (window, max((terms.calls or 1) - 1, 0), *_lease(lease, now), name), ONE, False),
    ]
    if terms.tokens is not None:
        steps.append((SPENT, (name, name, budget), ALL, False))
        steps.append((FIRST_COST, (name, name), ONE, False))
    return steps


def _admission(terms: LimitTerms, lease: Lease | None) -> Callable[[list[Any]], Admission]:
    """What the answers of a batch ending in :func:`_admit`'s statements tell the asker."""

    def outcome(answers: list[Any]) -> Admission:
        tokens = terms.tokens is not None
        granted, state = answers[-4:-2] if tokens else answers[-2:]
        clock, paused_until, oldest_full, lease_ok = state
        if lease is not None and not lease_ok:
            raise LeaseLostError(lease.run_id, lease.epoch)
        next_at: float | None = None
        if terms.calls is not None and oldest_full is not None:
            next_at = oldest_full + terms.per
        if tokens:
            spent, first = answers[-2:]
            if first is not None:
                _, tokens_at = within_budget(terms, [first[0]], spent)
                if tokens_at is not None:
                    next_at = max(next_at or 0.0, tokens_at)
        if paused_until is not None and paused_until > clock:
            next_at = max(next_at or 0.0, paused_until)
        return Admission(tuple(row[0] for row in granted), next_at)

    return outcome


def take(terms: LimitTerms, entry: SlotEntry, lease: Lease, gate: str, now: float) -> Batch:
    """Enter ``entry`` in its line under ``lease``, then admit.

    Fenced: under a lease that is not current nothing enters, and the
    batch's outcome raises ``LeaseLostError``.
    """
    name, call_id = terms.name, entry.call_id
    owned = _lease(lease, now)
    steps = [
        *_lock(terms, now),
        (
            KEEP_GRANT,
            (f"{call_id}#{now!r}", name, name, call_id, name, terms.window, lease.epoch, *owned),
            NOTHING,
            False,
        ),
        (
            REENTER,
            (lease.epoch, gate, entry.cost, name, call_id, lease.epoch, *owned),
            NOTHING,
            False,
        ),
        (
            ENTER,
            (
                name,
                call_id,
                lease.run_id,
                lease.epoch,
                entry.key,
                entry.priority,
                name,
                entry.key,
                name,
                name,
                entry.cost,
                name,
                gate,
                *owned,
                name,
                call_id,
            ),
            NOTHING,
            False,
        ),
        (RETELL, (gate, name, call_id, lease.epoch, *owned), NOTHING, False),
        *_admit(terms, gate, lease, now),
    ]
    return Batch(steps, _admission(terms, lease))


def admit(terms: LimitTerms, gate: str, now: float) -> Batch:
    """Grant the free slots to the head of the line; what ``gate`` was granted."""
    return Batch([*_lock(terms, now), *_admit(terms, gate, None, now)], _admission(terms, None))


def release(
    terms: LimitTerms, call_id: str, lease: Lease, gate: str, now: float, used: float | None = None
) -> Batch:
    """Give a slot back under the lease it was taken with (counting what it used), then admit."""
    name = terms.name
    steps = [
        *_lock(terms, now),
        (RELEASE, (name, used, name, call_id, lease.epoch), NOTHING, False),
        *_admit(terms, gate, None, now),
    ]
    return Batch(steps, _admission(terms, None))


def leave(limit: str, call_id: str, lease: Lease) -> Batch:
    """Take a waiting call out of its line, under its lease."""
    return Batch([(LEAVE, (limit, call_id, lease.epoch), NOTHING, False)], lambda _: None)


def slow(limit: str, until: float) -> Batch:
    """Grant no slot of ``limit`` before ``until``."""
    steps: list[Step] = [
        (ENSURE_LINE, (limit,), NOTHING, False),
        (SLOW, (until, limit, until), NOTHING, False),
    ]
    return Batch(steps, lambda _: None)


def line_waits(rows: Sequence[Sequence[Any]]) -> list[LineWait]:
    """The waits of :data:`WAITS`' rows, each with when a slot is next expected."""
    found = []
    for (
        run_id,
        limit,
        call_id,
        key,
        entered_at,
        position,
        paused,
        calls,
        per,
        oldest,
        count,
    ) in rows:
        next_at = None
        if calls is not None and oldest is not None and count >= calls:
            next_at = oldest + per
        if paused is not None and paused > time.time():
            next_at = max(next_at or 0.0, paused)
        found.append(LineWait(run_id, limit, call_id, key, position, entered_at, next_at))
    return found


class SqlLimits(ABC):
    """:class:`~treadle._stores._limit_roles.LimitSlots` over ``treadle_limits`` and its lines."""

    @abstractmethod
    async def _limit_batch(self, batch: Batch) -> Any:
        """Send ``batch``'s statements in one transaction of their own; their outcome."""

    @abstractmethod
    async def _select(self, template: str, parameters: tuple[Any, ...]) -> list[Sequence[Any]]:
        """Run one SELECT written in the neutral SQL dialect; return its rows."""

    async def take_slot(
        self, terms: LimitTerms, entry: SlotEntry, lease: Lease, gate: str
    ) -> Admission:
        """See :meth:`~treadle._stores._limit_roles.LimitSlots.take_slot`."""
        admission: Admission = await self._limit_batch(take(terms, entry, lease, gate, time.time()))
        return admission

    async def admit_slots(self, terms: LimitTerms, gate: str) -> Admission:
        """See :meth:`~treadle._stores._limit_roles.LimitSlots.admit_slots`."""
        admission: Admission = await self._limit_batch(admit(terms, gate, time.time()))
        return admission

    async def release_slot(
        self, terms: LimitTerms, call_id: str, lease: Lease, gate: str, used: float | None = None
    ) -> Admission:
        """See :meth:`~treadle._stores._limit_roles.LimitSlots.release_slot`."""
        admission: Admission = await self._limit_batch(
            release(terms, call_id, lease, gate, time.time(), used)
        )
        return admission

    async def leave_line(self, limit: str, call_id: str, lease: Lease) -> None:
        """See :meth:`~treadle._stores._limit_roles.LimitSlots.leave_line`."""
        await self._limit_batch(leave(limit, call_id, lease))

    async def slow_limit(self, limit: str, until: float) -> None:
        """See :meth:`~treadle._stores._limit_roles.LimitSlots.slow_limit`."""
        await self._limit_batch(slow(limit, until))

    async def line_waits(self, run_ids: Sequence[str]) -> list[LineWait]:
        """See :meth:`~treadle._stores._limit_roles.LimitSlots.line_waits`."""
        if not run_ids:
            return []
        now = time.time()
        rows = await self._select(WAITS, (now, now, json.dumps(list(run_ids))))
        return line_waits(rows)


class SqliteLimits(SqlLimits):
    """Limit lines in a SQLite file: each change one write on the store's writer thread."""

    @abstractmethod
    async def _call(
        self, work: Callable[[sqlite3.Connection], _T], *, write: bool, group: bool = False
    ) -> _T:
        """Run ``work`` on the store's connection (``SqliteStore._call``)."""

    async def _limit_batch(self, batch: Batch) -> Any:
        from treadle._stores._sqlite_writes import run_batch  # noqa: PLC0415 - the SQLite driver

        answers = await self._call(lambda c: run_batch(batch.steps, c), write=True)
        return batch.outcome(answers)


class PostgresLimits(SqlLimits):
    """Limit lines in PostgreSQL: each change one transaction on a pooled connection."""

    @abstractmethod
    async def transact(self, work: Callable[[Any], Awaitable[_T]], *, write: bool = True) -> _T:
        """Run ``work`` on a pooled connection (``PostgresStore.transact``)."""

    async def _limit_batch(self, batch: Batch) -> Any:
        from treadle._stores._postgres_writes import run_batch  # noqa: PLC0415 - psycopg's

        # Not in a transaction of the pool's: the batch is one implicit transaction itself.
        answers = await self.transact(lambda c: run_batch(batch.steps, c), write=False)
        return batch.outcome(answers)
