"""What a schedule's next tick does, decided as a pure function of where it stands.

:func:`plan_tick` takes the schedule, its cursor, the time and whether the
run it started last is still going, and returns one :class:`TickDecision`:
the cursor to move to, the tick rows to record and the runs to start (or
cancel). It reads nothing and writes nothing; the ticker
(:mod:`treadle._workflow._ticker`) hands the decision to the store, which
applies it only if nobody moved the schedule meanwhile.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

from treadle._stores._schedules import ScheduleCursor, TickRow

if TYPE_CHECKING:
    from treadle._values._schedules import Schedule

_MISSED_COUNTED = 10_000


@dataclass(frozen=True, slots=True)
class TickDecision:
    """One step of a schedule: where its cursor goes, what is recorded and started.

    Attributes:
        cursor: The schedule's cursor after the step.
        ticks: The tick rows to record (started, skipped or missed).
        starts: Nominal times whose runs to start, once the step is stored.
        cancel: A run to cancel first (``overlap="cancel_other"``).
    """

    cursor: ScheduleCursor
    ticks: tuple[TickRow, ...]
    starts: tuple[float, ...] = ()
    cancel: str | None = None


def plan_tick(
    schedule: Schedule,
    cursor: ScheduleCursor,
    now: float,
    previous_running: bool,
    *,
    grace: float = 0.0,
) -> TickDecision | None:
    """The schedule's next step at ``now``, or ``None`` when nothing is due.

    In order: a tick buffered for the previous run starts once that run has
    ended; a due tick later than the catch-up window is recorded as missed,
    with every tick up to the first still within it; a due tick within the
    window follows the overlap policy when the previous run still goes.

    ``grace``: how late the serving process may come to a tick while it
    serves the store (its poll). A tick is late by what passes that: with
    ``catchup=0`` (or any window shorter than the poll) every tick was
    decided a moment after its time and recorded as missed, "nothing served
    the store then", and no run ever started.
    """
    if cursor.buffered and not previous_running:
        nominal, rest = cursor.buffered[0], cursor.buffered[1:]
        tick = _started(schedule, nominal, now, "it waited for the run before it to end")
        moved = ScheduleCursor(cursor.next_at, cursor.fire_at, rest, tick.run_id)
        return TickDecision(moved, (tick,), (nominal,))
    if cursor.next_at is None or cursor.fire_at is None or cursor.fire_at > now:
        return None
    nominal = cursor.next_at
    window = schedule.catchup_seconds + grace
    if cursor.fire_at + window < now:
        return _missed(schedule, cursor, now, window)
    following = schedule.next_after(nominal)
    moved = ScheduleCursor(
        following, schedule.fire_at(following), cursor.buffered, cursor.last_run_id
    )
    if not previous_running or schedule.overlap == "allow":
        tick = _started(schedule, nominal, now, "")
        return TickDecision(_last(moved, tick.run_id), (tick,), (nominal,))
    running = cursor.last_run_id
    if schedule.overlap == "cancel_other":
        tick = _started(schedule, nominal, now, f"cancelled run {running} that was still going")
        return TickDecision(_last(moved, tick.run_id), (tick,), (nominal,), cancel=running)
    if schedule.overlap == "buffer_all" or (
        schedule.overlap == "buffer_one" and not cursor.buffered
    ):
        held = ScheduleCursor(
            moved.next_at, moved.fire_at, (*cursor.buffered, nominal), moved.last_run_id
        )
        return TickDecision(held, ())
    why = (
        f"run {running} was still going and a tick is buffered already"
        if schedule.overlap == "buffer_one"
        else f"run {running} was still going"
    )
    return TickDecision(moved, (_row(schedule, nominal, now, "skipped", why),))


def _missed(schedule: Schedule, cursor: ScheduleCursor, now: float, window: float) -> TickDecision:
    """Every tick from the cursor's that is later than ``window``: one row says so."""
    assert cursor.next_at is not None  # noqa: S101 - the caller checked
    first = cursor.next_at
    # Ticks at or after this bound may still be within the window (by their jitter).
    bound = now - window - _seconds(schedule.jitter)
    kept = schedule.next_after(math.nextafter(max(bound, first), -math.inf))
    while schedule.fire_at(kept) + window < now:
        kept = schedule.next_after(kept)
    missed = schedule.ticks_between(math.nextafter(first, -math.inf), kept, limit=_MISSED_COUNTED)
    missed = [t for t in missed if t < kept]
    last = missed[-1] if missed else first
    count = f"{len(missed)}" if len(missed) < _MISSED_COUNTED else f"over {_MISSED_COUNTED}"
    why = (
        f"{count} tick(s) from {schedule.local(first).isoformat()} to "
        f"{schedule.local(last).isoformat()} came more than "
        f"{timedelta(seconds=schedule.catchup_seconds)} late "
        "(the catch-up window): nothing served the store then"
    )
    moved = ScheduleCursor(kept, schedule.fire_at(kept), cursor.buffered, cursor.last_run_id)
    return TickDecision(moved, (_row(schedule, first, now, "missed", why),))


def _seconds(value: object) -> float:
    return value.total_seconds() if isinstance(value, timedelta) else float(value or 0)  # type: ignore[arg-type]


def _last(cursor: ScheduleCursor, run_id: str | None) -> ScheduleCursor:
    return ScheduleCursor(cursor.next_at, cursor.fire_at, cursor.buffered, run_id)


def _started(schedule: Schedule, nominal: float, now: float, why: str) -> TickRow:
    return TickRow(schedule.id, nominal, "schedule", "started", schedule.run_id(nominal), now, why)


def _row(schedule: Schedule, nominal: float, now: float, action: str, why: str) -> TickRow:
    return TickRow(schedule.id, nominal, "schedule", action, None, now, why)
