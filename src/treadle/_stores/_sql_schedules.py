"""Schedules on the SQL stores: :class:`~treadle._stores._schedules.ScheduleBook`, written once.

The statements are this module's (neutral dialect), and so are the plans
of its writes (see :mod:`treadle._stores._write_steps`): a backend
supplies how one SELECT is run and how a plan is driven in a transaction
of its own (:class:`SqliteSchedules`, :class:`PostgresSchedules`).

A tick is decided by one conditional UPDATE of the schedule's row (its
revision must be the one the decider read) followed, in the same
transaction, by the INSERTs of its ticks, keyed by the schedule and the
nominal time: on PostgreSQL a second decider's UPDATE waits for the first
to commit, then finds the revision moved and changes nothing.
"""

from __future__ import annotations

import json
import time
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, TypeVar

from treadle._exceptions import ScheduleExistsError, ScheduleNotFoundError
from treadle._stores import _postgres_writes, _sqlite_writes
from treadle._stores._schedules import ScheduleCursor, ScheduleRow, TickRow, nominal_ms, recorded
from treadle._stores._write_parts import record
from treadle._stores._write_steps import COUNT, NOTHING, ONE, POSTGRES_WRITES, SQLITE_WRITES

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence

    from treadle._stores._write_steps import Backend, Plan
    from treadle._values._actors import Actor

_T = TypeVar("_T")

# --- the statements (neutral dialect) ---------------------------------------------------

_COLUMNS = (
    "schedule_id, workflow, spec, paused, note, next_at, fire_at, buffered, last_run_id,"
    " revision, created_at, created_by, updated_at, updated_by"
)
_S_COLUMNS = ", ".join(f"s.{name.strip()}" for name in _COLUMNS.split(","))
_TICK_COLUMNS = "schedule_id, nominal_ms, source, action, run_id, decided_at, detail, started"
_T_COLUMNS = ", ".join(f"t.{name.strip()}" for name in _TICK_COLUMNS.split(","))

INSERT_SCHEDULE = f"""
INSERT INTO treadle_schedules ({_COLUMNS})
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?, ?, ?)
ON CONFLICT DO NOTHING"""  # noqa: S608 - constants only

REPLACE_SCHEDULE = """
UPDATE treadle_schedules SET workflow = ?, spec = ?, paused = ?, note = ?, next_at = ?,
    fire_at = ?, buffered = ?, last_run_id = ?, revision = revision + 1, updated_at = ?,
    updated_by = ?
WHERE schedule_id = ? AND revision = ?"""

MOVE_CURSOR = """
UPDATE treadle_schedules SET next_at = ?, fire_at = ?, buffered = ?, last_run_id = ?,
    revision = revision + 1
WHERE schedule_id = ? AND revision = ?"""

SELECT_REVISION = "SELECT revision FROM treadle_schedules WHERE schedule_id = ?"
SELECT_SCHEDULE = f"SELECT {_COLUMNS} FROM treadle_schedules WHERE schedule_id = ?"  # noqa: S608
SELECT_SCHEDULES = f"SELECT {_COLUMNS} FROM treadle_schedules ORDER BY schedule_id"  # noqa: S608
SELECT_WORKFLOW_SCHEDULES = (
    f"SELECT {_COLUMNS} FROM treadle_schedules WHERE workflow = ? ORDER BY schedule_id"  # noqa: S608
)

# (JSON array of workflow names, now, limit)
SELECT_DUE = f"""
SELECT {_S_COLUMNS} FROM treadle_schedules s
WHERE s.workflow IN ({{ids}})
AND ((s.paused = 0 AND (s.fire_at <= ? OR s.buffered <> '[]'))
    OR EXISTS (SELECT 1 FROM treadle_schedule_ticks t WHERE t.schedule_id = s.schedule_id
               AND t.action = 'started' AND t.started = 0))
ORDER BY COALESCE(s.fire_at, 0), s.schedule_id
LIMIT ?"""  # noqa: S608 - constants only

DELETE_TICKS = "DELETE FROM treadle_schedule_ticks WHERE schedule_id = ?"
DELETE_SCHEDULE = "DELETE FROM treadle_schedules WHERE schedule_id = ?"

# A tick's row goes in once; a started tick (a backfill's) replaces one that was
# skipped or missed, never one that started: a changed row counts as inserted.
INSERT_TICK = f"""
INSERT INTO treadle_schedule_ticks ({_TICK_COLUMNS})
VALUES (?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (schedule_id, nominal_ms) DO UPDATE SET source = excluded.source,
    action = excluded.action, run_id = excluded.run_id, decided_at = excluded.decided_at,
    detail = excluded.detail, started = excluded.started
WHERE treadle_schedule_ticks.action <> 'started' AND excluded.action = 'started'"""  # noqa: S608

_SELECT_TICKS = f"""
SELECT {_T_COLUMNS}, r.status, r.outcome FROM treadle_schedule_ticks t
LEFT JOIN treadle_runs r ON r.run_id = t.run_id
WHERE t.schedule_id = ?"""  # noqa: S608 - constants only
SELECT_TICKS = _SELECT_TICKS + " ORDER BY t.nominal_ms DESC LIMIT ?"
SELECT_UNSTARTED = (
    _SELECT_TICKS + " AND t.action = 'started' AND t.started = 0 ORDER BY t.nominal_ms LIMIT ?"
)

MARK_STARTED = (
    "UPDATE treadle_schedule_ticks SET started = 1 WHERE schedule_id = ? AND nominal_ms = ?"
)


# --- rows -----------------------------------------------------------------------------


def schedule_of(row: Sequence[Any]) -> ScheduleRow:
    """A :class:`ScheduleRow` from a row of :data:`_COLUMNS`."""
    (sid, workflow, spec, paused, note, next_at, fire_at, buffered, last_run) = row[:9]
    revision, created_at, created_by, updated_at, updated_by = row[9:]
    cursor = ScheduleCursor(
        None if next_at is None else float(next_at),
        None if fire_at is None else float(fire_at),
        tuple(float(x) for x in json.loads(buffered)),
        last_run,
    )
    return ScheduleRow(
        str(sid),
        str(workflow),
        str(spec),
        bool(paused),
        note,
        cursor,
        int(revision),
        float(created_at),
        str(created_by),
        float(updated_at),
        str(updated_by),
    )


def tick_of(row: Sequence[Any]) -> TickRow:
    """A :class:`TickRow` from a row of :data:`SELECT_TICKS`."""
    sid, millis, source, action, run_id, decided_at, detail, started, status, outcome = row
    return TickRow(
        str(sid),
        int(millis) / 1000,
        str(source),
        str(action),
        run_id,
        float(decided_at),
        detail or "",
        bool(started),
        status,
        outcome,
    )


def _cursor_values(cursor: ScheduleCursor) -> tuple[Any, ...]:
    return (
        cursor.next_at,
        cursor.fire_at,
        json.dumps(list(cursor.buffered)),
        cursor.last_run_id,
    )


def _tick_values(tick: TickRow) -> tuple[Any, ...]:
    return (
        tick.schedule_id,
        nominal_ms(tick.nominal_at),
        tick.source,
        tick.action,
        tick.run_id,
        tick.decided_at,
        tick.detail,
        1 if tick.started else 0,
    )


# --- the plans of the writes ----------------------------------------------------------


def put(
    row: ScheduleRow,
    actor: Actor,
    action: str,
    revision: int | None,
    detail: Mapping[str, Any],
    backend: Backend,
) -> Plan[ScheduleRow | None]:
    """Create or replace a schedule, recorded (see ``ScheduleBook.put_schedule``)."""
    now = time.time()
    paused = 1 if row.paused else 0
    if revision is None:
        values: tuple[Any, ...] = (row.schedule_id, row.workflow, row.spec, paused, row.note)
        values += (*_cursor_values(row.cursor), row.created_at, row.created_by, now, actor.label)
        if not (yield (INSERT_SCHEDULE, values, COUNT, False)):
            raise ScheduleExistsError(row.schedule_id)
        stored = 1
    else:
        values = (row.workflow, row.spec, paused, row.note, *_cursor_values(row.cursor))
        values += (now, actor.label, row.schedule_id, revision)
        if not (yield (REPLACE_SCHEDULE, values, COUNT, False)):
            if (yield (SELECT_REVISION, (row.schedule_id,), ONE, False)) is None:
                raise ScheduleNotFoundError(row.schedule_id)
            return None
        stored = revision + 1
    yield from record([recorded(row.schedule_id, action, actor, dict(detail))], now, backend)
    return ScheduleRow(
        row.schedule_id,
        row.workflow,
        row.spec,
        row.paused,
        row.note,
        row.cursor,
        stored,
        row.created_at,
        row.created_by,
        now,
        actor.label,
    )


def delete(schedule_id: str, actor: Actor, backend: Backend) -> Plan[None]:
    """Delete a schedule and its ticks' record, recorded."""
    yield (DELETE_TICKS, (schedule_id,), NOTHING, False)
    if not (yield (DELETE_SCHEDULE, (schedule_id,), COUNT, False)):
        raise ScheduleNotFoundError(schedule_id)
    yield from record([recorded(schedule_id, "schedule_deleted", actor, {})], time.time(), backend)


def decide(
    schedule_id: str,
    revision: int | None,
    cursor: ScheduleCursor | None,
    ticks: Sequence[TickRow],
    actor: Actor,
    action: str,
    backend: Backend,
) -> Plan[list[float] | None]:
    """Move the cursor (if the revision holds) and insert the ticks (see ``decide_ticks``)."""
    if cursor is not None:
        values = (*_cursor_values(cursor), schedule_id, revision)
        if not (yield (MOVE_CURSOR, values, COUNT, False)):
            if (yield (SELECT_REVISION, (schedule_id,), ONE, False)) is None:
                raise ScheduleNotFoundError(schedule_id)
            return None
    elif (yield (SELECT_REVISION, (schedule_id,), ONE, False)) is None:
        raise ScheduleNotFoundError(schedule_id)
    inserted: list[float] = []
    for tick in ticks:
        changed = yield (INSERT_TICK, _tick_values(tick), COUNT, False)
        if changed:
            inserted.append(tick.nominal_at)
    entry = recorded(schedule_id, action, actor, {"ticks": len(inserted)})
    yield from record([entry], time.time(), backend)
    return inserted


def mark(schedule_id: str, nominals: Sequence[float]) -> Plan[None]:
    """Note that the runs of these started ticks exist."""
    for nominal in nominals:
        yield (MARK_STARTED, (schedule_id, nominal_ms(nominal)), NOTHING, False)


# --- the role, over any SQL backend -----------------------------------------------------


class SqlSchedules(ABC):
    """:class:`~treadle._stores._schedules.ScheduleBook` over ``treadle_schedules``."""

    @abstractmethod
    async def _select(self, template: str, parameters: tuple[Any, ...]) -> list[Sequence[Any]]:
        """Run one SELECT written in the neutral SQL dialect; return its rows."""

    @abstractmethod
    async def _schedule_write(self, plan: Callable[[Backend], Plan[_T]]) -> _T:
        """Drive the plan ``plan`` makes for this backend, in a transaction of its own."""

    async def put_schedule(
        self,
        row: ScheduleRow,
        *,
        actor: Actor,
        action: str,
        revision: int | None,
        detail: Mapping[str, Any] | None = None,
    ) -> ScheduleRow | None:
        """See :meth:`~treadle._stores._schedules.ScheduleBook.put_schedule`."""
        noted = detail or {}
        return await self._schedule_write(lambda b: put(row, actor, action, revision, noted, b))

    async def get_schedule(self, schedule_id: str) -> ScheduleRow:
        """See :meth:`~treadle._stores._schedules.ScheduleBook.get_schedule`."""
        rows = await self._select(SELECT_SCHEDULE, (schedule_id,))
        if not rows:
            raise ScheduleNotFoundError(schedule_id)
        return schedule_of(rows[0])

    async def list_schedules(self, *, workflow: str | None = None) -> list[ScheduleRow]:
        """See :meth:`~treadle._stores._schedules.ScheduleBook.list_schedules`."""
        if workflow is None:
            rows = await self._select(SELECT_SCHEDULES, ())
        else:
            rows = await self._select(SELECT_WORKFLOW_SCHEDULES, (workflow,))
        return [schedule_of(row) for row in rows]

    async def delete_schedule(self, schedule_id: str, *, actor: Actor) -> None:
        """See :meth:`~treadle._stores._schedules.ScheduleBook.delete_schedule`."""
        await self._schedule_write(lambda b: delete(schedule_id, actor, b))

    async def due_schedules(
        self, now: float, workflows: Collection[str], *, limit: int
    ) -> list[ScheduleRow]:
        """See :meth:`~treadle._stores._schedules.ScheduleBook.due_schedules`."""
        if not workflows:
            return []
        names = json.dumps(sorted(workflows))
        return [schedule_of(r) for r in await self._select(SELECT_DUE, (names, now, limit))]

    async def decide_ticks(
        self,
        schedule_id: str,
        revision: int | None,
        cursor: ScheduleCursor | None,
        ticks: Sequence[TickRow],
        *,
        actor: Actor,
        action: str,
    ) -> list[float] | None:
        """See :meth:`~treadle._stores._schedules.ScheduleBook.decide_ticks`."""
        return await self._schedule_write(
            lambda b: decide(schedule_id, revision, cursor, ticks, actor, action, b)
        )

    async def list_ticks(
        self, schedule_id: str, *, limit: int = 50, unstarted: bool = False
    ) -> list[TickRow]:
        """See :meth:`~treadle._stores._schedules.ScheduleBook.list_ticks`."""
        query = SELECT_UNSTARTED if unstarted else SELECT_TICKS
        return [tick_of(row) for row in await self._select(query, (schedule_id, limit))]

    async def mark_started(self, schedule_id: str, nominals: Sequence[float]) -> None:
        """See :meth:`~treadle._stores._schedules.ScheduleBook.mark_started`."""
        if nominals:
            await self._schedule_write(lambda _: mark(schedule_id, nominals))


class SqliteSchedules(SqlSchedules):
    """Schedules in a SQLite file: each write one transaction on the store's writer thread."""

    @abstractmethod
    async def _call(
        self, work: Callable[[sqlite3.Connection], _T], *, write: bool, group: bool = False
    ) -> _T:
        """Run ``work`` on the store's connection (``SqliteStore._call``)."""

    async def _schedule_write(self, plan: Callable[[Backend], Plan[_T]]) -> _T:
        # A plan runs once: the work makes a new one each time the store runs it.
        return await self._call(
            lambda connection: _sqlite_writes.drive(plan(SQLITE_WRITES), connection), write=True
        )


class PostgresSchedules(SqlSchedules):
    """Schedules in PostgreSQL: each write one transaction on a pooled connection."""

    @abstractmethod
    async def transact(self, work: Callable[[Any], Awaitable[_T]], *, write: bool = True) -> _T:
        """Run ``work`` on a pooled connection (``PostgresStore.transact``)."""

    async def _schedule_write(self, plan: Callable[[Backend], Plan[_T]]) -> _T:
        return await self.transact(
            lambda connection: _postgres_writes.drive(plan(POSTGRES_WRITES), connection)
        )
