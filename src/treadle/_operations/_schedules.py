"""What the command line and the server do to schedules: one door, one shape of each.

Both build a :class:`~treadle.Schedule` from the fields a person typed
(:func:`schedule_from_fields`), change it through
:class:`~treadle.Schedules` as their actor (:func:`schedules_of`: on
PostgreSQL a trigger or a backfill queues its runs at once, elsewhere the
process serving the store starts them on its next round), and show it and
its ticks as the same JSON (:func:`schedule_json`, :func:`tick_json`).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from treadle._exceptions import CommandError
from treadle._operations._commands import served_by_workers
from treadle._values._durations import duration_problem
from treadle._values._schedules import Schedule
from treadle._workflow._schedule_actions import CHANGEABLE, Schedules

if TYPE_CHECKING:
    from treadle._stores._schedules import TickRow
    from treadle._stores._store import Store
    from treadle._values._actors import Actor
    from treadle._workflow._schedule_actions import ScheduleInfo

_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|[smhdw])")
_UNITS = MappingProxyType(
    {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 7 * 86400.0}
)


def parse_duration(text: str | float, what: str) -> timedelta:
    """``90s``, ``5m``, ``1h30m``, ``2d``, ``500ms`` or a number of seconds, as a ``timedelta``.

    Raises:
        CommandError: It is none of those (naming ``what`` it was for).
    """
    if isinstance(text, bool) or not isinstance(text, int | float | str):
        msg = f"{what} {text!r} is not a duration (write 90s, 5m, 1h30m, 2d or seconds)"
        raise CommandError(msg)
    if isinstance(text, int | float):
        seconds = float(text)
    else:
        compact = text.replace(" ", "").lower()
        parts = _DURATION.findall(compact)
        try:
            seconds = float(compact)
        except ValueError:
            if not parts or "".join(n + u for n, u in parts) != compact:
                msg = f"{what} {text!r} is not a duration (write 90s, 5m, 1h30m, 2d or seconds)"
                raise CommandError(msg) from None
            seconds = sum(float(n) * _UNITS[u] for n, u in parts)
    if (problem := duration_problem(seconds)) is not None:
        raise CommandError(f"{what} {text!r}: {problem}")
    return timedelta(seconds=seconds)


def parse_moment(text: str, what: str) -> datetime:
    """An ISO 8601 time (``2026-03-01T09:00+01:00``; without an offset, UTC).

    Raises:
        CommandError: It is not one.
    """
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        msg = f"{what} {text!r} is not an ISO 8601 time (e.g. 2026-03-01T09:00+01:00)"
        raise CommandError(msg) from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def schedule_from_fields(fields: dict[str, Any]) -> Schedule:
    """A schedule from typed fields (the CLI's options, an API body); durations as text or seconds.

    Raises:
        CommandError: A field is missing, unknown or refused (the message names it).
    """
    data = dict(fields)
    for name in ("every", "catchup", "jitter"):
        if data.get(name) is not None:
            data[name] = parse_duration(data[name], name)
    try:
        return Schedule.from_json(data)
    except (ValueError, TypeError) as error:
        raise CommandError(str(error)) from None


_NULLABLE = frozenset({"cron", "every", "input", "version"})


async def update_schedule(
    schedules: Schedules, schedule_id: str, fields: dict[str, Any]
) -> ScheduleInfo:
    """Change the fields given of a stored schedule (the CLI's options, a PATCH body).

    Durations are text or seconds, as :func:`schedule_from_fields` takes
    them; ``version: None`` unpins the runs (the newest version). Nothing is
    changed when anything is refused.

    Raises:
        CommandError: No field given, a field unknown, null where it cannot
            be, or a value refused (the message names the field).
        ScheduleNotFoundError: No such schedule.
    """
    if not fields:
        names = ", ".join(sorted(CHANGEABLE))
        msg = f"nothing to change in schedule {schedule_id!r}: give one of {names}"
        raise CommandError(msg)
    changes = dict(fields)
    for name, value in fields.items():
        if value is None and name not in _NULLABLE:
            msg = f"schedule {schedule_id!r}: {name} cannot be null"
            raise CommandError(msg)
        if name in {"every", "catchup", "jitter"} and value is not None:
            changes[name] = parse_duration(value, name)
        elif name in {"cron", "tz", "overlap"} and not isinstance(value, str | None):
            msg = f"schedule {schedule_id!r}: {name} must be a string, not {value!r}"
            raise CommandError(msg)
        elif name == "version" and (isinstance(value, bool) or not isinstance(value, int | None)):
            msg = f"schedule {schedule_id!r}: version must be a whole number or null, not {value!r}"
            raise CommandError(msg)
    try:
        return await schedules.update(schedule_id, **changes)
    except (ValueError, TypeError) as error:
        raise CommandError(str(error)) from None


def schedules_of(store: Store, actor: Actor) -> Schedules:
    """The store's schedules, changed as ``actor``; on PostgreSQL runs are queued at once."""
    if served_by_workers(store):
        from treadle._scaleout._tick_queue import QueueStarter  # noqa: PLC0415 - PostgreSQL only

        return Schedules(store, actor=actor, starter=QueueStarter(store))  # type: ignore[arg-type]
    return Schedules(store, actor=actor)


def schedule_json(
    info: ScheduleInfo, *, next_count: int = 5, now: float | None = None
) -> dict[str, Any]:
    """A schedule as the API and ``--json`` show it: its fields, state and next times."""
    data = info.to_json()
    clock = datetime.now(UTC).timestamp() if now is None else now
    after = clock
    if info.next_tick is not None:  # a tick not yet decided comes first, if it may still start
        cursor = info.next_tick.timestamp()
        if cursor + info.schedule.catchup_seconds >= clock:
            after = cursor - 0.001
    upcoming = [] if info.paused else info.schedule.next_times(next_count, after=after)
    data["next_times"] = [moment.isoformat() for moment in upcoming]
    return data


def tick_json(tick: TickRow, schedule: Schedule | None = None) -> dict[str, Any]:
    """A recorded tick, with its run's status and outcome."""
    local = (
        schedule.local(tick.nominal_at)
        if schedule is not None
        else datetime.fromtimestamp(tick.nominal_at, UTC)
    )
    return {
        "nominal": local.isoformat(),
        "source": tick.source,
        "action": tick.action,
        "run_id": tick.run_id,
        "run_status": tick.run_status,
        "run_outcome": tick.run_outcome,
        "decided_at": datetime.fromtimestamp(tick.decided_at, UTC).isoformat(),
        "detail": tick.detail,
    }
