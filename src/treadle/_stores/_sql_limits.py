"""Call limits on the SQL stores: :class:`~treadle._stores._limit_roles.LimitSlots`, written once.

Each limit has a row in ``treadle_limits`` (its last terms, its arrival
counter, the turn being served, a slow-down) and its line in
``treadle_limit_slots``: a row per call waiting, holding, or released but
still inside the rate's window. Every change to a line first updates its
limit's row, which locks it (PostgreSQL) or takes the writer's lock
(SQLite): the processes deciding about one limit take turns, and each sees
what the last one granted.

The statements are this module's (neutral dialect); the plans that order
them are sans I/O, driven by ``_sqlite_writes.drive`` or
``_postgres_writes.drive`` in one transaction (see ``_write_steps.py``).
"""

from __future__ import annotations

import json
import time
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, TypeVar

from treadle._exceptions import LeaseLostError
from treadle._stores._limit_roles import Admission, LineWait, within_budget
from treadle._stores._write_steps import ALL, COUNT, NOTHING, ONE

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Awaitable, Callable, Sequence

    from treadle._stores._limit_roles import LimitTerms, SlotEntry
    from treadle._stores._records import Lease
    from treadle._stores._write_steps import Plan

_T = TypeVar("_T")

# --- statements (neutral dialect) -----------------------------------------------------

ENSURE_LINE = """
INSERT INTO treadle_limits (limit_name, arrivals, serving) VALUES (?, 0, 0)
ON CONFLICT DO NOTHING"""

# Locks the limit's row until the transaction ends, and keeps the terms last used.
LOCK_LINE = """
UPDATE treadle_limits SET concurrency = ?, calls = ?, per = ? WHERE limit_name = ?
RETURNING arrivals, serving, paused_until"""

LEASE_CURRENT = """
SELECT 1 FROM treadle_runs
WHERE run_id = ? AND owner = ? AND lease_epoch = ? AND lease_until > ?"""

FIND_CALL = """
SELECT lease_epoch, granted_at, released_at FROM treadle_limit_slots
WHERE limit_name = ? AND call_id = ?"""

# A call tried again, or its run taken over: it waits again, in the place it had.
REENTER = """
UPDATE treadle_limit_slots
SET lease_epoch = ?, granted_at = NULL, released_at = NULL, gate = ?, noticed = 0, cost = ?
WHERE limit_name = ? AND call_id = ?"""

# A call entered again whose earlier grant is still inside the window: that grant
# stays counted, as a released row of its own (pruned with the others).
KEEP_GRANT = """
INSERT INTO treadle_limit_slots
(limit_name, call_id, run_id, lease_epoch, call_key, priority, turn, arrival, cost,
 entered_at, gate, noticed, granted_at, released_at)
SELECT limit_name, ?, run_id, lease_epoch, call_key, priority, turn, arrival, cost,
 entered_at, gate, 1, granted_at, COALESCE(released_at, ?)
FROM treadle_limit_slots WHERE limit_name = ? AND call_id = ? AND granted_at > ?"""

RETELL = """
UPDATE treadle_limit_slots SET gate = ?, noticed = 0 WHERE limit_name = ? AND call_id = ?"""

LAST_TURN = """
SELECT MAX(turn) FROM treadle_limit_slots
WHERE limit_name = ? AND call_key = ? AND granted_at IS NULL"""

ENTER = """
INSERT INTO treadle_limit_slots
(limit_name, call_id, run_id, lease_epoch, call_key, priority, turn, arrival, cost,
 entered_at, gate, noticed)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0)"""

COUNT_ARRIVAL = "UPDATE treadle_limits SET arrivals = ? WHERE limit_name = ?"

# Whether a slot row's lease is still its run's, and current.
_CURRENT = """EXISTS (SELECT 1 FROM treadle_runs AS r
WHERE r.run_id = treadle_limit_slots.run_id AND r.lease_epoch = treadle_limit_slots.lease_epoch
AND r.owner IS NOT NULL AND r.lease_until > ?)"""

# A holder whose lease is gone (its process died or lost the run) holds nothing more.
FREE_LOST = f"""
UPDATE treadle_limit_slots SET released_at = ?
WHERE limit_name = ? AND granted_at IS NOT NULL AND released_at IS NULL AND NOT {_CURRENT}"""  # noqa: S608 - constants only

PRUNE = """
DELETE FROM treadle_limit_slots
WHERE limit_name = ? AND released_at IS NOT NULL AND granted_at <= ?"""

HELD = """
SELECT COUNT(*) FROM treadle_limit_slots
WHERE limit_name = ? AND granted_at IS NOT NULL AND released_at IS NULL"""

RECENT = """
SELECT granted_at FROM treadle_limit_slots WHERE limit_name = ? AND granted_at > ?
ORDER BY granted_at"""

HEAD = f"""
SELECT call_id, turn, cost FROM treadle_limit_slots
WHERE limit_name = ? AND granted_at IS NULL AND {_CURRENT}
ORDER BY priority DESC, turn, arrival LIMIT ?"""  # noqa: S608 - constants only

GRANT = """
UPDATE treadle_limit_slots SET granted_at = ? WHERE limit_name = ? AND call_id IN ({ids})"""

SERVE = "UPDATE treadle_limits SET serving = ? WHERE limit_name = ? AND serving < ?"

NOTICE = """
UPDATE treadle_limit_slots SET noticed = 1
WHERE limit_name = ? AND gate = ? AND noticed = 0
AND granted_at IS NOT NULL AND released_at IS NULL
RETURNING call_id"""

RELEASE = """
UPDATE treadle_limit_slots SET released_at = ?, cost = COALESCE(?, cost)
WHERE limit_name = ? AND call_id = ? AND lease_epoch = ?
AND granted_at IS NOT NULL AND released_at IS NULL"""

# What the calls granted inside the token budget's window used (their estimates until released).
SPENT = """
SELECT granted_at, cost FROM treadle_limit_slots WHERE limit_name = ? AND granted_at > ?
ORDER BY granted_at"""

LEAVE = """
DELETE FROM treadle_limit_slots
WHERE limit_name = ? AND call_id = ? AND lease_epoch = ? AND granted_at IS NULL"""

SLOW = """
UPDATE treadle_limits SET paused_until = ?
WHERE limit_name = ? AND (paused_until IS NULL OR paused_until < ?)"""

WAITS = """
SELECT s.run_id, s.limit_name, s.call_id, s.call_key, s.entered_at,
  (SELECT COUNT(*) FROM treadle_limit_slots AS o
   WHERE o.limit_name = s.limit_name AND o.granted_at IS NULL
   AND (o.priority > s.priority OR (o.priority = s.priority
        AND (o.turn < s.turn OR (o.turn = s.turn AND o.arrival < s.arrival))))),
  l.paused_until, l.calls, l.per,
  (SELECT MIN(g.granted_at) FROM treadle_limit_slots AS g
   WHERE g.limit_name = s.limit_name AND g.granted_at > ? - l.per),
  (SELECT COUNT(*) FROM treadle_limit_slots AS c
   WHERE c.limit_name = s.limit_name AND c.granted_at > ? - l.per)
FROM treadle_limit_slots AS s JOIN treadle_limits AS l ON l.limit_name = s.limit_name
WHERE s.granted_at IS NULL AND s.run_id IN ({ids})
ORDER BY s.run_id, s.limit_name"""


# --- plans ------------------------------------------------------------------------------
def _lock(terms: LimitTerms, clock: Callable[[], float]) -> Plan[tuple[Any, float]]:
    """Lock the limit's row; its row and the time, read once the lock is held.

    Read before, the time could be older than that of a process that held
    the lock meanwhile: its grants stamped later than ours, its pruning of
    grants older than its window dropping some still inside ours (two
    workers granted 26 calls within a second of a limit of 25 so).
    """
    yield ENSURE_LINE, (terms.name,), NOTHING, False
    row = yield (
        LOCK_LINE,
        (terms.concurrency, terms.calls, terms.per, terms.name),
        ONE,
        False,
    )
    return row, clock()


def take(
    terms: LimitTerms, entry: SlotEntry, lease: Lease, gate: str, clock: Callable[[], float]
) -> Plan[Admission]:
    """Enter ``entry`` in its line under ``lease`` (fenced), then admit."""
    (arrivals, serving, paused_until), now = yield from _lock(terms, clock)
    current = yield LEASE_CURRENT, (lease.run_id, lease.owner, lease.epoch, now), ONE, False
    if current is None:
        raise LeaseLostError(lease.run_id, lease.epoch)
    found = yield FIND_CALL, (terms.name, entry.call_id), ONE, False
    if found is None:
        last = yield LAST_TURN, (terms.name, entry.key), ONE, False
        turn = max(serving, (last[0] if last[0] is not None else -1) + 1)
        arrivals += 1
        yield (
            ENTER,
            (
                terms.name,
                entry.call_id,
                lease.run_id,
                lease.epoch,
                entry.key,
                entry.priority,
                turn,
                arrivals,
                entry.cost,
                now,
                gate,
            ),
            NOTHING,
            False,
        )
        yield COUNT_ARRIVAL, (arrivals, terms.name), NOTHING, False
    elif found[2] is not None or found[0] != lease.epoch:
        if found[1] is not None:  # its earlier grant counts against the rate until it ages out
            kept = (f"{entry.call_id}#{now!r}", now, terms.name, entry.call_id, now - terms.window)
            yield KEEP_GRANT, kept, COUNT, False
        yield REENTER, (lease.epoch, gate, entry.cost, terms.name, entry.call_id), NOTHING, False
    else:
        yield RETELL, (gate, terms.name, entry.call_id), NOTHING, False
    return (yield from _admit(terms, gate, now, paused_until))


def admit(terms: LimitTerms, gate: str, clock: Callable[[], float]) -> Plan[Admission]:
    """Grant the free slots to the head of the line; what ``gate`` was granted."""
    row, now = yield from _lock(terms, clock)
    return (yield from _admit(terms, gate, now, row[2]))


def release(
    terms: LimitTerms,
    call_id: str,
    lease: Lease,
    gate: str,
    clock: Callable[[], float],
    used: float | None = None,
) -> Plan[Admission]:
    """Give a slot back under the lease it was taken with (counting what it used), then admit."""
    row, now = yield from _lock(terms, clock)
    yield RELEASE, (now, used, terms.name, call_id, lease.epoch), COUNT, False
    return (yield from _admit(terms, gate, now, row[2]))


def _admit(terms: LimitTerms, gate: str, now: float, paused_until: float | None) -> Plan[Admission]:
    name = terms.name
    window = terms.per if terms.calls is not None else 0.0
    yield FREE_LOST, (now, name, now), COUNT, False
    yield PRUNE, (name, now - terms.window), COUNT, False
    held = (yield HELD, (name,), ONE, False)[0]
    free = terms.concurrency - held if terms.concurrency is not None else 1 << 30
    recent: list[float] = []
    if terms.calls is not None:
        recent = [row[0] for row in (yield RECENT, (name, now - window), ALL, False)]
        free = min(free, terms.calls - len(recent))
    paused = paused_until is not None and paused_until > now
    tokens_at: float | None = None
    if free > 0 and not paused:
        head = yield HEAD, (name, now, free), ALL, False
        if head and terms.tokens is not None:
            spent = yield SPENT, (name, now - terms.tokens_per), ALL, False
            fit, tokens_at = within_budget(terms, [row[2] for row in head], spent)
            head = head[:fit]
        if head:
            ids = json.dumps([row[0] for row in head])
            yield GRANT, (now, name, ids), NOTHING, False
            turn = max(row[1] for row in head)
            yield SERVE, (turn, name, turn), NOTHING, False
            recent.extend(now for _ in head)
    next_at: float | None = None
    if terms.calls is not None and len(recent) >= terms.calls:
        next_at = recent[len(recent) - terms.calls] + window
    if tokens_at is not None:
        next_at = max(next_at or 0.0, tokens_at)
    if paused_until is not None and paused_until > now:
        next_at = max(next_at or 0.0, paused_until)
    granted = yield NOTICE, (name, gate), ALL, False
    return Admission(tuple(row[0] for row in granted), next_at)


def leave(limit: str, call_id: str, lease: Lease) -> Plan[None]:
    """Take a waiting call out of its line, under its lease."""
    yield LEAVE, (limit, call_id, lease.epoch), COUNT, False


def slow(limit: str, until: float) -> Plan[None]:
    """Grant no slot of ``limit`` before ``until``."""
    yield ENSURE_LINE, (limit,), NOTHING, False
    yield SLOW, (until, limit, until), COUNT, False


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
    async def _limit_write(self, plan: Callable[[], Plan[_T]]) -> _T:
        """Drive the plan ``plan()`` makes in one transaction of its own."""

    @abstractmethod
    async def _select(self, template: str, parameters: tuple[Any, ...]) -> list[Sequence[Any]]:
        """Run one SELECT written in the neutral SQL dialect; return its rows."""

    async def take_slot(
        self, terms: LimitTerms, entry: SlotEntry, lease: Lease, gate: str
    ) -> Admission:
        """See :meth:`~treadle._stores._limit_roles.LimitSlots.take_slot`."""
        return await self._limit_write(lambda: take(terms, entry, lease, gate, time.time))

    async def admit_slots(self, terms: LimitTerms, gate: str) -> Admission:
        """See :meth:`~treadle._stores._limit_roles.LimitSlots.admit_slots`."""
        return await self._limit_write(lambda: admit(terms, gate, time.time))

    async def release_slot(
        self, terms: LimitTerms, call_id: str, lease: Lease, gate: str, used: float | None = None
    ) -> Admission:
        """See :meth:`~treadle._stores._limit_roles.LimitSlots.release_slot`."""
        return await self._limit_write(
            lambda: release(terms, call_id, lease, gate, time.time, used)
        )

    async def leave_line(self, limit: str, call_id: str, lease: Lease) -> None:
        """See :meth:`~treadle._stores._limit_roles.LimitSlots.leave_line`."""
        await self._limit_write(lambda: leave(limit, call_id, lease))

    async def slow_limit(self, limit: str, until: float) -> None:
        """See :meth:`~treadle._stores._limit_roles.LimitSlots.slow_limit`."""
        await self._limit_write(lambda: slow(limit, until))

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

    async def _limit_write(self, plan: Callable[[], Plan[_T]]) -> _T:
        from treadle._stores._sqlite_writes import drive  # noqa: PLC0415 - the SQLite driver

        return await self._call(lambda connection: drive(plan(), connection), write=True)


class PostgresLimits(SqlLimits):
    """Limit lines in PostgreSQL: each change one transaction on a pooled connection."""

    @abstractmethod
    async def transact(self, work: Callable[[Any], Awaitable[_T]], *, write: bool = True) -> _T:
        """Run ``work`` on a pooled connection (``PostgresStore.transact``)."""

    async def _limit_write(self, plan: Callable[[], Plan[_T]]) -> _T:
        from treadle._stores._postgres_writes import drive  # noqa: PLC0415 - the psycopg driver

        return await self.transact(lambda connection: drive(plan(), connection))
