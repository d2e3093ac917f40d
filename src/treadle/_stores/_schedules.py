"""Schedules in the store: their rows, the record of their ticks, and who decides a tick.

A schedule's row keeps what it is (its spec, as JSON the store never
reads), whether it is paused, and its **cursor**: the nominal time of the
next tick not yet decided (``next_at``), when that tick is due
(``fire_at``, after jitter), the ticks held back for a running run
(``buffered``) and the run it started last (``last_run_id``). Every change
moves its ``revision`` on.

A tick is decided by :meth:`ScheduleBook.decide_ticks`: in one
transaction, the cursor moves on *if the revision is still the one the
decider read*, and the tick's row goes in, keyed by the schedule and its
nominal time. A second process deciding the same tick finds the revision
moved and changes nothing: the store decides, once, what each tick does.
The run a started tick names is then created under an id made of the
schedule and the nominal time, which the store also keeps unique, so
creating it twice (a process that died between the decision and the run,
and the one that finishes its work) makes one run; :meth:`mark_started`
notes that it exists.

Every change (create, change, pause, unpause, trigger, backfill, delete,
and each tick decided) takes the actor making it and writes its audit
entry in the same transaction (``schedule_created``, ...,
``schedule_ticked``; see :mod:`treadle._stores._audit`), the schedule's id
in its detail: no role method lets a caller change a schedule unnamed.
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from treadle._exceptions import ScheduleExistsError, ScheduleNotFoundError
from treadle._stores import _memory_events
from treadle._stores._audit import Recorded

if TYPE_CHECKING:
    from collections.abc import Collection, Mapping, Sequence

    from treadle._stores._audit import AuditEntry
    from treadle._stores._memory_ownership import MemoryRun
    from treadle._values._actors import Actor

TICK_ACTIONS = ("started", "skipped", "missed")
"""What a decided tick did: started its run, was skipped (overlap), or came too late (catch-up)."""


@dataclass(frozen=True, slots=True)
class ScheduleCursor:
    """Where a schedule stands: the next tick to decide and what waits for a running run.

    Attributes:
        next_at: Nominal time of the next tick not yet decided (``None``: none).
        fire_at: When that tick is due (its time plus its jitter).
        buffered: Nominal times of ticks held for the running run to end, oldest first.
        last_run_id: The run the schedule started last (``None``: none yet).
    """

    next_at: float | None
    fire_at: float | None
    buffered: tuple[float, ...] = ()
    last_run_id: str | None = None


@dataclass(frozen=True, slots=True)
class ScheduleRow:
    """A schedule as the store keeps it.

    Attributes:
        schedule_id: Its id, unique in the store.
        workflow: The name of the workflow it starts.
        spec: The schedule itself, as JSON text (``Schedule.to_json``).
        paused: Whether ticks are held (none is decided while paused).
        note: Why it was paused, as the pauser said (``None``: nothing said).
        cursor: Where it stands (:class:`ScheduleCursor`).
        revision: Moves on with every change; a tick is decided against it.
        created_at: When it was created (Unix seconds).
        created_by: Who created it (an actor's label).
        updated_at: When it last changed.
        updated_by: Who changed it last (an actor's label; a tick decided
            changes the cursor only: the audit log records it, by the
            schedule as a service).
    """

    schedule_id: str
    workflow: str
    spec: str
    paused: bool
    note: str | None
    cursor: ScheduleCursor
    revision: int
    created_at: float
    created_by: str
    updated_at: float
    updated_by: str

    def spec_json(self) -> dict[str, Any]:
        """The spec as data."""
        data: dict[str, Any] = json.loads(self.spec)
        return data


@dataclass(frozen=True, slots=True)
class TickRow:
    """One decided tick of a schedule.

    Attributes:
        schedule_id: The schedule.
        nominal_at: The tick's nominal time (Unix seconds).
        source: What made it: ``"schedule"`` (its time came), ``"trigger"``
            (someone asked for a run now) or ``"backfill"``.
        action: What it did (one of :data:`TICK_ACTIONS`).
        run_id: The run it started (``None`` unless ``started``).
        decided_at: When it was decided.
        detail: A sentence on why (``"the previous run was still running"``).
        started: Whether its run is known to exist (see :meth:`ScheduleBook.mark_started`).
        run_status: The status of its run when read (``None``: no run, or gone).
        run_outcome: Its run's named outcome, when it has one.
    """

    schedule_id: str
    nominal_at: float
    source: str
    action: str
    run_id: str | None
    decided_at: float
    detail: str = ""
    started: bool = False
    run_status: str | None = None
    run_outcome: str | None = None


class ScheduleBook(Protocol):
    """What the store port asks of a store about schedules (a part of ``Store``)."""

    async def put_schedule(
        self,
        row: ScheduleRow,
        *,
        actor: Actor,
        action: str,
        revision: int | None,
        detail: Mapping[str, Any] | None = None,
    ) -> ScheduleRow | None:
        """Create (``revision=None``) or replace the schedule, recording ``action`` by ``actor``.

        ``detail`` goes into the audit entry beside the schedule's id (what
        a change changed). A replacement applies only if the stored revision is ``revision``;
        ``None`` is returned when it moved meanwhile (read again and retry).
        The row stored (its revision moved on) is returned.

        Raises:
            ScheduleExistsError: Creating an id that is taken.
            ScheduleNotFoundError: Replacing a schedule that is not there.
        """
        ...

    async def get_schedule(self, schedule_id: str) -> ScheduleRow:
        """The schedule's row.

        Raises:
            ScheduleNotFoundError: No such schedule.
        """
        ...

    async def list_schedules(self, *, workflow: str | None = None) -> list[ScheduleRow]:
        """Every schedule (of ``workflow``), by id."""
        ...

    async def delete_schedule(self, schedule_id: str, *, actor: Actor) -> None:
        """Delete the schedule and its ticks' record (not its runs), recording who did.

        Raises:
            ScheduleNotFoundError: No such schedule.
        """
        ...

    async def due_schedules(
        self, now: float, workflows: Collection[str], *, limit: int
    ) -> list[ScheduleRow]:
        """Schedules of ``workflows`` with work at ``now``, earliest due first.

        That is: unpaused with a tick due (``fire_at <= now``) or ticks held
        for a running run; or with a started tick whose run is not known to
        exist (its decider may have died before creating it).
        """
        ...

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
        """Record ticks and move the cursor, in one transaction; the nominal times inserted.

        With ``cursor``, the schedule's cursor becomes it only if its revision
        is ``revision`` (and the revision moves on); else nothing is written
        and ``None`` is returned. A tick whose nominal time the schedule has
        recorded already is not inserted again (not among those returned),
        except that a started tick replaces one recorded as skipped or missed
        (a backfill starts what was not).
        ``action`` is recorded by ``actor`` in the same transaction (not
        when the revision had moved: nothing is written then):
        ``schedule_ticked`` by the schedule itself (a service, see
        :func:`~treadle._workflow._ticker.schedule_actor`) for the ticks its
        time brought, ``schedule_triggered`` or ``schedule_backfilled`` by
        whoever asked.

        Raises:
            ScheduleNotFoundError: No such schedule.
        """
        ...

    async def list_ticks(
        self, schedule_id: str, *, limit: int = 50, unstarted: bool = False
    ) -> list[TickRow]:
        """The schedule's ticks, newest first, with their runs' status.

        ``unstarted``: only the started ticks whose run is not known to
        exist, oldest first.
        """
        ...

    async def mark_started(self, schedule_id: str, nominals: Sequence[float]) -> None:
        """Note that the runs of these started ticks exist."""
        ...


def recorded(schedule_id: str, action: str, actor: Actor, detail: dict[str, Any]) -> Recorded:
    """The audit entry of a change to a schedule (not a run's: no run's log gets it)."""
    return Recorded(None, action, actor, {"schedule": schedule_id, **detail}, logged=False)


def created_row(
    schedule_id: str, workflow: str, spec: str, cursor: ScheduleCursor, actor: Actor
) -> ScheduleRow:
    """The row of a new schedule, created now by ``actor``."""
    now = time.time()
    label = actor.label
    return ScheduleRow(
        schedule_id, workflow, spec, paused=False, note=None, cursor=cursor, revision=1,
        created_at=now, created_by=label, updated_at=now, updated_by=label,
    )  # fmt: skip


def nominal_ms(nominal: float) -> int:
    """A nominal time as the store keys it: whole milliseconds."""
    return round(nominal * 1000)


class MemorySchedules:
    """:class:`ScheduleBook` in memory, for ``MemoryStore`` (under its lock)."""

    _lock: Any
    _runs: dict[str, MemoryRun]
    _audit: list[AuditEntry]

    def _note(self, schedule_id: str, action: str, actor: Actor, detail: dict[str, Any]) -> None:
        """Write a change's audit entry (the caller holds the lock with its effect)."""
        entry = recorded(schedule_id, action, actor, detail)
        _memory_events.record(self._audit, self._runs, [entry], time.time())

    def _schedule_rows(self) -> tuple[dict[str, ScheduleRow], dict[str, dict[int, TickRow]]]:
        found: tuple[dict[str, ScheduleRow], dict[str, dict[int, TickRow]]] | None = getattr(
            self, "_schedules_kept", None
        )
        if found is None:
            found = ({}, {})
            self._schedules_kept = found
        return found

    async def put_schedule(
        self,
        row: ScheduleRow,
        *,
        actor: Actor,
        action: str,
        revision: int | None,
        detail: Mapping[str, Any] | None = None,
    ) -> ScheduleRow | None:
        """See :meth:`ScheduleBook.put_schedule`."""
        with self._lock:
            rows, ticks = self._schedule_rows()
            kept = rows.get(row.schedule_id)
            if revision is None:
                if kept is not None:
                    raise ScheduleExistsError(row.schedule_id)
                stored = dataclasses.replace(row, revision=1)
                ticks[row.schedule_id] = {}
            else:
                if kept is None:
                    raise ScheduleNotFoundError(row.schedule_id)
                if kept.revision != revision:
                    return None
                stored = dataclasses.replace(
                    row, revision=revision + 1, updated_at=time.time(), updated_by=actor.label
                )
            rows[row.schedule_id] = stored
            self._note(row.schedule_id, action, actor, dict(detail or {}))
            return stored

    async def get_schedule(self, schedule_id: str) -> ScheduleRow:
        """See :meth:`ScheduleBook.get_schedule`."""
        with self._lock:
            kept = self._schedule_rows()[0].get(schedule_id)
        if kept is None:
            raise ScheduleNotFoundError(schedule_id)
        return kept

    async def list_schedules(self, *, workflow: str | None = None) -> list[ScheduleRow]:
        """See :meth:`ScheduleBook.list_schedules`."""
        with self._lock:
            rows = self._schedule_rows()[0]
            return [
                row
                for _, row in sorted(rows.items())
                if workflow is None or row.workflow == workflow
            ]

    async def delete_schedule(self, schedule_id: str, *, actor: Actor) -> None:
        """See :meth:`ScheduleBook.delete_schedule`."""
        with self._lock:
            rows, ticks = self._schedule_rows()
            if rows.pop(schedule_id, None) is None:
                raise ScheduleNotFoundError(schedule_id)
            ticks.pop(schedule_id, None)
            self._unstarted(schedule_id).clear()
            self._note(schedule_id, "schedule_deleted", actor, {})

    async def due_schedules(
        self, now: float, workflows: Collection[str], *, limit: int
    ) -> list[ScheduleRow]:
        """See :meth:`ScheduleBook.due_schedules`."""
        with self._lock:
            rows = self._schedule_rows()[0]
            due = [
                row
                for row in rows.values()
                if row.workflow in workflows
                and (
                    (
                        not row.paused
                        and (
                            (row.cursor.fire_at is not None and row.cursor.fire_at <= now)
                            or row.cursor.buffered
                        )
                    )
                    or self._unstarted(row.schedule_id)
                )
            ]
        due.sort(key=lambda row: (row.cursor.fire_at or 0.0, row.schedule_id))
        return due[:limit]

    def _unstarted(self, schedule_id: str) -> set[int]:
        """The keys of the schedule's started ticks whose run is not known to exist."""
        index: dict[str, set[int]] | None = getattr(self, "_schedules_unstarted", None)
        if index is None:
            index = {}
            self._schedules_unstarted = index
        return index.setdefault(schedule_id, set())

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
        """See :meth:`ScheduleBook.decide_ticks`."""
        with self._lock:
            rows, kept_ticks = self._schedule_rows()
            kept = rows.get(schedule_id)
            if kept is None:
                raise ScheduleNotFoundError(schedule_id)
            if cursor is not None:
                if kept.revision != revision:
                    return None
                rows[schedule_id] = dataclasses.replace(
                    kept, cursor=cursor, revision=kept.revision + 1
                )
            mine = kept_ticks.setdefault(schedule_id, {})
            inserted: list[float] = []
            for tick in ticks:
                key = nominal_ms(tick.nominal_at)
                kept_tick = mine.get(key)
                # A started tick (a backfill's) replaces a skipped or missed one, never a start.
                if kept_tick is None or (
                    kept_tick.action != "started" and tick.action == "started"
                ):
                    mine[key] = tick
                    inserted.append(tick.nominal_at)
                    if tick.action == "started" and not tick.started:
                        self._unstarted(schedule_id).add(key)
            self._note(schedule_id, action, actor, {"ticks": len(inserted)})
            return inserted

    async def list_ticks(
        self, schedule_id: str, *, limit: int = 50, unstarted: bool = False
    ) -> list[TickRow]:
        """See :meth:`ScheduleBook.list_ticks`."""
        with self._lock:
            mine = list(self._schedule_rows()[1].get(schedule_id, {}).values())
            if unstarted:
                keys = sorted(self._unstarted(schedule_id))
                kept = self._schedule_rows()[1].get(schedule_id, {})
                chosen = [kept[key] for key in keys if key in kept]
            else:
                chosen = sorted(mine, key=lambda t: t.nominal_at, reverse=True)
            chosen = chosen[:limit]
            return [self._with_run(tick) for tick in chosen]

    def _with_run(self, tick: TickRow) -> TickRow:
        run = self._runs.get(tick.run_id) if tick.run_id is not None else None
        if run is None:
            return tick
        record = run.record
        return dataclasses.replace(tick, run_status=record.status, run_outcome=record.outcome)

    async def mark_started(self, schedule_id: str, nominals: Sequence[float]) -> None:
        """See :meth:`ScheduleBook.mark_started`."""
        with self._lock:
            mine = self._schedule_rows()[1].get(schedule_id, {})
            waiting = self._unstarted(schedule_id)
            for nominal in nominals:
                key = nominal_ms(nominal)
                waiting.discard(key)
                if key in mine:
                    mine[key] = dataclasses.replace(mine[key], started=True)
