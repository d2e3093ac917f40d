"""``Schedule``: when a workflow starts itself, as a frozen value that stores as JSON.

A schedule names a workflow and its times: a cron expression read in a
time zone (``cron="0 9 * * 1-5", tz="Europe/Paris"``), or an interval of
elapsed time (``every=timedelta(minutes=5)``). Each time it names is a
**tick**, known by its *nominal* instant; the run a tick starts has an id
made of the schedule's id and that instant (:meth:`Schedule.run_id`), so
whatever process starts it, and however often it tries, the store keeps
one run per tick.

**Daylight saving.** A cron expression names wall-clock times, and each
wall-clock time fires once:

* in the hour that is *repeated* when clocks go back, a time fires at its
  first occurrence only (``30 1 * * *`` in New York fires once on the
  first Sunday of November, at 01:30 EDT);
* a time that falls in the hour *skipped* when clocks go forward fires
  once, at the first instant after the jump (``30 2 * * *`` in Paris fires
  at 03:00 CEST on the last Sunday of March); times of one expression that
  all fall in the gap (``*/15 2 * * *``) fire once together, at that instant.

``every=`` counts elapsed time from the Unix epoch and knows nothing of
time zones: ``every=timedelta(hours=1)`` fires every real hour, through
either change. cronsim (the healthchecks.io cron engine: typed, maintained,
no dependencies) reads the expressions and steps through naive wall-clock
times; the mapping of those times to instants, above, is this module's.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal, get_args
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from treadle._values._ids import checked_run_id

if TYPE_CHECKING:
    from treadle._values._actors import Actor

Overlap = Literal["skip", "buffer_one", "buffer_all", "cancel_other", "allow"]
"""What a tick does while the schedule's previous run is still going (see :class:`Schedule`)."""

OVERLAPS: tuple[str, ...] = get_args(Overlap)

_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")
_CRON_FIELDS = 5
_PLACEHOLDERS = ("{nominal}", "{nominal_utc}", "{date}", "{schedule}")
MAX_EVERY = timedelta(days=36525)
"""The longest interval: a hundred years (longer put the next tick past what a datetime holds,
and the schedule was refused with "year 33658 is out of range", naming nothing)."""
MAX_CRON_LENGTH = 1_000
"""The longest cron expression: every value of every field listed one by one is under 400
characters. A longer one (a megabyte of ``1,``) took seconds to read, and it is read at each
tick and each listing, holding up everything else its serving process did."""
DEFAULT_CATCHUP = timedelta(hours=1)
"""How late a tick may still start by default: a restart or a short outage is caught up,
a day-long one does not start a day of runs at once."""


def _seconds(value: timedelta | float | None, name: str) -> timedelta | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, timedelta | int | float):
        msg = f"{name} takes a timedelta or seconds, not {value!r}"
        raise TypeError(msg)
    try:
        result = value if isinstance(value, timedelta) else timedelta(seconds=value)
    except (OverflowError, ValueError):  # inf, nan, or past timedelta's range
        msg = f"{name} must be a finite number of seconds, not {value!r}"
        raise ValueError(msg) from None
    if result < timedelta(0):
        msg = f"{name} cannot be negative, got {result}"
        raise ValueError(msg)
    return result


def _plain_input(value: Any) -> Any:
    """The input as JSON data: a pydantic model or dataclass becomes its fields."""
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        value = dump(mode="json")
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = dataclasses.asdict(value)
    try:
        json.dumps(value)
    except (TypeError, ValueError) as error:
        msg = f"a schedule's input is stored as JSON; {value!r} is not JSON data ({error})"
        raise TypeError(msg) from None
    return value


@dataclass(frozen=True, slots=True)
class Schedule:
    """A workflow that starts itself at the times of a cron expression or an interval.

    Args:
        workflow: The workflow's name (or the workflow: its name is taken).
        cron: A five-field cron expression (``"0 9 * * 1-5"``), read in ``tz``.
        every: An interval of elapsed time (a ``timedelta`` or seconds),
            ticking at whole multiples of it since the Unix epoch.
        tz: The IANA time zone the cron expression is read in.
        input: The input of each run, as JSON data (a pydantic model is
            taken as its fields). Inside its strings, ``{nominal}`` becomes
            the tick's time in ``tz`` (ISO 8601), ``{nominal_utc}`` the same in
            UTC, ``{date}`` its local date and ``{schedule}`` the schedule's id.
        overlap: What a tick does while the previous run it started is still
            going: ``"skip"`` it; ``"buffer_one"``: start it when that run ends
            (one tick kept, later ones skipped); ``"buffer_all"``: start every
            such tick, one after another; ``"cancel_other"``: cancel the
            running one and start; ``"allow"``: start regardless.
        catchup: How late a tick may start (a ``timedelta`` or seconds): ticks
            missed while nothing served the store start when something does,
            if no later than this after their time; older ones are recorded
            as missed.
        jitter: Each tick starts up to this much after its time, by an
            amount drawn from the schedule and the tick (the same in every
            process), to spread many schedules of one time over a window.
        version: The workflow version its runs start on (``None``: the
            newest the serving process hosts when the tick starts).
        id: The schedule's id, unique in the store (default: the workflow's name).

    Raises:
        ValueError: Not exactly one of ``cron`` and ``every``, a bad
            expression, an unknown time zone or overlap, or a bad id.
        TypeError: An input that is not JSON data.
    """

    workflow: Any
    cron: str | None = None
    every: timedelta | float | None = None
    tz: str = "UTC"
    input: Any = None
    overlap: Overlap = "skip"
    catchup: timedelta | float = DEFAULT_CATCHUP
    jitter: timedelta | float = timedelta(0)
    version: int | None = None
    id: str = ""

    def __post_init__(self) -> None:
        workflow = self.workflow
        if not isinstance(workflow, str):
            name = getattr(workflow, "name", None)
            if not isinstance(name, str):
                msg = f"Schedule takes a workflow or its name, not {workflow!r}"
                raise TypeError(msg)
            object.__setattr__(self, "workflow", name)
        set_ = object.__setattr__
        set_(self, "every", _seconds(self.every, "every"))
        set_(self, "catchup", _seconds(self.catchup, "catchup"))
        set_(self, "jitter", _seconds(self.jitter, "jitter"))
        set_(self, "input", _plain_input(self.input))
        if not self.id:
            set_(self, "id", self.workflow)
        problems = self._problems()
        if problems:
            msg = f"schedule {self.id!r}: " + "; ".join(problems)
            raise ValueError(msg)

    def _problems(self) -> list[str]:
        problems: list[str] = []
        if not _ID.fullmatch(self.id):
            problems.append(
                f"id {self.id!r} must be 1-100 letters, digits, '_', '.' or '-', "
                "starting with a letter or digit"
            )
        if (self.cron is None) == (self.every is None):
            problems.append("give exactly one of cron= and every=")
        if self.cron is not None and not isinstance(self.cron, str):
            problems.append(f"cron must be a cron expression as text, got {self.cron!r}")
        elif self.cron is not None and len(self.cron) > MAX_CRON_LENGTH:
            problems.append(
                f"cron is {len(self.cron):,} characters long; a cron expression is at most "
                f"{MAX_CRON_LENGTH:,}"
            )
        elif self.cron is not None and len(self.cron.split()) != _CRON_FIELDS:
            # cronsim reads a sixth field as seconds: "0 9 * * * *" ran at minute 9 of every hour.
            count = len(self.cron.split())
            problems.append(
                f"cron {self.cron!r} is not a cron expression: it has {count} field"
                f"{'' if count == 1 else 's'}, not five (minute hour day-of-month month weekday)"
            )
        elif self.cron is not None:
            from cronsim import CronSim, CronSimError  # noqa: PLC0415 - only cron schedules need it

            try:
                CronSim(self.cron, datetime(2000, 1, 1))  # noqa: DTZ001 - wall-clock times
            except CronSimError as error:
                problems.append(f"cron {self.cron!r} is not a cron expression: {error}")
        if self.every is not None and self.interval_ms < 1:
            problems.append("every= must be at least a millisecond")
        if isinstance(self.every, timedelta) and self.every > MAX_EVERY:
            problems.append(f"every= must be at most a hundred years, got {self.every}")
        try:
            ZoneInfo(self.tz)
        except (ZoneInfoNotFoundError, ValueError, TypeError, OSError):  # OSError: a name too long
            problems.append(f"tz {self.tz!r} is not an IANA time zone (e.g. 'Europe/Paris')")
        if self.overlap not in OVERLAPS:
            problems.append(f"overlap {self.overlap!r} is not one of {', '.join(OVERLAPS)}")
        if self.version is not None and (isinstance(self.version, bool) or self.version < 1):
            problems.append(f"version must be a positive integer or None, got {self.version!r}")
        return problems

    # --- times -------------------------------------------------------------------------

    @property
    def zone(self) -> ZoneInfo:
        """The time zone, as ``zoneinfo`` gives it."""
        return ZoneInfo(self.tz)

    @property
    def interval_ms(self) -> int:
        """``every`` in whole milliseconds (0 for a cron schedule)."""
        every = self.every
        return 0 if not isinstance(every, timedelta) else every // timedelta(milliseconds=1)

    def next_after(self, instant: float) -> float:
        """The nominal time of the first tick strictly after ``instant`` (Unix seconds)."""
        if self.cron is None:
            step = self.interval_ms
            # ``instant * 1000`` is a float: a tick's own time may read a hair below it (the
            # "next" tick was then the same one, for ever) and a time a hair before a tick
            # may read as the tick (skipping it). The guess is checked against the times.
            index = math.floor(instant * 1000) // step + 1
            while index * step / 1000 <= instant:
                index += 1
            while (index - 1) * step / 1000 > instant:
                index -= 1
            return index * step / 1000
        from cronsim import CronSim  # noqa: PLC0415 - only cron schedules need it

        zone = self.zone
        # From the whole second at or before it: microseconds would round a hair before
        # a tick up onto the tick itself, and cron times are whole minutes anyway.
        wall = datetime.fromtimestamp(math.floor(instant), zone).replace(tzinfo=None)
        for local in CronSim(self.cron, wall):
            found = _instant_of(local, zone)
            if found > instant:  # earlier: a repeated hour's time, fired at its first occurrence
                return found
        msg = f"cron {self.cron!r} has no time after {instant}"  # pragma: no cover - cronsim ends
        raise ValueError(msg)  # pragma: no cover

    def ticks_between(self, start: float, end: float, *, limit: int = 100_000) -> list[float]:
        """Nominal times of the ticks in ``(start, end]``, oldest first (at most ``limit``)."""
        found: list[float] = []
        tick = self.next_after(start)
        while tick <= end and len(found) < limit:
            found.append(tick)
            tick = self.next_after(tick)
        return found

    def next_times(
        self, count: int = 5, *, after: float | datetime | None = None
    ) -> list[datetime]:
        """The next ``count`` ticks after ``after`` (default: now), in the schedule's time zone."""
        if after is None:
            after = datetime.now(UTC)
        start = after.timestamp() if isinstance(after, datetime) else float(after)
        times: list[datetime] = []
        for _ in range(count):
            start = self.next_after(start)
            times.append(self.local(start))
        return times

    def local(self, nominal: float) -> datetime:
        """A nominal time as an aware datetime in the schedule's time zone."""
        return datetime.fromtimestamp(nominal, self.zone)

    def fire_at(self, nominal: float) -> float:
        """When the tick of ``nominal`` is due: its time plus its share of ``jitter``."""
        jitter = self.jitter
        if not isinstance(jitter, timedelta) or not jitter:
            return nominal
        digest = hashlib.sha256(f"{self.id}@{nominal!r}".encode()).digest()
        share = int.from_bytes(digest[:8]) / 2**64
        return nominal + share * jitter.total_seconds()

    @property
    def catchup_seconds(self) -> float:
        """``catchup`` in seconds."""
        catchup = self.catchup
        return catchup.total_seconds() if isinstance(catchup, timedelta) else float(catchup or 0)

    # --- what a tick starts ------------------------------------------------------------

    def run_id(self, nominal: float) -> str:
        """The id of the run the tick of ``nominal`` starts: ``ID@YYYYMMDDTHHMMSSZ``.

        Milliseconds are added when the time has some (an ``every`` below a
        second, a trigger), so two ticks never share an id.
        """
        return tick_run_id(self.id, nominal)

    def input_at(self, nominal: float) -> Any:
        """The input of the run of ``nominal``, its placeholders filled in."""
        local = self.local(nominal)
        values = {
            "{nominal}": local.isoformat(),
            "{nominal_utc}": local.astimezone(UTC).isoformat().replace("+00:00", "Z"),
            "{date}": local.date().isoformat(),
            "{schedule}": self.id,
        }
        return _filled(self.input, values)

    def describe(self) -> str:
        """The times in words (``"At 09:00 on Monday through Friday (Europe/Paris)"``)."""
        if self.cron is None:
            return f"every {self.every}"
        from cronsim import CronSim  # noqa: PLC0415 - only cron schedules need it

        text = CronSim(self.cron, datetime(2000, 1, 1)).explain()  # noqa: DTZ001 - wall-clock
        return f"{text} ({self.tz})"

    # --- as stored -----------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        """The schedule as plain JSON, as stores keep it and the API shows it."""
        every = self.every
        return {
            "id": self.id,
            "workflow": self.workflow,
            "cron": self.cron,
            "every": every.total_seconds() if isinstance(every, timedelta) else None,
            "tz": self.tz,
            "input": self.input,
            "overlap": self.overlap,
            "catchup": self.catchup_seconds,
            "jitter": _total(self.jitter),
            "version": self.version,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Schedule:
        """The schedule :meth:`to_json` gave (also a body of the HTTP API).

        Raises:
            ValueError: A field is unknown or its value is refused.
            TypeError: A value is of the wrong type.
        """
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            names = ", ".join(sorted(known))
            msg = f"unknown schedule field(s): {', '.join(unknown)} (known: {names})"
            raise ValueError(msg)
        if "workflow" not in data:
            msg = "a schedule needs a workflow"
            raise ValueError(msg)
        fields = {k: v for k, v in data.items() if v is not None or k in {"input", "version"}}
        return cls(**fields)


def _total(value: timedelta | float | None) -> float:
    return value.total_seconds() if isinstance(value, timedelta) else float(value or 0)


_TICK_RUN_ID = re.compile(rf"({_ID.pattern})@\d{{8}}T\d{{6}}(?:\.\d{{3}})?Z")


def tick_run_id_refusal(run_id: str, actor: Actor | None = None) -> str | None:
    """Why a new run may not be given ``run_id`` by ``actor``, if so.

    An id of the form ``SCHEDULE@TIME`` (:func:`tick_run_id`) is the one the
    schedule ``SCHEDULE``'s tick of ``TIME`` starts its run with, and a tick
    whose id is taken starts nothing (the run is taken for the tick's). So
    only that schedule (the service ``schedule:SCHEDULE``) gives a run such
    an id: anyone else who did would take the tick's run away from it.
    """
    match = _TICK_RUN_ID.fullmatch(run_id)
    if match is None:
        return None
    if actor is not None and (actor.kind, actor.name) == ("service", f"schedule:{match.group(1)}"):
        return None
    return (
        f"run_id {run_id!r} has the form SCHEDULE@TIME that schedule {match.group(1)!r}"
        f" names its runs by; only the schedule gives a run such an id"
    )


def chosen_run_id(run_id: object, actor: Actor | None = None) -> str:
    """A run id a caller chose for a new run: one every door can name, and no tick's of another.

    Raises:
        TypeError: it is not a ``str``.
        ValueError: it breaks ``RUN_ID_RULE``, or it has a schedule's tick's
            form and ``actor`` is not that schedule (:func:`tick_run_id_refusal`).
    """
    chosen = checked_run_id(run_id)
    refusal = tick_run_id_refusal(chosen, actor)
    if refusal is not None:
        raise ValueError(refusal)
    return chosen


def tick_run_id(schedule_id: str, nominal: float) -> str:
    """The id of the run a schedule's tick at ``nominal`` starts (see :meth:`Schedule.run_id`)."""
    millis = round(nominal * 1000)
    when = datetime.fromtimestamp(millis // 1000, UTC).strftime("%Y%m%dT%H%M%S")
    rest = millis % 1000
    return f"{schedule_id}@{when}{f'.{rest:03d}' if rest else ''}Z"


def _instant_of(local: datetime, zone: ZoneInfo) -> float:
    """The instant of a wall-clock time in ``zone``: its first occurrence, or after a gap.

    A time in a repeated hour is taken at its first occurrence (``fold=0``);
    a time in a skipped hour does not exist, and is taken as the first
    instant after the gap (the moment clocks jumped).
    """
    first = local.replace(tzinfo=zone, fold=0)
    instant = first.timestamp()
    if datetime.fromtimestamp(instant, zone).replace(tzinfo=None) == local:
        return instant
    # In a gap: fold 0 and fold 1 read it with the offsets of either side; the
    # jump lies between them. Find the first whole second whose wall time is past it.
    low, high = sorted((int(instant), int(local.replace(tzinfo=zone, fold=1).timestamp())))
    while low < high:
        middle = (low + high) // 2
        if datetime.fromtimestamp(middle, zone).replace(tzinfo=None) >= local:
            high = middle
        else:
            low = middle + 1
    return float(low)


def _filled(value: Any, values: dict[str, str]) -> Any:
    if isinstance(value, str):
        for placeholder in _PLACEHOLDERS:
            if placeholder in value:
                value = value.replace(placeholder, values[placeholder])
        return value
    if isinstance(value, list):
        return [_filled(item, values) for item in value]
    if isinstance(value, dict):
        return {key: _filled(item, values) for key, item in value.items()}
    return value
