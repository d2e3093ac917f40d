"""Serving schedules: deciding their due ticks in the store and starting the runs they name.

Whatever wakes a store's due runs also serves its schedules, in the same
round of the same loop: ``Runtime.wake_due`` (and so ``treadle serve`` on
SQLite), and each ``treadle worker`` on PostgreSQL. Each round,
:func:`serve_schedules` asks the store for the schedules of the workflows
this process hosts that have work, and for each:

1. finishes the started ticks whose run is not known to exist (their
   decider died between the decision and the run; a trigger or a backfill
   recorded them for a serving process to start);
2. decides its due ticks one at a time (:func:`~treadle._workflow._tick_plan.plan_tick`),
   each decision applied by the store only if the schedule's revision is
   still the one read (``decide_ticks``): of two processes deciding one
   tick, one moves the schedule on and the other changes nothing and
   leaves it; the decision is audited as ``schedule_ticked`` by the
   schedule itself (:func:`schedule_actor`, a service), whichever process
   served it;
3. starts the run of each started tick through its :class:`Starter`,
   under the id the schedule and the tick's nominal time make. Creating a
   run whose id is taken creates nothing, so a run is made once however
   many processes try; then the tick is marked started.

Nothing here checks and then acts on what it read: the store's revision
check and its unique run ids decide.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from treadle._engine._result import ENDED, RunStatus
from treadle._exceptions import (
    DurabilityError,
    RequestError,
    RunNotFoundError,
    TreadleError,
)
from treadle._values._actors import Actor
from treadle._values._schedules import Schedule
from treadle._workflow import _actions as door
from treadle._workflow._tick_plan import plan_tick

if TYPE_CHECKING:
    from collections.abc import Collection

    from treadle._stores._schedules import ScheduleCursor, ScheduleRow, TickRow
    from treadle._stores._store import Store

logger = logging.getLogger("treadle.schedules")

_STEPS = 100  # decisions per schedule per round: a long catch-up goes on next round
_UNSTARTED = 100
DUE_PAGE = 100
"""The most schedules a round serves (a backlog goes on next round)."""
_FIRST_HOLD = 1.0  # seconds a schedule that failed here is held back at first,
_LONGEST_HOLD = 300.0  # doubling at each failure, to at most this


@dataclass(slots=True)
class HeldBack:
    """Schedules this process failed to serve, each held back from its rounds for a while.

    A schedule whose tick cannot start here (its input does not fit the
    workflow this process hosts under its name, its run cannot be made here)
    stays due, first in line, for ever: a hundred of them filled each round
    and no other schedule ticked. Each failure holds it back from this
    process's rounds twice as long as the one before (a second at first, five
    minutes at most); a round that serves it clears that. Another process,
    which may serve it, holds back nothing.
    """

    until: dict[str, tuple[float, float]] = dataclasses.field(default_factory=dict)
    """By schedule id: when it may be served here again, and for how long it was held."""

    def held(self, now: float) -> frozenset[str]:
        """The schedules held back at ``now``."""
        return frozenset(key for key, (until, _) in self.until.items() if until > now)

    def ordered(self, due: list[ScheduleRow], now: float) -> list[ScheduleRow]:
        """``due`` less those held back, those that failed here before last: tried again after.

        One no longer due once its hold has ended (served elsewhere, paused,
        deleted) is forgotten: each round reads as many more rows as are kept.
        """
        named = {row.schedule_id for row in due}
        for key in [k for k, (until, _) in self.until.items() if until <= now and k not in named]:
            del self.until[key]
        held = self.held(now)
        fresh = [row for row in due if row.schedule_id not in self.until]
        again = [row for row in due if row.schedule_id in self.until.keys() - held]
        return fresh + again

    def failed(self, schedule_id: str, now: float) -> float:
        """Hold ``schedule_id`` back (it failed here at ``now``); for how many seconds."""
        _, last = self.until.get(schedule_id, (now, _FIRST_HOLD / 2))
        hold = min(last * 2, _LONGEST_HOLD)
        self.until[schedule_id] = (now + hold, hold)
        return hold

    def served(self, schedule_id: str) -> None:
        """``schedule_id`` was served here: it is held back no more."""
        self.until.pop(schedule_id, None)


@dataclass(frozen=True, slots=True)
class TickStart:
    """A run a tick starts: everything a :class:`Starter` needs.

    Attributes:
        schedule: The schedule.
        nominal: The tick's nominal time.
        run_id: The run's id (the schedule's and the nominal time's).
        input: The run's input, as JSON data (placeholders filled in).
        actor: Who starts it: the schedule, as a service.
    """

    schedule: Schedule
    nominal: float
    run_id: str
    input: Any
    actor: Actor


class Starter(Protocol):
    """How a serving process creates a tick's run (its store, its way of running runs)."""

    async def start_tick(self, tick: TickStart) -> None:
        """Create the run; a run of that id existing already is no error (nothing is made).

        Raises:
            TreadleError: The run cannot be made here (its workflow or
                version is not hosted, its input does not fit): the tick
                stays unstarted for a process that can.
        """
        ...


def schedule_actor(schedule_id: str, on_behalf_of: tuple[str, ...] = ()) -> Actor:
    """The actor of what a schedule does itself: a service, through the door ``schedule``.

    ``on_behalf_of``: the people who set its run going (see :func:`responsible`).
    """
    return Actor.service(f"schedule:{schedule_id}", door="schedule", on_behalf_of=on_behalf_of)


def tick_start(schedule: Schedule, nominal: float, on_behalf_of: tuple[str, ...] = ()) -> TickStart:
    """The run the tick of ``nominal`` starts, for ``on_behalf_of`` (see :func:`responsible`)."""
    return TickStart(
        schedule,
        nominal,
        schedule.run_id(nominal),
        schedule.input_at(nominal),
        schedule_actor(schedule.id, on_behalf_of),
    )


def responsible(row: ScheduleRow, tick: TickRow | None = None) -> tuple[str, ...]:
    """Who a tick's run counts as started by, for four eyes: the people who set it going.

    The schedule's creator (each of its runs is theirs), and for a tick
    someone asked for (a trigger, a backfill), who asked, as the tick's
    record names them.
    """
    people = [row.created_by]
    if tick is not None and tick.source in ("trigger", "backfill"):
        asker = tick.detail.partition(" by ")[2]
        if asker:
            people.append(asker)
    return tuple(dict.fromkeys(people))


async def serve_schedules(
    store: Store,
    workflows: Collection[str],
    now: float,
    starter: Starter,
    *,
    held_back: HeldBack | None = None,
    grace: float = 0.0,
) -> int:
    """Decide the due ticks of the schedules of ``workflows`` and start their runs.

    ``grace``: how late this process may come to a tick while serving (its
    poll interval): a tick is late, for the catch-up window, by what passes it.

    Returns how many runs this call started (created, or found made by
    another process). A schedule that fails (its spec cannot be read, its
    run cannot be made here) is logged and, with ``held_back`` (the serving
    process's own), left out of this process's rounds for a while, then tried
    after the others (see :class:`HeldBack`); at most :data:`DUE_PAGE` a round.
    """
    failed = 0 if held_back is None else len(held_back.until)
    due = await store.due_schedules(now, workflows, limit=DUE_PAGE + failed)
    started = 0
    for row in (due if held_back is None else held_back.ordered(due, now))[:DUE_PAGE]:
        try:
            started += await _serve(store, row, now, starter, grace)
        except DurabilityError as error:
            logger.warning("schedule %s: the store failed: %s", row.schedule_id, error)
            continue
        except (TreadleError, ValueError, TypeError) as error:
            hold = None if held_back is None else held_back.failed(row.schedule_id, now)
            then = "" if hold is None else f" (tried here again in {hold:g} s)"
            logger.error("schedule %s cannot tick here: %s%s", row.schedule_id, error, then)  # noqa: TRY400 - the reason is the message
            continue
        if held_back is not None:
            held_back.served(row.schedule_id)
    return started


def read_schedule(row: ScheduleRow) -> Schedule:
    """The schedule a row keeps.

    Raises:
        ValueError, TypeError: Its spec is not a schedule (written by another treadle).
    """
    return Schedule.from_json(row.spec_json())


async def _serve(store: Store, row: ScheduleRow, now: float, starter: Starter, grace: float) -> int:
    schedule = read_schedule(row)
    started = await start_unstarted(store, row, starter)
    if row.paused:
        return started
    for _ in range(_STEPS):
        running = await _still_running(store, row.cursor.last_run_id)
        decision = plan_tick(schedule, row.cursor, now, running, grace=grace)
        if decision is None:
            break
        inserted = await store.decide_ticks(
            row.schedule_id,
            row.revision,
            decision.cursor,
            decision.ticks,
            actor=schedule_actor(schedule.id),
            action="schedule_ticked",
        )
        if inserted is None:  # another process decided this tick: it starts its run
            break
        for tick in decision.ticks:
            if tick.action != "started":
                logger.info(
                    "schedule %s: tick %s %s: %s",
                    schedule.id,
                    schedule.local(tick.nominal_at).isoformat(),
                    tick.action,
                    tick.detail,
                )
        if decision.cancel is not None:
            await _cancel(store, schedule, decision.cancel)
        for nominal in decision.starts:
            await _start(store, starter, schedule, nominal, responsible(row))
            started += 1
        row = _moved(row, decision.cursor)
    return started


async def start_unstarted(store: Store, row: ScheduleRow, starter: Starter) -> int:
    """Start the runs of the schedule's started ticks whose run is not known to exist."""
    schedule = read_schedule(row)
    ticks = await store.list_ticks(schedule.id, unstarted=True, limit=_UNSTARTED)
    for tick in ticks:
        await _start(store, starter, schedule, tick.nominal_at, responsible(row, tick))
    return len(ticks)


async def _start(
    store: Store,
    starter: Starter,
    schedule: Schedule,
    nominal: float,
    on_behalf_of: tuple[str, ...],
) -> None:
    start = tick_start(schedule, nominal, on_behalf_of)
    await starter.start_tick(start)
    await store.mark_started(schedule.id, [nominal])
    logger.info(
        "schedule %s: tick %s started run %s",
        schedule.id,
        schedule.local(nominal).isoformat(),
        start.run_id,
    )


async def _still_running(store: Store, run_id: str | None) -> bool:
    if run_id is None:
        return False
    try:
        row = await store.get_run(run_id)
    except RunNotFoundError:  # not made yet (its tick is unstarted), or deleted since
        return False
    return RunStatus(row.status) not in ENDED


async def _cancel(store: Store, schedule: Schedule, run_id: str) -> None:
    try:
        await door.cancel(store, run_id, actor=schedule_actor(schedule.id))
    except (RunNotFoundError, RequestError) as error:  # it ended meanwhile: nothing to cancel
        logger.info("schedule %s: run %s not cancelled: %s", schedule.id, run_id, error)


def _moved(row: ScheduleRow, cursor: ScheduleCursor) -> ScheduleRow:
    return dataclasses.replace(row, cursor=cursor, revision=row.revision + 1)
