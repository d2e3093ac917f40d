"""The one door for changes to schedules: create, change, pause, unpause, trigger, backfill, delete.

Python (``runtime.schedules``, ``client.schedules``), the CLI and the HTTP
API all change schedules through :class:`Schedules`, which checks the
actor's right (an operator's), has the store decide (a change applies to
the revision it was computed from, else it is computed again), and has the
store record it with its actor, in the transaction of its effect.

A trigger and a backfill record started ticks; their runs are made by
whatever serves the store on its next round (a ``Runtime``, ``treadle
serve``, a worker), or at once by a :class:`~treadle._workflow._ticker.Starter`
given here (a client of PostgreSQL queues them itself).
"""

from __future__ import annotations

import builtins  # noqa: TC003 - the annotations after the method named list
import dataclasses
import json
import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from treadle._engine._clock import SystemClock
from treadle._stores._schedules import ScheduleCursor, TickRow, created_row
from treadle._values._schedules import Schedule, tick_run_id
from treadle._workflow._rights import actor_or_default, check_right
from treadle._workflow._ticker import read_schedule, start_unstarted

if TYPE_CHECKING:
    from treadle._engine._clock import Clock
    from treadle._stores._schedules import ScheduleRow
    from treadle._stores._store import Store
    from treadle._values._actors import Actor
    from treadle._workflow._ticker import Starter

_RETRIES = 20
MOST_BACKFILLED = 10_000
"""Ticks one backfill may start: a larger range is several backfills."""


@dataclass(frozen=True, slots=True)
class ScheduleInfo:
    """A stored schedule and where it stands.

    Attributes:
        schedule: The schedule.
        paused: Whether its ticks are held.
        note: What its pauser said.
        next_tick: The nominal time of its next tick (in its time zone).
        buffered: Ticks held for its running run, oldest first.
        last_run_id: The run it started last.
        created_at: When it was created (UTC).
        created_by: Who created it (an actor's label).
        updated_at: When it was last changed.
        updated_by: Who changed it last.
        revision: Moves on with each change and each tick decided.
    """

    schedule: Schedule
    paused: bool
    note: str | None
    next_tick: datetime | None
    buffered: tuple[datetime, ...]
    last_run_id: str | None
    created_at: datetime
    created_by: str
    updated_at: datetime
    updated_by: str
    revision: int

    @property
    def id(self) -> str:
        """The schedule's id."""
        return self.schedule.id

    def to_json(self) -> dict[str, Any]:
        """As the HTTP API and ``treadle schedules show --json`` give it."""
        return {
            **self.schedule.to_json(),
            "paused": self.paused,
            "note": self.note,
            "next_tick": None if self.next_tick is None else self.next_tick.isoformat(),
            "buffered": [b.isoformat() for b in self.buffered],
            "last_run_id": self.last_run_id,
            "created_at": self.created_at.isoformat(),
            "created_by": self.created_by,
            "updated_at": self.updated_at.isoformat(),
            "updated_by": self.updated_by,
            "revision": self.revision,
            "description": self.schedule.describe(),
        }


@dataclass(frozen=True, slots=True)
class ScheduleBackfill:
    """What a backfill did, or would do (``dry_run``).

    Attributes:
        ticks: Every tick in the range, in the schedule's time zone, oldest first.
        run_ids: The run each of them starts (the same a tick of that time starts).
        recorded: The ticks this backfill recorded to start (``()`` in a dry
            run; a tick already started, by its schedule or another backfill,
            is not among them).
    """

    ticks: tuple[datetime, ...]
    run_ids: tuple[str, ...]
    recorded: tuple[datetime, ...] = ()


def info_of(row: ScheduleRow) -> ScheduleInfo:
    """A stored schedule's :class:`ScheduleInfo`."""
    schedule = read_schedule(row)
    cursor = row.cursor
    return ScheduleInfo(
        schedule,
        row.paused,
        row.note,
        None if cursor.next_at is None else schedule.local(cursor.next_at),
        tuple(schedule.local(b) for b in cursor.buffered),
        cursor.last_run_id,
        datetime.fromtimestamp(row.created_at, UTC),
        row.created_by,
        datetime.fromtimestamp(row.updated_at, UTC),
        row.updated_by,
        row.revision,
    )


class Schedules:
    """The schedules of a store, changed by one actor: each change checked and recorded.

    Args:
        store: The store.
        actor: Who changes them (default: this Python program, ``python:USER@HOST``).
        clock: What "now" is (a ``Runtime``'s clock; the system's by default).
        starter: Starts a trigger's or a backfill's runs at once (else the
            next round of whatever serves the store does).
    """

    def __init__(
        self,
        store: Store,
        *,
        actor: Actor | None = None,
        clock: Clock | None = None,
        starter: Starter | None = None,
    ) -> None:
        self.store = store
        self.actor = actor_or_default(actor)
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.starter = starter

    def _check(self) -> None:
        check_right(self.actor, "schedule", None)  # refused before anything is read

    async def create(
        self, schedule: Schedule, *, paused: bool = False, note: str | None = None
    ) -> ScheduleInfo:
        """Store a new schedule; its first tick is the first of its times after now.

        Raises:
            ActionRefusedError: The actor is not an operator.
            ScheduleExistsError: Its id is taken.
        """
        self._check()
        now = self.clock.now()
        first = schedule.next_after(now)
        cursor = ScheduleCursor(first, schedule.fire_at(first))
        row = created_row(schedule.id, schedule.workflow, _spec(schedule), cursor, self.actor)
        row = dataclasses.replace(row, paused=paused, note=note)
        stored = await self.store.put_schedule(
            row, actor=self.actor, action="schedule_created", revision=None
        )
        assert stored is not None  # noqa: S101 - a creation is never stale
        return info_of(stored)

    async def update(self, schedule: Schedule | str, /, **changes: Any) -> ScheduleInfo:
        """Change a stored schedule (paused or not, it stays so); the change is recorded.

        ``update(schedule)`` replaces the stored schedule of ``schedule.id``
        with it; ``update("digest", cron="0 8 * * *", tz="Europe/Paris")``
        changes only the fields named, the others staying as stored. The
        fields are applied to the schedule as the store holds it when the
        change lands (a tick or another change landing first is read again,
        not overwritten). Giving ``cron`` clears ``every`` and the reverse:
        the times are one or the other.

        When its times (``cron``, ``every``, ``tz``, ``jitter``) change, its
        next tick is at once the first of the new times after now (a tick of
        the old times not yet decided is dropped); ticks held for a running
        run stay held. The other fields apply to the next run a tick starts.

        Raises:
            ActionRefusedError: The actor is not an operator.
            ScheduleNotFoundError: No such schedule.
            ValueError: A field is unknown or cannot change (``id``), both
                ``cron`` and ``every`` are given, or the changed schedule is
                refused (a bad cron expression, an unknown time zone; the
                message names the field). Nothing is changed.
            TypeError: A value of the wrong type (an input that is not JSON data).
        """
        if isinstance(schedule, Schedule):
            if changes:
                msg = "update() takes a Schedule, or its id and the fields to change; not both"
                raise TypeError(msg)
            schedule_id = schedule.id
        else:
            schedule_id = schedule
            _check_changes(schedule_id, changes)

        def change(row: ScheduleRow) -> ScheduleRow:
            before = read_schedule(row)
            after = schedule if isinstance(schedule, Schedule) else _changed(before, changes)
            if after.workflow != before.workflow:
                msg = (
                    f"schedule {schedule_id!r} runs {before.workflow!r}, not {after.workflow!r}: "
                    f"a schedule's workflow never changes (create another schedule)"
                )
                raise ValueError(msg)
            cursor = row.cursor
            if _times(before) != _times(after):
                first = after.next_after(self.clock.now())
                cursor = dataclasses.replace(cursor, next_at=first, fire_at=after.fire_at(first))
            return dataclasses.replace(
                row, workflow=after.workflow, spec=_spec(after), cursor=cursor
            )

        return await self._change(schedule_id, "schedule_updated", change)

    async def pause(self, schedule_id: str, note: str | None = None) -> ScheduleInfo:
        """Hold the schedule's ticks until :meth:`unpause` (the ticks meanwhile never start).

        Raises:
            ActionRefusedError: The actor is not an operator.
            ScheduleNotFoundError: No such schedule.
        """
        return await self._change(
            schedule_id,
            "schedule_paused",
            lambda row: dataclasses.replace(row, paused=True, note=note),
        )

    async def unpause(self, schedule_id: str) -> ScheduleInfo:
        """Let the schedule tick again, from the first of its times after now.

        Raises:
            ActionRefusedError: The actor is not an operator.
            ScheduleNotFoundError: No such schedule.
        """

        def change(row: ScheduleRow) -> ScheduleRow:
            if not row.paused:
                return row
            schedule = read_schedule(row)
            first = schedule.next_after(self.clock.now())
            cursor = dataclasses.replace(row.cursor, next_at=first, fire_at=schedule.fire_at(first))
            return dataclasses.replace(row, paused=False, note=None, cursor=cursor)

        return await self._change(schedule_id, "schedule_unpaused", change)

    async def _change(self, schedule_id: str, action: str, change: Any) -> ScheduleInfo:
        self._check()
        for _ in range(_RETRIES):
            row = await self.store.get_schedule(schedule_id)
            changed = change(row)
            stored = await self.store.put_schedule(
                changed,
                actor=self.actor,
                action=action,
                revision=row.revision,
                detail={"changed": _difference(row, changed)},
            )
            if stored is not None:
                return info_of(stored)
        msg = f"schedule {schedule_id!r} kept changing; try again"  # pragma: no cover
        raise RuntimeError(msg)  # pragma: no cover - a tick a round cannot outrun 20 reads

    async def trigger(self, schedule_id: str) -> str:
        """Start a run of the schedule now, whatever its times or pause; return its id.

        The run is recorded as a tick of now (``source="trigger"``) and
        started whatever the overlap policy says: someone asked for it.

        Raises:
            ActionRefusedError: The actor is not an operator.
            ScheduleNotFoundError: No such schedule.
        """
        self._check()
        nominal = round(self.clock.now(), 3)
        run_id = tick_run_id(schedule_id, nominal)
        why = f"triggered by {self.actor.label}"
        tick = TickRow(schedule_id, nominal, "trigger", "started", run_id, self.clock.now(), why)
        for _ in range(_RETRIES):
            row = await self.store.get_schedule(schedule_id)
            cursor = dataclasses.replace(row.cursor, last_run_id=run_id)
            done = await self.store.decide_ticks(
                schedule_id,
                row.revision,
                cursor,
                [tick],
                actor=self.actor,
                action="schedule_triggered",
            )
            if done is not None:
                await self._start_now(row)
                return run_id
        msg = f"schedule {schedule_id!r} kept changing; try again"  # pragma: no cover
        raise RuntimeError(msg)  # pragma: no cover

    async def backfill(
        self, schedule_id: str, start: datetime, end: datetime, *, dry_run: bool = False
    ) -> ScheduleBackfill:
        """Start the runs of the schedule's ticks from ``start`` to ``end`` (both included).

        Each tick starts the run a tick of that time starts (the same id), so
        a tick already started (by the schedule, or by another backfill,
        also one racing this one) starts nothing new; a tick skipped or
        missed starts now. Ticks are started whatever the overlap policy.
        ``dry_run`` lists the ticks and records nothing.

        Raises:
            ValueError: ``end`` is before ``start`` or in the future, or the
                range holds more than :data:`MOST_BACKFILLED` ticks.
            ActionRefusedError: The actor is not an operator (also for a dry run).
            ScheduleNotFoundError: No such schedule.
        """
        self._check()
        row = await self.store.get_schedule(schedule_id)
        schedule = read_schedule(row)
        first, last = _aware(start).timestamp(), _aware(end).timestamp()
        now = self.clock.now()
        if last < first:
            msg = f"backfill of {schedule_id!r}: the end {end} is before the start {start}"
            raise ValueError(msg)
        if last > now:
            msg = f"backfill of {schedule_id!r}: the end {end} is in the future"
            raise ValueError(msg)
        nominals = schedule.ticks_between(
            math.nextafter(first, -math.inf), last, limit=MOST_BACKFILLED + 1
        )
        if len(nominals) > MOST_BACKFILLED:
            msg = (
                f"backfill of {schedule_id!r}: more than {MOST_BACKFILLED} ticks in the range; "
                "backfill it in parts"
            )
            raise ValueError(msg)
        listed = ScheduleBackfill(
            tuple(schedule.local(n) for n in nominals),
            tuple(schedule.run_id(n) for n in nominals),
        )
        if dry_run:
            return listed
        why = f"backfilled by {self.actor.label}"
        ticks = [
            TickRow(schedule_id, n, "backfill", "started", schedule.run_id(n), now, why)
            for n in nominals
        ]
        inserted = await self.store.decide_ticks(
            schedule_id, None, None, ticks, actor=self.actor, action="schedule_backfilled"
        )
        await self._start_now(row)
        recorded = tuple(schedule.local(n) for n in inserted or ())
        return dataclasses.replace(listed, recorded=recorded)

    async def _start_now(self, row: ScheduleRow) -> None:
        if self.starter is not None:
            await start_unstarted(self.store, row, self.starter)

    async def delete(self, schedule_id: str) -> None:
        """Delete the schedule and the record of its ticks; its runs stay.

        Raises:
            ActionRefusedError: The actor is not an operator.
            ScheduleNotFoundError: No such schedule.
        """
        self._check()
        await self.store.delete_schedule(schedule_id, actor=self.actor)

    async def get(self, schedule_id: str) -> ScheduleInfo:
        """The stored schedule.

        Raises:
            ScheduleNotFoundError: No such schedule.
        """
        return info_of(await self.store.get_schedule(schedule_id))

    async def ticks(self, schedule_id: str, *, limit: int = 20) -> builtins.list[TickRow]:
        """The schedule's recorded ticks, newest first, with their runs' status and outcome."""
        return await self.store.list_ticks(schedule_id, limit=limit)

    async def list(self, *, workflow: str | None = None) -> builtins.list[ScheduleInfo]:
        """Every stored schedule (of ``workflow``), by id."""
        return [info_of(row) for row in await self.store.list_schedules(workflow=workflow)]


def _spec(schedule: Schedule) -> str:
    return json.dumps(schedule.to_json(), sort_keys=True)


CHANGEABLE = frozenset({"cron", "every", "tz", "input", "overlap", "catchup", "jitter", "version"})
"""The fields :meth:`Schedules.update` changes by name: all but its id and its workflow.

A schedule's ticks are runs of its workflow, recorded under it: a schedule
of another workflow is another schedule (its own id, its own record).
"""


def _check_changes(schedule_id: str, changes: dict[str, Any]) -> None:
    """Refuse, before anything is read, a change no schedule can take."""
    unknown = sorted(set(changes) - CHANGEABLE)
    if unknown:
        fixed = sorted({"id", "workflow"} & set(unknown))
        verb = "changes" if len(fixed) == 1 else "change"
        why = f" (a schedule's {' and '.join(fixed)} never {verb}: create another)" if fixed else ""
        msg = (
            f"schedule {schedule_id!r}: cannot change {', '.join(unknown)}{why}; "
            f"the fields that change are {', '.join(sorted(CHANGEABLE))}"
        )
        raise ValueError(msg)
    if changes.get("cron") is not None and changes.get("every") is not None:
        msg = f"schedule {schedule_id!r}: give one of cron= and every=, not both"
        raise ValueError(msg)


def _changed(schedule: Schedule, changes: dict[str, Any]) -> Schedule:
    """``schedule`` with ``changes``; the one of ``cron`` and ``every`` given replaces the other."""
    fields = dict(changes)
    if fields.get("cron") is not None:
        fields.setdefault("every", None)
    if fields.get("every") is not None:
        fields.setdefault("cron", None)
    return dataclasses.replace(schedule, **fields)


def _difference(before: ScheduleRow, after: ScheduleRow) -> dict[str, list[Any]]:
    """What a change changed, field by field, as ``[before, after]`` (for its audit entry)."""
    old = {**before.spec_json(), "paused": before.paused, "note": before.note}
    new = {**after.spec_json(), "paused": after.paused, "note": after.note}
    return {name: [old.get(name), value] for name, value in new.items() if old.get(name) != value}


def _times(schedule: Schedule) -> tuple[Any, ...]:
    data = schedule.to_json()
    return (data["cron"], data["every"], data["tz"], data["jitter"])


def _aware(moment: datetime) -> datetime:
    """A naive datetime is read as UTC."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
